package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ Admin = (*Firestore)(nil)

func (f *Firestore) breakerRef(zone string) *firestore.DocumentRef {
	return f.col(CollectionBreakers).Doc(docID(zone))
}

func (f *Firestore) pauseRef(key string) *firestore.DocumentRef {
	return f.col(CollectionPauses).Doc(docID(key))
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
	return breakerState{Zone: d.Zone, Starts: d.Starts, TrippedUntil: d.TrippedUntil, PauseSeq: d.PauseSeq}, nil
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

func pauseFromSnapshot(s *firestore.DocumentSnapshot) (remediate.Pause, bool, error) {
	if s == nil || !s.Exists() {
		return remediate.Pause{}, false, nil
	}
	var d pauseDoc
	if err := s.DataTo(&d); err != nil {
		return remediate.Pause{}, false, fmt.Errorf("read %s: %w", s.Ref.Path, err)
	}
	return d.pause(), true, nil
}

// pauseIn returns the narrowest pause covering node among snaps, the pause
// documents of keys in order.
func pauseIn(node string, keys []string, snaps []*firestore.DocumentSnapshot) (*remediate.Pause, error) {
	byKey := make(map[string]remediate.Pause, len(keys))
	for i, k := range keys {
		p, ok, err := pauseFromSnapshot(snaps[i])
		if err != nil {
			return nil, err
		}
		if ok {
			byKey[k] = p
		}
	}
	return narrowestPause(node, keys, func(k string) (remediate.Pause, bool) {
		p, ok := byKey[k]
		return p, ok
	}), nil
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
	ref := f.pauseRef(pauseKey(p))
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
		if err = f.commit(ctx, write{snaps[0], toPauseDoc(p).fields()}, write{snaps[1], guardFields}); err == nil {
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
	ref := f.pauseRef(pauseKey(p))
	snaps, err := f.client.GetAll(ctx, []*firestore.DocumentRef{ref}) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return false, fmt.Errorf("resume %s: %w", p.What(), err)
	}
	if !snaps[0].Exists() {
		return false, nil
	}
	if _, err := ref.Delete(ctx); err != nil && status.Code(err) != codes.NotFound { // rest: firestore.projects.databases.documents.delete
		return false, fmt.Errorf("resume %s: %w", p.What(), err)
	}
	return true, nil
}

// Pauses implements Admin.
func (f *Firestore) Pauses(ctx context.Context) ([]remediate.Pause, error) {
	var out []remediate.Pause
	err := f.each(ctx, f.col(CollectionPauses).Documents(ctx), func(s *firestore.DocumentSnapshot) error {
		p, ok, err := pauseFromSnapshot(s)
		if ok {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	sortPauses(out)
	return out, nil
}

// Holds implements Admin.
func (f *Firestore) Holds(ctx context.Context, now time.Time) ([]HoldStatus, error) {
	var out []HoldStatus
	err := f.each(ctx, f.col(CollectionHolds).Documents(ctx), func(s *firestore.DocumentSnapshot) error {
		var d holdDoc
		if err := s.DataTo(&d); err != nil {
			return fmt.Errorf("read %s: %w", s.Ref.Path, err)
		}
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
		if err = f.commit(ctx, write{snaps[0], breakerFields(b)}); err == nil {
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
	err := f.each(ctx, f.col(CollectionBreakers).Documents(ctx), func(s *firestore.DocumentSnapshot) error {
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

// each calls fn for every document of it.
func (f *Firestore) each(ctx context.Context, it *firestore.DocumentIterator, fn func(*firestore.DocumentSnapshot) error) error {
	defer it.Stop()
	for {
		s, err := it.Next() // rest: firestore.projects.databases.documents.runQuery
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

// HistoriesPage is how many nodes Firestore.Histories reads per batched get.
const HistoriesPage = 100

// Histories implements Admin: one batched get per HistoriesPage nodes,
// holding each node's recovery, deferral, hold and node pause documents,
// plus the project's document and the zone and project pauses once.
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

func (f *Firestore) historiesPage(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration, out map[string]remediate.History) error {
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
	type at struct{ rec, def, hold int }
	pos := make([]at, len(nodes))
	for i, n := range nodes {
		pos[i] = at{
			rec:  add(f.col(CollectionRecoveries).Doc(docID(n))),
			def:  add(f.col(CollectionDeferrals).Doc(docID(n))),
			hold: add(f.col(CollectionHolds).Doc(docID(n))),
		}
		for _, k := range pauseKeysFor(n) {
			add(f.pauseRef(k))
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
		keys := pauseKeysFor(n)
		ps := make([]*firestore.DocumentSnapshot, len(keys))
		for j, k := range keys {
			ps[j] = snaps[index[f.pauseRef(k).Path]]
		}
		if h.Pause, err = pauseIn(n, keys, ps); err != nil {
			return err
		}
		out[n] = h
	}
	return nil
}
