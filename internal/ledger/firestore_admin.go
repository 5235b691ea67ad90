package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ Admin = (*Firestore)(nil)

func (f *Firestore) breakerRef(zone string) *firestore.DocumentRef {
	return f.col(CollectionBreakers).Doc(docID(zone))
}

func (f *Firestore) pausesRef() *firestore.DocumentRef {
	return f.col(CollectionState).Doc("pauses")
}

// breakerDoc is the breakers document of one zone.
type breakerDoc struct {
	Zone         string      `firestore:"zone"`
	Starts       []time.Time `firestore:"starts"`
	TrippedUntil time.Time   `firestore:"trippedUntil"`
	PauseSeq     int64       `firestore:"pauseSeq"`
}

func breakerFields(b breakerState) map[string]any {
	starts := b.Starts
	if starts == nil {
		starts = []time.Time{}
	}
	return map[string]any{"zone": b.Zone, "starts": starts, "trippedUntil": b.TrippedUntil, "pauseSeq": b.PauseSeq}
}

func breakerFromSnapshot(s *firestore.DocumentSnapshot) (breakerState, error) {
	if s == nil || !s.Exists() {
		return breakerState{}, nil
	}
	var d breakerDoc
	if err := s.DataTo(&d); err != nil {
		return breakerState{}, fmt.Errorf("read %s: %w", s.Ref.Path, err)
	}
	sort.Slice(d.Starts, func(i, j int) bool { return d.Starts[i].Before(d.Starts[j]) })
	return breakerState(d), nil
}

// pauseDoc is the pauses document of one pause.
type pauseDoc struct {
	Scope   string    `firestore:"scope"`
	Project string    `firestore:"project"`
	Zone    string    `firestore:"zone"`
	Node    string    `firestore:"node"`
	Reason  string    `firestore:"reason"`
	By      string    `firestore:"by"`
	Since   time.Time `firestore:"since"`
}

func (d pauseDoc) fields() map[string]any {
	return map[string]any{"scope": d.Scope, "project": d.Project, "zone": d.Zone, "node": d.Node, "reason": d.Reason, "by": d.By, "since": d.Since}
}

func (d pauseDoc) pause() remediate.Pause {
	return remediate.Pause{Scope: remediate.PauseScope(d.Scope), Project: d.Project, Zone: d.Zone, Node: d.Node, Reason: d.Reason, By: d.By, Since: d.Since}
}

func toPauseDoc(p remediate.Pause) pauseDoc {
	return pauseDoc{Scope: string(p.Scope), Project: p.Project, Zone: p.Zone, Node: p.Node, Reason: p.Reason, By: p.By, Since: p.Since}
}

// pausesDoc is the state/pauses document.
type pausesDoc struct {
	Pauses []pauseDoc `firestore:"pauses"`
}

// pauseSet is every pause, by pauseKey.
type pauseSet map[string]remediate.Pause

func pausesFromSnapshot(s *firestore.DocumentSnapshot) (pauseSet, error) {
	set := pauseSet{}
	if s == nil || !s.Exists() {
		return set, nil
	}
	var d pausesDoc
	if err := s.DataTo(&d); err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Ref.Path, err)
	}
	for _, pd := range d.Pauses {
		p := pd.pause()
		set[pauseKey(p)] = p
	}
	return set, nil
}

// covering returns the narrowest pause of the set covering node, or nil.
func (ps pauseSet) covering(node string) *remediate.Pause {
	return narrowestPause(node, pauseKeysFor(node), func(k string) (remediate.Pause, bool) {
		p, ok := ps[k]
		return p, ok
	})
}

func (ps pauseSet) sorted() []remediate.Pause {
	out := make([]remediate.Pause, 0, len(ps))
	for _, p := range ps {
		out = append(out, p)
	}
	sortPauses(out)
	return out
}

func (ps pauseSet) fields() map[string]any {
	docs := []pauseDoc{}
	for _, p := range ps.sorted() {
		docs = append(docs, toPauseDoc(p))
	}
	return map[string]any{"pauses": docs}
}

// pauseGuardRef is the document every claim the pause covers writes
// conditionally: the project's, or for a zone of every project the zone's
// breaker. SetPause bumps its pauseSeq in the same commit as the pause.
func (f *Firestore) pauseGuardRef(p remediate.Pause) (ref *firestore.DocumentRef, project bool) {
	proj := p.Project
	if p.Scope == remediate.PauseNode {
		proj, _ = remediate.NodeProjectZone(p.Node)
	}
	if proj != "" {
		return f.col(CollectionProjects).Doc(docID(proj)), true
	}
	return f.breakerRef(p.Zone), false
}

// SetPause implements Admin.
func (f *Firestore) SetPause(ctx context.Context, p remediate.Pause) error {
	if err := ValidatePause(p); err != nil {
		return err
	}
	ref := f.pausesRef()
	guard, isProject := f.pauseGuardRef(p)
	var err error
	for round := 0; round < casRounds; round++ {
		var snaps []*firestore.DocumentSnapshot
		if snaps, err = f.client.GetAll(ctx, []*firestore.DocumentRef{ref, guard}); err != nil { // rest: firestore.projects.databases.documents.batchGet
			return fmt.Errorf("pause %s: %w", p.What(), err)
		}
		var guardFields map[string]any
		if isProject {
			proj, err := projectFromSnapshot(snaps[1])
			if err != nil {
				return err
			}
			if proj.Project == "" {
				proj.Project = p.Project
				if proj.Project == "" {
					proj.Project, _ = remediate.NodeProjectZone(p.Node)
				}
			}
			proj.PauseSeq++
			guardFields = proj.fields()
		} else {
			b, err := breakerFromSnapshot(snaps[1])
			if err != nil {
				return err
			}
			b.Zone = p.Zone
			b.PauseSeq++
			guardFields = breakerFields(b)
		}
		set, err := pausesFromSnapshot(snaps[0])
		if err != nil {
			return err
		}
		set[pauseKey(p)] = p
		if err = f.commit(ctx, write{snap: snaps[0], data: set.fields()}, write{snap: snaps[1], data: guardFields}); err == nil {
			return nil
		}
		if !lostRace(err) {
			return fmt.Errorf("pause %s: %w", p.What(), err)
		}
		if err := sleepJitter(ctx, round); err != nil {
			return fmt.Errorf("pause %s: %w", p.What(), err)
		}
	}
	return fmt.Errorf("pause %s: contention persisted: %w", p.What(), err)
}

// ClearPause implements Admin.
func (f *Firestore) ClearPause(ctx context.Context, p remediate.Pause) (bool, error) {
	if err := ValidatePause(p); err != nil {
		return false, err
	}
	ref := f.pausesRef()
	var err error
	for round := 0; round < casRounds; round++ {
		var snaps []*firestore.DocumentSnapshot
		if snaps, err = f.client.GetAll(ctx, []*firestore.DocumentRef{ref}); err != nil { // rest: firestore.projects.databases.documents.batchGet
			return false, fmt.Errorf("resume %s: %w", p.What(), err)
		}
		set, err := pausesFromSnapshot(snaps[0])
		if err != nil {
			return false, err
		}
		k := pauseKey(p)
		stored, ok := set[k]
		if !ok {
			return false, nil
		}
		delete(set, k)
		writes := []write{{snap: snaps[0], data: set.fields()}}
		// In the same commit: the time the pause held recoveries back,
		// which does not count toward their age bound
		// (remediate.RecoveryAge). While the pause stands no claim of
		// theirs succeeds, so their documents do not change under us.
		paused, perr := f.pausedWrites(ctx, stored, set.sorted())
		if perr != nil {
			return false, fmt.Errorf("resume %s: %w", p.What(), perr)
		}
		writes = append(writes, paused...)
		if err = f.commit(ctx, writes...); err == nil {
			return true, nil
		}
		if !lostRace(err) {
			return false, fmt.Errorf("resume %s: %w", p.What(), err)
		}
		if err := sleepJitter(ctx, round); err != nil {
			return false, fmt.Errorf("resume %s: %w", p.What(), err)
		}
	}
	return false, fmt.Errorf("resume %s: contention persisted: %w", p.What(), err)
}

// pausedWrites are the writes that add, to every unfinished recovery p
// covers, the time p held it back that no pause still standing held too
// (Recovery.Paused; remediate.ClearedPauseTime).
func (f *Firestore) pausedWrites(ctx context.Context, p remediate.Pause, standing []remediate.Pause) ([]write, error) {
	now := f.clock()
	var out []write
	err := each(f.col(CollectionRecoveries).Where("unfinished", "==", true).Documents(ctx), func(s *firestore.DocumentSnapshot) error { // rest: firestore.projects.databases.documents.runQuery
		n, err := fromSnapshot(s)
		if err != nil {
			return err
		}
		r := n.Latest
		if r == nil || !r.Unfinished() || !p.Covers(r.Node) {
			return nil
		}
		total := r.Paused + remediate.ClearedPauseTime(p, standing, *r, now)
		out = append(out, write{snap: s, data: map[string]any{"pausedMillis": total.Milliseconds()}})
		return nil
	})
	return out, err
}

// Pauses implements Admin.
func (f *Firestore) Pauses(ctx context.Context) ([]remediate.Pause, error) {
	snaps, err := f.client.GetAll(ctx, []*firestore.DocumentRef{f.pausesRef()}) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	set, err := pausesFromSnapshot(snaps[0])
	if err != nil {
		return nil, err
	}
	return set.sorted(), nil
}

// Holds implements Admin.
func (f *Firestore) Holds(ctx context.Context, now time.Time) ([]HoldStatus, error) {
	var out []HoldStatus
	err := eachDoc(f.col(CollectionHolds).Documents(ctx), func(d holdDoc) error { // rest: firestore.projects.databases.documents.runQuery
		out = append(out, holdStatus(d.hold(), now, f.holdTTL))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	sortHolds(out)
	return out, nil
}

// ResetBreaker implements Admin.
func (f *Firestore) ResetBreaker(ctx context.Context, zone string) error {
	if zone == "" {
		return errEmptyZone
	}
	ref := f.breakerRef(zone)
	var err error
	for round := 0; round < casRounds; round++ {
		var snaps []*firestore.DocumentSnapshot
		if snaps, err = f.client.GetAll(ctx, []*firestore.DocumentRef{ref}); err != nil { // rest: firestore.projects.databases.documents.batchGet
			return fmt.Errorf("reset breaker of %s: %w", zone, err)
		}
		if !snaps[0].Exists() {
			return nil
		}
		b, err := breakerFromSnapshot(snaps[0])
		if err != nil {
			return err
		}
		b.Starts, b.TrippedUntil = nil, time.Time{}
		if err = f.commit(ctx, write{snap: snaps[0], data: breakerFields(b)}); err == nil {
			return nil
		}
		if !lostRace(err) {
			return fmt.Errorf("reset breaker of %s: %w", zone, err)
		}
		if err := sleepJitter(ctx, round); err != nil {
			return fmt.Errorf("reset breaker of %s: %w", zone, err)
		}
	}
	return fmt.Errorf("reset breaker of %s: contention persisted: %w", zone, err)
}

// OpenBreakers implements Admin.
func (f *Firestore) OpenBreakers(ctx context.Context, now time.Time, cfg remediate.Config) ([]remediate.BreakerOpenError, error) {
	var out []remediate.BreakerOpenError
	err := each(f.col(CollectionBreakers).Documents(ctx), func(s *firestore.DocumentSnapshot) error { // rest: firestore.projects.databases.documents.runQuery
		b, err := breakerFromSnapshot(s)
		if err != nil {
			return err
		}
		if o := breakerOpen(b, now, cfg); o != nil {
			out = append(out, *o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list breakers: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Zone < out[j].Zone })
	return out, nil
}

// each calls fn for every document of it, in order, and stops it.
func each(it *firestore.DocumentIterator, fn func(*firestore.DocumentSnapshot) error) error {
	defer it.Stop()
	for {
		s, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
}

// eachDoc is each with every document decoded into a D first.
func eachDoc[D any](it *firestore.DocumentIterator, fn func(D) error) error {
	return each(it, func(s *firestore.DocumentSnapshot) error {
		var d D
		if err := s.DataTo(&d); err != nil {
			return fmt.Errorf("read %s: %w", s.Ref.Path, err)
		}
		return fn(d)
	})
}

// HistoriesPage is how many nodes Firestore.Histories reads per batched get.
const HistoriesPage = 100

// Histories implements Admin: one batched get per HistoriesPage nodes of one
// small summary document each (see summary.go), plus the project's and the
// pauses document once.
func (f *Firestore) Histories(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration) (map[string]remediate.History, error) {
	out := make(map[string]remediate.History, len(nodes))
	for start := 0; start < len(nodes); start += HistoriesPage {
		page := nodes[start:min(start+HistoriesPage, len(nodes))]
		if err := f.historiesPage(ctx, page, project, now, window, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// historiesPageFull is historiesPage from the full documents, for a ledger
// whose summaries could not be backfilled.
func (f *Firestore) historiesPageFull(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration, out map[string]remediate.History) error {
	var refs []*firestore.DocumentRef
	index := map[string]int{} // document path → position in refs
	add := func(r *firestore.DocumentRef) int {
		if i, ok := index[r.Path]; ok {
			return i
		}
		index[r.Path] = len(refs)
		refs = append(refs, r)
		return len(refs) - 1
	}
	projIdx := add(f.col(CollectionProjects).Doc(docID(project)))
	pausesIdx := add(f.pausesRef())
	type at struct{ rec, def, hold int }
	pos := make([]at, len(nodes))
	for i, n := range nodes {
		pos[i] = at{
			rec:  add(f.col(CollectionRecoveries).Doc(docID(n))),
			def:  add(f.col(CollectionDeferrals).Doc(docID(n))),
			hold: add(f.col(CollectionHolds).Doc(docID(n))),
		}
	}
	snaps, err := f.client.GetAll(ctx, refs) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return fmt.Errorf("histories of %d nodes: %w", len(nodes), err)
	}
	proj, err := projectFromSnapshot(snaps[projIdx])
	if err != nil {
		return err
	}
	pauses, err := pausesFromSnapshot(snaps[pausesIdx])
	if err != nil {
		return err
	}
	for i, n := range nodes {
		var h remediate.History
		nl, err := fromSnapshot(snaps[pos[i].rec])
		if err != nil {
			return err
		}
		h.Recovery = nl.Latest
		h.Recreates = recreatesWithin(nl.Recreates, now, window)
		h.InFlight = proj.others(n)
		if s := snaps[pos[i].def]; s.Exists() {
			var d deferralDoc
			if err := s.DataTo(&d); err != nil {
				return fmt.Errorf("deferral of %s: %w", n, err)
			}
			dd := d.deferral()
			h.Deferral = &dd
		}
		if s := snaps[pos[i].hold]; s.Exists() {
			var d holdDoc
			if err := s.DataTo(&d); err != nil {
				return fmt.Errorf("hold of %s: %w", n, err)
			}
			if hd := d.hold(); !holdExpired(hd, now, f.holdTTL) {
				h.Hold = &hd
			}
		}
		h.Pause = pauses.covering(n)
		out[n] = h
	}
	return nil
}
