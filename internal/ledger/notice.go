package ledger

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// CollectionNotices holds one document per claimed step of a maintenance
// notice: notices/{node key}|{windowStart}|{step} ({node key} is the node's
// name and #id; notices claimed before ids were keyed by name only), with
// the fields node, nodeId, windowStart, step, at and expireAt (NoticeExpireField, for a TTL policy).
const CollectionNotices = "notices"

// NoticeExpireField is the field a Firestore TTL policy on notices deletes
// a document by: NoticeRetention after the claim.
const NoticeExpireField = "expireAt"

// NoticeRetention is how long a notice's claims are kept: longer than any
// maintenance notice is announced ahead (about 7 days for SCHEDULED).
const NoticeRetention = 30 * 24 * time.Hour

// noticeSteps are the steps NoticeSteps looks for.
var noticeSteps = []string{
	remediate.NoticeStepPrepare, remediate.NoticeStepMaintain, remediate.NoticeStepOngoing,
	remediate.NoticeStepOff, remediate.NoticeStepTimeout, remediate.NoticeStepNoReschedule,
	remediate.NoticeStepInvalid, remediate.NoticeStepDryPrepare, remediate.NoticeStepDryMaintain,
}

// noticeID is the document id of a claimed step: by node name, then the
// node id when the key has one (a key without it is the old form, by name
// only, still read: remediate.NoticeKey).
func noticeID(key remediate.NoticeKey, step string) string {
	node := key.Node
	if key.NodeID != 0 {
		node += "#" + strconv.FormatInt(key.NodeID, 10)
	}
	return node + "|" + key.WindowStart + "|" + step
}

func checkNotice(key remediate.NoticeKey, step string) error {
	if key.Node == "" || step == "" {
		return fmt.Errorf("notice %q/%q step %q: node and step must be set", key.Node, key.WindowStart, step)
	}
	return nil
}

// MemoryNotices is a remediate.NoticeStore in memory, for replay and tests.
// It is safe for concurrent use.
type MemoryNotices struct {
	mu     sync.Mutex
	claims map[remediate.NoticeKey]map[string]time.Time
}

var _ remediate.NoticeStore = (*MemoryNotices)(nil)

// NewMemoryNotices returns an empty notice ledger.
func NewMemoryNotices() *MemoryNotices {
	return &MemoryNotices{claims: map[remediate.NoticeKey]map[string]time.Time{}}
}

// ClaimNotice implements remediate.NoticeStore.
func (m *MemoryNotices) ClaimNotice(ctx context.Context, key remediate.NoticeKey, step string, at time.Time) (bool, error) {
	if err := checkNotice(key, step); err != nil {
		return false, fmt.Errorf("claim %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	steps := m.claims[key]
	if steps == nil {
		steps = map[string]time.Time{}
		m.claims[key] = steps
	}
	if _, ok := steps[step]; ok {
		return false, nil
	}
	steps[step] = at
	return true, nil
}

// ReleaseNotice implements remediate.NoticeStore.
func (m *MemoryNotices) ReleaseNotice(ctx context.Context, key remediate.NoticeKey, step string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims[key], step)
	return nil
}

// NoticeSteps implements remediate.NoticeStore.
func (m *MemoryNotices) NoticeSteps(ctx context.Context, key remediate.NoticeKey) (map[string]time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]time.Time{}
	maps.Copy(out, m.claims[key])
	return out, nil
}

// FirestoreNotices is a remediate.NoticeStore on Firestore: a claim is a
// document Create, which fails with ALREADY_EXISTS for every claimant but
// the first, from any number of processes.
type FirestoreNotices struct {
	client *firestore.Client
	prefix string
}

var _ remediate.NoticeStore = (*FirestoreNotices)(nil)

// NewFirestoreNotices returns a notice ledger on client's database (WithPrefix
// applies; the clock option is not used: claims carry their own time).
func NewFirestoreNotices(client *firestore.Client, opts ...Option) *FirestoreNotices {
	o := buildOptions(opts)
	return &FirestoreNotices{client: client, prefix: o.prefix}
}

func (f *FirestoreNotices) ref(key remediate.NoticeKey, step string) *firestore.DocumentRef {
	return f.client.Collection(f.prefix + CollectionNotices).Doc(docID(noticeID(key, step)))
}

// ClaimNotice implements remediate.NoticeStore.
func (f *FirestoreNotices) ClaimNotice(ctx context.Context, key remediate.NoticeKey, step string, at time.Time) (bool, error) {
	if err := checkNotice(key, step); err != nil {
		return false, fmt.Errorf("claim %w", err)
	}
	_, err := f.ref(key, step).Create(ctx, map[string]any{ // rest: firestore.projects.databases.documents.commit
		"node": key.Node, "nodeId": key.NodeID, "windowStart": key.WindowStart, "step": step, "at": at,
		NoticeExpireField: at.Add(NoticeRetention),
	})
	switch {
	case status.Code(err) == codes.AlreadyExists:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("claim notice %s %s of %s: %w", key.WindowStart, step, key.Node, err)
	}
	return true, nil
}

// ReleaseNotice implements remediate.NoticeStore.
func (f *FirestoreNotices) ReleaseNotice(ctx context.Context, key remediate.NoticeKey, step string) error {
	_, err := f.ref(key, step).Delete(ctx) // rest: firestore.projects.databases.documents.commit
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("release notice %s %s of %s: %w", key.WindowStart, step, key.Node, err)
	}
	return nil
}

// NoticeSteps implements remediate.NoticeStore: one batch read of the
// documents of every known step.
func (f *FirestoreNotices) NoticeSteps(ctx context.Context, key remediate.NoticeKey) (map[string]time.Time, error) {
	refs := make([]*firestore.DocumentRef, len(noticeSteps))
	for i, s := range noticeSteps {
		refs[i] = f.ref(key, s)
	}
	snaps, err := f.client.GetAll(ctx, refs) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return nil, fmt.Errorf("read notice %s of %s: %w", key.WindowStart, key.Node, err)
	}
	out := map[string]time.Time{}
	for i, s := range snaps {
		if !s.Exists() {
			continue
		}
		var doc struct {
			At time.Time `firestore:"at"`
		}
		if err := s.DataTo(&doc); err != nil {
			return nil, fmt.Errorf("read notice %s of %s: step %s: %w", key.WindowStart, key.Node, noticeSteps[i], err)
		}
		out[noticeSteps[i]] = doc.At
	}
	return out, nil
}
