package ledger

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// Per-node summaries (#14): summaries/{node key} holds, for one node, its
// latest recovery without the spec (rec, hasSpec), its deferral and its hold:
// everything History reads per node, in one small document, so that a sweep
// reads a page of nodes with one batched get of one document per node. Each
// is written in the same commit as the document it summarizes (Claim,
// Update, SetDeferral, ClearDeferral, SetHold, ClearHold); the recovery,
// deferral and hold documents stay the source of truth for everything else.
//
// A ledger written before summaries existed is backfilled by the first
// Histories call (state/summaries marks it done); until then Histories reads
// the full documents.

// CollectionSummaries is the collection id of the per-node summaries.
const CollectionSummaries = "summaries"

type summaryDoc struct {
	Node     string       `firestore:"node"`
	Rec      *recoveryDoc `firestore:"rec"` // spec left out
	HasSpec  bool         `firestore:"hasSpec"`
	Deferral *deferralDoc `firestore:"deferral"`
	Hold     *holdDoc     `firestore:"hold"`
}

func (f *Firestore) summaryRef(node string) *firestore.DocumentRef {
	return f.col(CollectionSummaries).Doc(docID(node))
}

func (f *Firestore) summariesDoneRef() *firestore.DocumentRef {
	return f.col(CollectionState).Doc("summaries")
}

// summaryRecWrite is the summary write that goes with saving doc.
func (f *Firestore) summaryRecWrite(doc recoveryDoc) write {
	m := doc.fields()
	m["spec"] = ""
	return write{
		ref:   f.summaryRef(doc.Node),
		data:  map[string]any{"node": doc.Node, "rec": m, "hasSpec": doc.Spec != ""},
		merge: []firestore.FieldPath{{"node"}, {"rec"}, {"hasSpec"}},
	}
}

func (d deferralDoc) fields() map[string]any {
	return map[string]any{"node": d.Node, "project": d.Project, "since": d.Since, "due": d.Due, "reason": d.Reason}
}

func (d holdDoc) fields() map[string]any {
	return map[string]any{"node": d.Node, "project": d.Project, "nodeId": d.NodeID, "since": d.Since, "eventId": d.EventID, "reason": d.Reason}
}

// setWithSummary sets (doc != nil) or deletes the document at ref and sets
// the node summary's field to fields (nil: none), in one commit.
func (f *Firestore) setWithSummary(ctx context.Context, ref *firestore.DocumentRef, doc any, node, field string, fields map[string]any) error {
	var v any
	if fields != nil {
		v = fields
	}
	// rest: firestore.projects.databases.documents.beginTransaction
	// rest: firestore.projects.databases.documents.rollback
	// rest: firestore.projects.databases.documents.commit
	return f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var err error
		if doc == nil {
			err = tx.Delete(ref)
		} else {
			err = tx.Set(ref, doc)
		}
		if err != nil {
			return err
		}
		return tx.Set(f.summaryRef(node), map[string]any{"node": node, field: v},
			firestore.Merge(firestore.FieldPath{"node"}, firestore.FieldPath{field}))
	}, firestore.MaxAttempts(3))
}

// backfillSummaries writes the summary of every recovery, deferral and hold
// document, each in a commit conditional on its document not having changed
// since it was read (a writer that changed it wrote the summary too), then
// marks the backfill done.
func (f *Firestore) backfillSummaries(ctx context.Context) error {
	type source struct {
		col     string
		summary func(s *firestore.DocumentSnapshot) (data map[string]any, sum write, err error)
	}
	sources := []source{
		{CollectionRecoveries, func(s *firestore.DocumentSnapshot) (map[string]any, write, error) {
			var d recoveryDoc
			if err := s.DataTo(&d); err != nil {
				return nil, write{}, err
			}
			return d.fields(), f.summaryRecWrite(d), nil
		}},
		{CollectionDeferrals, func(s *firestore.DocumentSnapshot) (map[string]any, write, error) {
			var d deferralDoc
			if err := s.DataTo(&d); err != nil {
				return nil, write{}, err
			}
			return d.fields(), write{ref: f.summaryRef(d.Node), data: map[string]any{"node": d.Node, "deferral": d.fields()},
				merge: []firestore.FieldPath{{"node"}, {"deferral"}}}, nil
		}},
		{CollectionHolds, func(s *firestore.DocumentSnapshot) (map[string]any, write, error) {
			var d holdDoc
			if err := s.DataTo(&d); err != nil {
				return nil, write{}, err
			}
			return d.fields(), write{ref: f.summaryRef(d.Node), data: map[string]any{"node": d.Node, "hold": d.fields()},
				merge: []firestore.FieldPath{{"node"}, {"hold"}}}, nil
		}},
	}
	for _, src := range sources {
		err := each(f.col(src.col).Documents(ctx), func(s *firestore.DocumentSnapshot) error { // rest: firestore.projects.databases.documents.runQuery
			for round := 0; round < casRounds; round++ {
				if !s.Exists() {
					return nil // deleted meanwhile, with its summary field
				}
				data, sum, err := src.summary(s)
				if err != nil {
					return fmt.Errorf("read %s: %w", s.Ref.Path, err)
				}
				err = f.commit(ctx, write{snap: s, data: data}, sum)
				if err == nil {
					return nil
				}
				if !lostRace(err) {
					return err
				}
				snaps, err := f.client.GetAll(ctx, []*firestore.DocumentRef{s.Ref}) // rest: firestore.projects.databases.documents.batchGet
				if err != nil {
					return err
				}
				s = snaps[0]
			}
			return fmt.Errorf("summary of %s: contention persisted", s.Ref.Path)
		})
		if err != nil {
			return fmt.Errorf("backfill summaries from %s: %w", src.col, err)
		}
	}
	if _, err := f.summariesDoneRef().Set(ctx, map[string]any{"done": true, "at": f.clock()}); err != nil { // rest: firestore.projects.databases.documents.commit
		return fmt.Errorf("backfill summaries: mark done: %w", err)
	}
	return nil
}

// historiesPage answers Histories for one page from the summaries: one
// batched get of the backfill mark, the project, the pauses and one summary
// per node; then, only for nodes with an unfinished recovery whose spec was
// saved (at most the in-flight cap), the full recovery document, because a
// recovery in progress is judged by its spec when the node is gone. A
// finished recovery's Recovery.Spec is nil: Decide never reads it.
func (f *Firestore) historiesPage(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration, out map[string]remediate.History) error {
	refs := []*firestore.DocumentRef{f.summariesDoneRef(), f.col(CollectionProjects).Doc(docID(project)), f.pausesRef()}
	for _, n := range nodes {
		refs = append(refs, f.summaryRef(n))
	}
	snaps, err := f.client.GetAll(ctx, refs) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return fmt.Errorf("histories of %d nodes: %w", len(nodes), err)
	}
	if !snaps[0].Exists() {
		if err := f.backfillSummaries(ctx); err != nil {
			return f.historiesPageFull(ctx, nodes, project, now, window, out)
		}
		return f.historiesPage(ctx, nodes, project, now, window, out)
	}
	proj, err := projectFromSnapshot(snaps[1])
	if err != nil {
		return err
	}
	pauses, err := pausesFromSnapshot(snaps[2])
	if err != nil {
		return err
	}
	var full []*firestore.DocumentRef
	var fullNodes []string
	for i, n := range nodes {
		h := remediate.History{InFlight: proj.others(n), Pause: pauses.covering(n)}
		if s := snaps[3+i]; s.Exists() {
			var d summaryDoc
			if err := s.DataTo(&d); err != nil {
				return fmt.Errorf("read %s: %w", s.Ref.Path, err)
			}
			if d.Rec != nil && d.Rec.Node != "" {
				r, err := d.Rec.recovery()
				if err != nil {
					return err
				}
				h.Recovery = &r
				h.Recreates = recreatesWithin(d.Rec.Recreates, now, window)
				if r.Unfinished() && d.HasSpec {
					full = append(full, f.col(CollectionRecoveries).Doc(docID(n)))
					fullNodes = append(fullNodes, n)
				}
			}
			if d.Deferral != nil {
				dd := d.Deferral.deferral()
				h.Deferral = &dd
			}
			if d.Hold != nil {
				if hd := d.Hold.hold(); !holdExpired(hd, now, f.holdTTL) {
					h.Hold = &hd
				}
			}
		}
		out[n] = h
	}
	if len(full) == 0 {
		return nil
	}
	fs, err := f.client.GetAll(ctx, full) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return fmt.Errorf("histories: recoveries in flight: %w", err)
	}
	for i, n := range fullNodes {
		nl, err := fromSnapshot(fs[i])
		if err != nil {
			return err
		}
		h := out[n]
		h.Recovery = nl.Latest
		h.Recreates = recreatesWithin(nl.Recreates, now, window)
		out[n] = h
	}
	return nil
}
