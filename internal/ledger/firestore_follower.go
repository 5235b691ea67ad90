package ledger

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// The follower lease is one document, state/follower, with the fields
// holder, until, updatedAt and kickAt (a kick pending since then). Taking and releasing it are conditional
// writes on the document as read (commit's update-time precondition), so
// of concurrent takers exactly one wins; a loser reads again and sees the
// winner's live lease.

var _ remediate.FollowerLease = (*Firestore)(nil)

type followerDoc struct {
	Holder    string    `firestore:"holder"`
	Until     time.Time `firestore:"until"`
	UpdatedAt time.Time `firestore:"updatedAt"`
	KickAt    time.Time `firestore:"kickAt"`
}

func (f *Firestore) followerRef() *firestore.DocumentRef {
	return f.col(CollectionState).Doc("follower")
}

func (f *Firestore) readFollower(ctx context.Context) (*firestore.DocumentSnapshot, followerDoc, error) {
	snaps, err := f.client.GetAll(ctx, []*firestore.DocumentRef{f.followerRef()}) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return nil, followerDoc{}, err
	}
	var d followerDoc
	if s := snaps[0]; s.Exists() {
		if err := s.DataTo(&d); err != nil {
			return nil, followerDoc{}, err
		}
	}
	return snaps[0], d, nil
}

// TakeFollower implements remediate.FollowerLease.
func (f *Firestore) TakeFollower(ctx context.Context, holder string, now, until time.Time) (bool, error) {
	if holder == "" {
		return false, fmt.Errorf("take follower lease: empty holder")
	}
	var err error
	for round := 0; round < casRounds; round++ {
		var snap *firestore.DocumentSnapshot
		var d followerDoc
		if snap, d, err = f.readFollower(ctx); err != nil {
			return false, fmt.Errorf("take follower lease: %w", err)
		}
		if d.Holder != "" && d.Holder != holder && d.Until.After(now) {
			return false, nil
		}
		data := map[string]any{"holder": holder, "until": until, "updatedAt": f.clock()}
		if err = f.commit(ctx, write{snap: snap, data: data}); err == nil {
			return true, nil
		}
		if !lostRace(err) {
			return false, fmt.Errorf("take follower lease: %w", err)
		}
	}
	return false, fmt.Errorf("take follower lease: contention persisted: %w", err)
}

// ReleaseFollower implements remediate.FollowerLease.
func (f *Firestore) ReleaseFollower(ctx context.Context, holder string) error {
	var err error
	for round := 0; round < casRounds; round++ {
		var snap *firestore.DocumentSnapshot
		var d followerDoc
		if snap, d, err = f.readFollower(ctx); err != nil {
			return fmt.Errorf("release follower lease: %w", err)
		}
		if !snap.Exists() || d.Holder != holder {
			return nil
		}
		data := map[string]any{"holder": "", "until": time.Time{}, "updatedAt": f.clock()}
		if err = f.commit(ctx, write{snap: snap, data: data}); err == nil {
			return nil
		}
		if !lostRace(err) {
			return fmt.Errorf("release follower lease: %w", err)
		}
	}
	return fmt.Errorf("release follower lease: contention persisted: %w", err)
}

// FollowerHeld implements remediate.FollowerLease.
func (f *Firestore) FollowerHeld(ctx context.Context, now time.Time) (bool, error) {
	_, d, err := f.readFollower(ctx)
	if err != nil {
		return false, fmt.Errorf("read follower lease: %w", err)
	}
	return d.Holder != "" && d.Until.After(now), nil
}

// ClaimKick implements remediate.FollowerLease.
func (f *Firestore) ClaimKick(ctx context.Context, now time.Time, pending time.Duration) (bool, error) {
	var err error
	for round := 0; round < casRounds; round++ {
		var snap *firestore.DocumentSnapshot
		var d followerDoc
		if snap, d, err = f.readFollower(ctx); err != nil {
			return false, fmt.Errorf("claim kick: %w", err)
		}
		if d.Holder != "" && d.Until.After(now) {
			return false, nil
		}
		if !d.KickAt.IsZero() && now.Before(d.KickAt.Add(pending)) {
			return false, nil
		}
		if err = f.commit(ctx, write{snap: snap, data: map[string]any{"kickAt": now}}); err == nil {
			return true, nil
		}
		if !lostRace(err) {
			return false, fmt.Errorf("claim kick: %w", err)
		}
		// Another delivery noted a kick (or a follower took the lease)
		// meanwhile; look again.
	}
	return false, fmt.Errorf("claim kick: contention persisted: %w", err)
}

// ClearKick implements remediate.FollowerLease: an unconditional merge of
// kickAt alone (a conditional lease write racing it reads again).
func (f *Firestore) ClearKick(ctx context.Context) error {
	w := write{ref: f.followerRef(), data: map[string]any{"kickAt": time.Time{}}, merge: []firestore.FieldPath{{"kickAt"}}}
	if err := f.commit(ctx, w); err != nil {
		return fmt.Errorf("clear pending kick: %w", err)
	}
	return nil
}
