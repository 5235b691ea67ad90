package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Control messages (#19): anyone who may publish to the events topic can
// send sweep and follow messages, each of which spends TPU API quota. The
// ledger keeps what tells a genuine one from a flood: the sweep gate (when
// the last completed sweep started, and the sweeps running, by Pub/Sub
// message id) and the follow kicks' nonces (issued by the function before
// it publishes a kick, taken once by the follow message carrying it).
//
// Firestore: the gate is the document state/sweepGate; a nonce is the
// document nonces/{nonce}, with expiresAt (the TTL policy of the events
// collection does not cover it; a taken nonce is deleted, an untaken one
// is deleted by the next IssueNonce after it expired, at most
// maxNoncesPurged at a time).

// CollectionNonces holds the follow kicks' nonces.
const CollectionNonces = "nonces"

// SweepRunningTTL bounds how long a started sweep that never completed
// counts as running: longer than any sweep (its budget and follow window),
// so a crashed one stops blocking others after it.
const SweepRunningTTL = 10 * time.Minute

const maxNoncesPurged = 20

// nonceRE is the shape of a nonce the function issues (NewNonce): what a
// follow message carries is outside input, and only this shape is ever
// looked up.
var nonceRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NewNonce returns a fresh nonce: 128 random bits in hex.
func NewNonce() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails: crypto/rand aborts the process rather than return short
	return hex.EncodeToString(b)
}

// SweepGate is the ledger's memory of sweeps.
type SweepGate struct {
	// LastCompletedStart is when the last sweep that completed started.
	LastCompletedStart time.Time `firestore:"lastCompletedStart"`
	// Running are the sweeps started and not completed, by message id,
	// with when each started.
	Running map[string]time.Time `firestore:"running"`
}

// SweepAdmission is BeginSweep's answer.
type SweepAdmission struct {
	Act        bool
	Redelivery bool   // a redelivery of a sweep that never completed
	Why        string // when not Act: why it is not acted on
}

// admitSweep is the gate's rule (pure): a redelivery of a message that
// started and never completed is acted on; otherwise a sweep starting less
// than minInterval after the start of the last completed sweep, or of a
// sweep still running, is not. Measured from starts, not from completion:
// a sweep runs for up to its follow window (50 s), so with the one-minute
// schedule the next one starts 10 s after the last completed, and a gate
// measured from completion would turn every scheduled sweep away.
func admitSweep(g SweepGate, id string, now time.Time, minInterval time.Duration) (SweepGate, SweepAdmission) {
	next := SweepGate{LastCompletedStart: g.LastCompletedStart, Running: map[string]time.Time{}}
	for k, t := range g.Running {
		if now.Sub(t) < SweepRunningTTL {
			next.Running[k] = t
		}
	}
	if _, ok := next.Running[id]; ok && id != "" {
		return next, SweepAdmission{Act: true, Redelivery: true}
	}
	if since := now.Sub(next.LastCompletedStart); !next.LastCompletedStart.IsZero() && since < minInterval {
		return next, SweepAdmission{Why: fmt.Sprintf("started %s after the last completed sweep (which started at %s), under the minimum interval %s",
			since.Round(time.Millisecond), next.LastCompletedStart.UTC().Format(time.RFC3339Nano), minInterval)}
	}
	ids := make([]string, 0, len(next.Running))
	for k := range next.Running {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	for _, k := range ids {
		if since := now.Sub(next.Running[k]); since < minInterval {
			return next, SweepAdmission{Why: fmt.Sprintf("sweep %s started %s ago and is still running, under the minimum interval %s", k, since.Round(time.Millisecond), minInterval)}
		}
	}
	next.Running[id] = now
	return next, SweepAdmission{Act: true}
}

// endSweep is the gate after sweep id completed (pure).
func endSweep(g SweepGate, id string, now time.Time) SweepGate {
	start, ok := g.Running[id]
	if !ok {
		start = now
	}
	next := SweepGate{LastCompletedStart: g.LastCompletedStart, Running: map[string]time.Time{}}
	for k, t := range g.Running {
		if k != id {
			next.Running[k] = t
		}
	}
	if start.After(next.LastCompletedStart) {
		next.LastCompletedStart = start
	}
	return next
}

// BeginSweep asks the gate whether sweep message id, starting now, is
// acted on (and if so records it as running).
func (m *Memory) BeginSweep(_ context.Context, id string, now time.Time, minInterval time.Duration) (SweepAdmission, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, a := admitSweep(m.gate, id, now, minInterval)
	m.gate = next
	return a, nil
}

// EndSweep records that sweep message id completed.
func (m *Memory) EndSweep(_ context.Context, id string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gate = endSweep(m.gate, id, now)
	return nil
}

// IssueNonce keeps a follow kick's nonce until expires.
func (m *Memory) IssueNonce(_ context.Context, nonce string, expires time.Time) error {
	if !nonceRE.MatchString(nonce) {
		return fmt.Errorf("issue nonce %q: want 32 hex digits", nonce)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nonces == nil {
		m.nonces = map[string]time.Time{}
	}
	now := m.clock()
	for k, t := range m.nonces {
		if !now.Before(t) {
			delete(m.nonces, k)
		}
	}
	m.nonces[nonce] = expires
	return nil
}

// TakeNonce reports whether nonce was issued, is unexpired and was not
// taken before; it is taken either way.
func (m *Memory) TakeNonce(_ context.Context, nonce string, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.nonces[nonce]
	delete(m.nonces, nonce)
	return ok && now.Before(t), nil
}

func (f *Firestore) sweepGateRef() *firestore.DocumentRef {
	return f.col(CollectionState).Doc("sweepGate")
}

// gateTx reads the gate, applies change and writes it, in one transaction.
func (f *Firestore) gateTx(ctx context.Context, change func(SweepGate) SweepGate) error {
	ref := f.sweepGateRef()
	// rest: firestore.projects.databases.documents.beginTransaction
	// rest: firestore.projects.databases.documents.rollback
	// rest: firestore.projects.databases.documents.commit
	return f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var g SweepGate
		s, err := tx.Get(ref) // rest: firestore.projects.databases.documents.get
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return err
		default:
			if err := s.DataTo(&g); err != nil {
				return fmt.Errorf("decode sweep gate: %w", err)
			}
		}
		return tx.Set(ref, change(g))
	})
}

// BeginSweep is Memory.BeginSweep on Firestore, in one transaction.
func (f *Firestore) BeginSweep(ctx context.Context, id string, now time.Time, minInterval time.Duration) (SweepAdmission, error) {
	var a SweepAdmission
	err := f.gateTx(ctx, func(g SweepGate) SweepGate {
		var next SweepGate
		next, a = admitSweep(g, id, now, minInterval)
		return next
	})
	if err != nil {
		return SweepAdmission{}, fmt.Errorf("begin sweep %s: %w", id, err)
	}
	return a, nil
}

// EndSweep is Memory.EndSweep on Firestore.
func (f *Firestore) EndSweep(ctx context.Context, id string, now time.Time) error {
	if err := f.gateTx(ctx, func(g SweepGate) SweepGate { return endSweep(g, id, now) }); err != nil {
		return fmt.Errorf("end sweep %s: %w", id, err)
	}
	return nil
}

type nonceDoc struct {
	ExpiresAt time.Time `firestore:"expiresAt"`
}

// IssueNonce is Memory.IssueNonce on Firestore; it also deletes a few
// expired nonces.
func (f *Firestore) IssueNonce(ctx context.Context, nonce string, expires time.Time) error {
	if !nonceRE.MatchString(nonce) {
		return fmt.Errorf("issue nonce %q: want 32 hex digits", nonce)
	}
	col := f.col(CollectionNonces)
	if _, err := col.Doc(nonce).Set(ctx, nonceDoc{ExpiresAt: expires}); err != nil { // rest: firestore.projects.databases.documents.commit
		return fmt.Errorf("issue nonce: %w", err)
	}
	old, err := col.Where("expiresAt", "<", f.clock()).Limit(maxNoncesPurged).Documents(ctx).GetAll() // rest: firestore.projects.databases.documents.runQuery
	if err != nil {
		return nil // purging is best effort; the nonce is issued
	}
	for _, s := range old {
		_, _ = s.Ref.Delete(ctx) // rest: firestore.projects.databases.documents.commit
	}
	return nil
}

// TakeNonce is Memory.TakeNonce on Firestore, in one transaction.
func (f *Firestore) TakeNonce(ctx context.Context, nonce string, now time.Time) (bool, error) {
	if !nonceRE.MatchString(nonce) {
		return false, nil
	}
	ref := f.col(CollectionNonces).Doc(nonce)
	ok := false
	// rest: firestore.projects.databases.documents.beginTransaction
	// rest: firestore.projects.databases.documents.rollback
	// rest: firestore.projects.databases.documents.commit
	err := f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ok = false
		s, err := tx.Get(ref) // rest: firestore.projects.databases.documents.get
		if status.Code(err) == codes.NotFound {
			return nil
		}
		if err != nil {
			return err
		}
		var d nonceDoc
		if err := s.DataTo(&d); err != nil {
			return fmt.Errorf("decode nonce: %w", err)
		}
		ok = now.Before(d.ExpiresAt)
		return tx.Delete(ref)
	})
	if err != nil {
		return false, fmt.Errorf("take nonce: %w", err)
	}
	return ok, nil
}
