package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// Collection ids of the Firestore layout (each prefixed by WithPrefix).
//
//	recoveries/{node key}  one document per node: its latest recovery (spec as
//	                       the node's JSON), claim, lease, and recreate history
//	projects/{project}     inFlight: the nodes with an unfinished recovery
//	deferrals/{node key}   a pending deferral, queried by due
//	holds/{node key}       a node a user terminated: never recovered while held
//	events/{event key}     a processed event id; expireAt drives a TTL policy
//	state/sweep            the sweep cursor
//	breakers/{zone}        the zone's storm breaker: recent starts, trip mark
//	state/pauses           every pause (a person's off switch), in one small
//	                       document so that each read of a node's history
//	                       costs one document for them, however many exist
//
// A node key is the resource name with '/' replaced by '~' (names never
// contain '~'); any other id that is not a safe document id is replaced by
// '~' and its SHA-256. The original name is always stored in a field.
const (
	CollectionRecoveries = "recoveries"
	CollectionProjects   = "projects"
	CollectionDeferrals  = "deferrals"
	CollectionHolds      = "holds"
	CollectionEvents     = "events"
	CollectionState      = "state"
	CollectionBreakers   = "breakers"

	// EventExpireField is the field of an events document a Firestore TTL
	// policy on the events collection group deletes it by.
	EventExpireField = "expireAt"
)

// Firestore is a remediate.Store on a Firestore database. Claim and Update
// read the node's recovery document (Claim also the project's in-flight
// document), apply the same rules as Memory, and commit atomically on the
// condition that none of the documents read changed since (update-time
// preconditions in a write-only transaction): concurrent claims of one node,
// or of nodes of one project against the in-flight cap, serialize, and a
// loser reads again and gets ErrClaimed or the cap. It is safe for concurrent
// use, also from many processes.
type Firestore struct {
	client  *firestore.Client
	clock   func() time.Time
	prefix  string
	holdTTL time.Duration
}

var _ remediate.Store = (*Firestore)(nil)

// NewFirestore returns a store on client's database. The function uses a
// named database (firestore.NewClientWithDatabase); the Firestore emulator
// accepts any database id.
func NewFirestore(client *firestore.Client, opts ...Option) *Firestore {
	o := buildOptions(opts)
	return &Firestore{client: client, clock: o.clock, prefix: o.prefix, holdTTL: o.holdTTL}
}

func (f *Firestore) col(name string) *firestore.CollectionRef {
	return f.client.Collection(f.prefix + name)
}

var safeID = regexp.MustCompile(`^[A-Za-z0-9._:@=+-][A-Za-z0-9._:@=+/-]{0,700}$`)

// docID maps a node name or event id to a document id, injectively.
func docID(s string) string {
	if safeID.MatchString(s) && !strings.HasPrefix(s, "__") && s != "." && s != ".." && !strings.Contains(s, "//") && !strings.HasSuffix(s, "/") {
		return strings.ReplaceAll(s, "/", "~")
	}
	sum := sha256.Sum256([]byte(s))
	return "~" + hex.EncodeToString(sum[:])
}

// recoveryDoc is the recoveries document of one node.
type recoveryDoc struct {
	Node           string      `firestore:"node"`
	Project        string      `firestore:"project"`
	Action         string      `firestore:"action"`
	Phase          string      `firestore:"phase"`
	Spec           string      `firestore:"spec"`           // the node's JSON, so no field is ever lost
	SpecKeyVersion string      `firestore:"specKeyVersion"` // the spec's seal: key version and MAC
	SpecMAC        []byte      `firestore:"specMac"`
	NodeID         int64       `firestore:"nodeId"`
	DeleteSent     bool        `firestore:"deleteSent"`
	QueuedResource string      `firestore:"queuedResource"`
	Generation     int         `firestore:"generation"`
	Holder         string      `firestore:"holder"`
	LeaseUntil     time.Time   `firestore:"leaseUntil"`
	LeaseMillis    int64       `firestore:"leaseMillis"`
	DeleteOp       string      `firestore:"deleteOp"`
	CreateOp       string      `firestore:"createOp"`
	ResetOp        string      `firestore:"resetOp"` // a reset's operation; before the field, in createOp (recovery)
	Attempts       int         `firestore:"attempts"`
	EventID        string      `firestore:"eventId"`
	Cause          string      `firestore:"cause"`
	StartedAt      time.Time   `firestore:"startedAt"`
	UpdatedAt      time.Time   `firestore:"updatedAt"`
	LastError      string      `firestore:"lastError"`
	LastKind       string      `firestore:"lastKind"`   // Recovery.LastKind by its word; absent before the field (recovery)
	Unfinished     bool        `firestore:"unfinished"` // queried by Unfinished
	Counted        bool        `firestore:"counted"`
	Recreates      []time.Time `firestore:"recreates"`
	NextLookAt     time.Time   `firestore:"nextLookAt"`
	Failures       int         `firestore:"failures"`
	PausedMillis   int64       `firestore:"pausedMillis"` // Recovery.Paused
	// The evidence rule (policy/evidence.go).
	SentOps          []string  `firestore:"sentOps"`
	Actors           []string  `firestore:"actors"`
	DeleteAnswered   bool      `firestore:"deleteAnswered"`
	DeleteUnanswered bool      `firestore:"deleteUnanswered"`
	CreateSentAt     time.Time `firestore:"createSentAt"`
	GoneAt           time.Time `firestore:"goneAt"`
	Evidence         string    `firestore:"evidence"` // JSON of the kept entries
	Stockouts        int       `firestore:"stockouts"`
	Queue            string    `firestore:"queue"` // JSON of Recovery.Queue (the queue fallback), "" for none
	// A zones: fallback's move (policy/zonemove.go).
	ZoneMoveNode      string `firestore:"zoneMoveNode"`
	ZoneMoveStockouts int    `firestore:"zoneMoveStockouts"`
}

func (d recoveryDoc) fields() map[string]any {
	return map[string]any{
		"node": d.Node, "project": d.Project, "action": d.Action, "phase": d.Phase, "spec": d.Spec,
		"specKeyVersion": d.SpecKeyVersion, "specMac": d.SpecMAC,
		"nodeId": d.NodeID, "deleteSent": d.DeleteSent,
		"queuedResource": d.QueuedResource, "generation": d.Generation, "holder": d.Holder,
		"leaseUntil": d.LeaseUntil, "leaseMillis": d.LeaseMillis, "deleteOp": d.DeleteOp, "createOp": d.CreateOp, "resetOp": d.ResetOp,
		"attempts": d.Attempts, "eventId": d.EventID, "cause": d.Cause, "startedAt": d.StartedAt,
		"updatedAt": d.UpdatedAt, "lastError": d.LastError, "lastKind": d.LastKind, "unfinished": d.Unfinished, "counted": d.Counted,
		"recreates": d.Recreates, "nextLookAt": d.NextLookAt, "failures": d.Failures,
		"sentOps": d.SentOps, "actors": d.Actors, "deleteAnswered": d.DeleteAnswered, "deleteUnanswered": d.DeleteUnanswered,
		"createSentAt": d.CreateSentAt, "goneAt": d.GoneAt, "evidence": d.Evidence,
		"stockouts":    d.Stockouts,
		"queue":        d.Queue,
		"pausedMillis": d.PausedMillis,
		"zoneMoveNode": d.ZoneMoveNode, "zoneMoveStockouts": d.ZoneMoveStockouts,
	}
}

func toDoc(n nodeLedger) (recoveryDoc, error) {
	r := n.Latest
	spec, err := encodeNode(r.Spec)
	if err != nil {
		return recoveryDoc{}, err
	}
	evidence := ""
	if len(r.Evidence) > 0 {
		b, err := json.Marshal(r.Evidence)
		if err != nil {
			return recoveryDoc{}, fmt.Errorf("encode evidence of %s: %w", r.Node, err)
		}
		evidence = string(b)
	}
	queue := ""
	if r.Queue != nil {
		b, err := json.Marshal(r.Queue)
		if err != nil {
			return recoveryDoc{}, fmt.Errorf("encode queue of %s: %w", r.Node, err)
		}
		queue = string(b)
	}
	return recoveryDoc{
		Node: r.Node, Project: r.Project, Action: string(r.Action), Phase: string(r.Phase), Spec: spec,
		SpecKeyVersion: r.SpecSeal.KeyVersion, SpecMAC: r.SpecSeal.MAC,
		NodeID: r.NodeID, DeleteSent: r.DeleteSent,
		QueuedResource: r.QueuedResource, Generation: r.Generation, Holder: r.Holder,
		LeaseUntil: r.LeaseUntil, LeaseMillis: n.LeaseFor.Milliseconds(),
		DeleteOp: r.DeleteOp, CreateOp: r.CreateOp, ResetOp: r.ResetOp, Attempts: r.Attempts, EventID: r.EventID,
		Cause: string(r.Cause), StartedAt: r.StartedAt, UpdatedAt: r.UpdatedAt, LastError: r.LastError, LastKind: r.LastKind.String(),
		Unfinished: r.Unfinished(), Counted: n.Counted, Recreates: n.Recreates,
		NextLookAt: r.NextLookAt, Failures: r.Failures, Stockouts: r.Stockouts,
		SentOps: r.SentOps, Actors: r.Actors, DeleteAnswered: r.DeleteAnswered, DeleteUnanswered: r.DeleteUnanswered,
		CreateSentAt: r.CreateSentAt, GoneAt: r.GoneAt, Evidence: evidence,
		PausedMillis: r.Paused.Milliseconds(), Queue: queue,
		ZoneMoveNode: r.ZoneMoveNode, ZoneMoveStockouts: r.ZoneMoveStockouts,
	}, nil
}

func (d recoveryDoc) recovery() (remediate.Recovery, error) {
	spec, err := decodeNode(d.Spec)
	if err != nil {
		return remediate.Recovery{}, fmt.Errorf("recovery of %s: %w", d.Node, err)
	}
	var evidence []remediate.Evidence
	if d.Evidence != "" {
		if err := json.Unmarshal([]byte(d.Evidence), &evidence); err != nil {
			return remediate.Recovery{}, fmt.Errorf("evidence of %s: %w", d.Node, err)
		}
	}
	var queue *remediate.QueueState
	if d.Queue != "" {
		if err := json.Unmarshal([]byte(d.Queue), &queue); err != nil {
			return remediate.Recovery{}, fmt.Errorf("queue of %s: %w", d.Node, err)
		}
	}
	rec := remediate.Recovery{
		Node: d.Node, Project: d.Project, Action: remediate.Action(d.Action), Phase: remediate.Phase(d.Phase),
		Spec: spec, SpecSeal: seal.Seal{KeyVersion: d.SpecKeyVersion, MAC: d.SpecMAC}, NodeID: d.NodeID, DeleteSent: d.DeleteSent, QueuedResource: d.QueuedResource, Generation: d.Generation, Holder: d.Holder,
		LeaseUntil: d.LeaseUntil, DeleteOp: d.DeleteOp, CreateOp: d.CreateOp, ResetOp: d.ResetOp, Attempts: d.Attempts,
		EventID: d.EventID, Cause: events.Cause(d.Cause), StartedAt: d.StartedAt, UpdatedAt: d.UpdatedAt,
		LastError: d.LastError, NextLookAt: d.NextLookAt, Failures: d.Failures, Stockouts: d.Stockouts,
		Paused:  time.Duration(d.PausedMillis) * time.Millisecond,
		SentOps: d.SentOps, Actors: d.Actors, DeleteAnswered: d.DeleteAnswered, DeleteUnanswered: d.DeleteUnanswered,
		CreateSentAt: d.CreateSentAt, GoneAt: d.GoneAt, Evidence: evidence, Queue: queue,
		ZoneMoveNode: d.ZoneMoveNode, ZoneMoveStockouts: d.ZoneMoveStockouts,
	}
	rec.LastKind = remediate.KindNamed(d.LastKind)
	if d.LastKind == "" {
		// Saved before lastKind: the kind is in LastError's words.
		rec.LastKind = remediate.KindInText(d.LastError)
	}
	// A reset saved before ResetOp existed kept its operation in createOp.
	if rec.Action == remediate.ActionReset && rec.ResetOp == "" {
		rec.ResetOp, rec.CreateOp = rec.CreateOp, ""
	}
	return upgradeRecovery(rec), nil // legacy.go
}

func fromSnapshot(s *firestore.DocumentSnapshot) (nodeLedger, error) {
	if s == nil || !s.Exists() {
		return nodeLedger{}, nil
	}
	var d recoveryDoc
	if err := s.DataTo(&d); err != nil {
		return nodeLedger{}, fmt.Errorf("read %s: %w", s.Ref.Path, err)
	}
	r, err := d.recovery()
	if err != nil {
		return nodeLedger{}, err
	}
	return nodeLedger{Latest: &r, LeaseFor: time.Duration(d.LeaseMillis) * time.Millisecond, Counted: d.Counted, Recreates: d.Recreates}, nil
}

type projectDoc struct {
	Project  string   `firestore:"project"`
	InFlight []string `firestore:"inFlight"`
	// PauseSeq is bumped by every pause of the project or one of its zones
	// or nodes: a claim that read the project before the pause was written
	// then fails its precondition and reads the pause.
	PauseSeq int64 `firestore:"pauseSeq"`
}

func projectFromSnapshot(s *firestore.DocumentSnapshot) (projectDoc, error) {
	var p projectDoc
	if s == nil || !s.Exists() {
		return p, nil
	}
	if err := s.DataTo(&p); err != nil {
		return p, fmt.Errorf("read %s: %w", s.Ref.Path, err)
	}
	return p, nil
}

func (p projectDoc) fields() map[string]any {
	return map[string]any{"project": p.Project, "inFlight": p.InFlight, "pauseSeq": p.PauseSeq}
}

func (p projectDoc) others(node string) int {
	c := 0
	for _, n := range p.InFlight {
		if n != node {
			c++
		}
	}
	return c
}

type eventDoc struct {
	ID       string    `firestore:"id"`
	ExpireAt time.Time `firestore:"expireAt"`
	MarkedAt time.Time `firestore:"markedAt"`
}

type deferralDoc struct {
	Node    string    `firestore:"node"`
	Project string    `firestore:"project"`
	Since   time.Time `firestore:"since"`
	Due     time.Time `firestore:"due"`
	Reason  string    `firestore:"reason"`
}

type holdDoc struct {
	Node    string    `firestore:"node"`
	Project string    `firestore:"project"`
	NodeID  int64     `firestore:"nodeId"`
	Since   time.Time `firestore:"since"`
	EventID string    `firestore:"eventId"`
	Reason  string    `firestore:"reason"`
}

func (d holdDoc) hold() remediate.Hold {
	return remediate.Hold{Node: d.Node, Project: d.Project, NodeID: d.NodeID, Since: d.Since, EventID: d.EventID, Reason: d.Reason}
}

type stateDoc struct {
	Cursor    string    `firestore:"cursor"`
	UpdatedAt time.Time `firestore:"updatedAt"`
}

// MarkEvent implements remediate.Store. A mark whose expireAt has passed (by
// the store's clock) counts as absent even before the TTL policy deletes it.
func (f *Firestore) MarkEvent(ctx context.Context, id string, expire time.Time) (bool, error) {
	if id == "" {
		return false, fmt.Errorf("mark event: empty id")
	}
	ref := f.col(CollectionEvents).Doc(docID(id))
	doc := map[string]any{"id": id, EventExpireField: expire, "markedAt": f.clock()}
	var err error
	for round := 0; round < casRounds; round++ {
		var snaps []*firestore.DocumentSnapshot
		if snaps, err = f.client.GetAll(ctx, []*firestore.DocumentRef{ref}); err != nil { // rest: firestore.projects.databases.documents.batchGet
			return false, fmt.Errorf("mark event %s: %w", id, err)
		}
		if s := snaps[0]; s.Exists() {
			var old eventDoc
			if err := s.DataTo(&old); err != nil {
				return false, fmt.Errorf("mark event %s: %w", id, err)
			}
			if old.ExpireAt.After(f.clock()) {
				return false, nil
			}
		}
		if err = f.commit(ctx, write{snap: snaps[0], data: doc}); err == nil {
			return true, nil
		}
		if !lostRace(err) {
			return false, fmt.Errorf("mark event %s: %w", id, err)
		}
		// Someone marked it meanwhile; look again.
	}
	return false, fmt.Errorf("mark event %s: contention persisted: %w", id, err)
}

// casRounds bounds the read-compute-write rounds of one call. A round is
// lost only when another writer changed one of the documents since it was
// read, and the next round sees that change (a live lease answers
// ErrClaimed at once), so a few rounds settle any real contention.
const casRounds = 32

// write is one conditional write: the document read as snap is replaced by
// data, on the condition that it was not changed (or, when snap shows no
// document, not created) since.
//
// A write with no snap is an unconditional merge: the fields named in merge
// of ref are set from data (a per-node summary, see summary.go).
type write struct {
	snap  *firestore.DocumentSnapshot
	data  map[string]any
	ref   *firestore.DocumentRef
	merge []firestore.FieldPath
}

// commit applies writes atomically, all or none, in a transaction that only
// writes: the read happened before, outside it, and the preconditions make
// the commit fail when any document changed since. Unlike a transaction
// that reads, this takes no read locks, so racing claimants never wait for
// each other's locks (the emulator's pessimistic locking turns that into
// multi-second lock timeouts); the loser simply reads again.
func (f *Firestore) commit(ctx context.Context, writes ...write) error {
	// rest: firestore.projects.databases.documents.beginTransaction
	// rest: firestore.projects.databases.documents.rollback
	// rest: firestore.projects.databases.documents.commit
	return f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		for _, w := range writes {
			var err error
			if w.snap == nil {
				if err := tx.Set(w.ref, w.data, firestore.Merge(w.merge...)); err != nil {
					return err
				}
				continue
			}
			if w.snap.Exists() {
				ups := make([]firestore.Update, 0, len(w.data))
				for k, v := range w.data {
					ups = append(ups, firestore.Update{FieldPath: firestore.FieldPath{k}, Value: v})
				}
				err = tx.Update(w.snap.Ref, ups, firestore.LastUpdateTime(w.snap.UpdateTime))
			} else {
				err = tx.Create(w.snap.Ref, w.data)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}, firestore.MaxAttempts(1))
}

// refusedByFirestore reports whether Firestore refused a write itself
// (INVALID_ARGUMENT: a value or document over its size limit, say), which
// no retry mends.
func refusedByFirestore(err error) bool {
	return status.Code(err) == codes.InvalidArgument
}

// lostRace reports whether err means another writer got there first: a
// precondition failed, or Firestore aborted the commit on contention.
func lostRace(err error) bool {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound, codes.Aborted:
		return true
	}
	return false
}

// History implements remediate.Store.
func (f *Firestore) History(ctx context.Context, node, project, eventID string, now time.Time, window time.Duration) (remediate.History, error) {
	refs := []*firestore.DocumentRef{
		f.col(CollectionRecoveries).Doc(docID(node)),
		f.col(CollectionProjects).Doc(docID(project)),
		f.col(CollectionDeferrals).Doc(docID(node)),
		f.col(CollectionHolds).Doc(docID(node)),
	}
	refs = append(refs, f.pausesRef())
	if eventID != "" {
		refs = append(refs, f.col(CollectionEvents).Doc(docID(eventID)))
	}
	snaps, err := f.client.GetAll(ctx, refs) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return remediate.History{}, fmt.Errorf("history of %s: %w", node, err)
	}
	var h remediate.History
	n, err := fromSnapshot(snaps[0])
	if err != nil {
		return h, err
	}
	if n.Latest != nil {
		h.Recovery = n.Latest
	}
	h.Recreates = recreatesWithin(n.Recreates, now, window)
	p, err := projectFromSnapshot(snaps[1])
	if err != nil {
		return h, err
	}
	h.InFlight = p.others(node)
	if snaps[2].Exists() {
		var d deferralDoc
		if err := snaps[2].DataTo(&d); err != nil {
			return h, fmt.Errorf("deferral of %s: %w", node, err)
		}
		dd := d.deferral()
		h.Deferral = &dd
	}
	if snaps[3].Exists() {
		var d holdDoc
		if err := snaps[3].DataTo(&d); err != nil {
			return h, fmt.Errorf("hold of %s: %w", node, err)
		}
		if hd := d.hold(); !holdExpired(hd, now, f.holdTTL) {
			h.Hold = &hd
		}
	}
	pauses, err := pausesFromSnapshot(snaps[4])
	if err != nil {
		return h, err
	}
	h.Pause = pauses.covering(node)
	if ev := snaps[len(snaps)-1]; eventID != "" && ev.Exists() {
		var e eventDoc
		if err := ev.DataTo(&e); err != nil {
			return h, fmt.Errorf("event %s: %w", eventID, err)
		}
		h.EventSeen = e.ExpireAt.After(now)
	}
	return h, nil
}

// Claim implements remediate.Store: read the node's and the project's
// documents, the zone's breaker and the pauses that could cover the node,
// apply the claim rules and guards, and commit the node, project and breaker
// documents conditionally on none having changed since; a lost race starts
// over from the read, where a winner's live lease answers ErrClaimed. A
// pause written meanwhile bumps the project (or, for a zone of every
// project, the breaker) document, so it also makes the commit fail and is
// seen on the next round. A refusal by the breaker writes only the breaker
// document, and only on the one refusal that trips it (so exactly one
// claimant sees Tripped).
func (f *Firestore) Claim(ctx context.Context, req remediate.ClaimRequest) (remediate.Recovery, error) {
	nodeRef := f.col(CollectionRecoveries).Doc(docID(req.Node))
	projRef := f.col(CollectionProjects).Doc(docID(req.Project))
	zone := claimZone(req)
	refs := []*firestore.DocumentRef{nodeRef, projRef}
	if zone != "" {
		refs = append(refs, f.breakerRef(zone))
	}
	refs = append(refs, f.pausesRef())
	var err error
	for round := 0; round < casRounds; round++ {
		var snaps []*firestore.DocumentSnapshot
		if snaps, err = f.client.GetAll(ctx, refs); err != nil { // rest: firestore.projects.databases.documents.batchGet
			return remediate.Recovery{}, fmt.Errorf("claim %s: %w", req.Node, err)
		}
		cur, err := fromSnapshot(snaps[0])
		if err != nil {
			return remediate.Recovery{}, err
		}
		proj, err := projectFromSnapshot(snaps[1])
		if err != nil {
			return remediate.Recovery{}, err
		}
		var b breakerState
		var bsnap *firestore.DocumentSnapshot
		if zone != "" {
			bsnap = snaps[2]
			if b, err = breakerFromSnapshot(bsnap); err != nil {
				return remediate.Recovery{}, err
			}
		}
		pauses, err := pausesFromSnapshot(snaps[len(snaps)-1])
		if err != nil {
			return remediate.Recovery{}, err
		}
		next, nb, writeBreaker, rec, err := claimGuarded(cur, proj.others(req.Node), pauses.covering(req.Node), b, req)
		var open *remediate.BreakerOpenError
		switch {
		case errors.As(err, &open) && writeBreaker:
			// The trip: mark it, conditionally, so one claimant reports it.
			if cerr := f.commit(ctx, write{snap: bsnap, data: breakerFields(nb)}); cerr == nil {
				return remediate.Recovery{}, err
			} else if !lostRace(cerr) {
				return remediate.Recovery{}, fmt.Errorf("claim %s: mark breaker of %s tripped: %w", req.Node, zone, cerr)
			}
			if err := sleepJitter(ctx, round); err != nil {
				return remediate.Recovery{}, fmt.Errorf("claim %s: %w", req.Node, err)
			}
			continue
		case err != nil:
			return remediate.Recovery{}, err
		}
		doc, err := toDoc(next)
		if err != nil {
			return remediate.Recovery{}, err
		}
		// The project document is written on every claim, also when the
		// set does not change: the in-flight count was read from it, and its
		// precondition is what serializes claims of one project.
		if !slices.Contains(proj.InFlight, req.Node) {
			proj.InFlight = append(proj.InFlight, req.Node)
		}
		proj.Project = req.Project
		writes := []write{{snap: snaps[0], data: doc.fields()}, {snap: snaps[1], data: proj.fields()}, f.summaryRecWrite(doc)}
		switch {
		case writeBreaker:
			writes = append(writes, write{snap: bsnap, data: breakerFields(nb)})
		case bsnap != nil:
			// Unchanged, but conditional: a zone-wide pause written since
			// the read bumps this document, so the claim starts over and
			// sees it (a takeover too, which writes no breaker start).
			writes = append(writes, write{snap: bsnap, data: breakerFields(b)})
		}
		err = f.commit(ctx, writes...)
		if err == nil {
			return rec, nil
		}
		if !lostRace(err) {
			return remediate.Recovery{}, fmt.Errorf("claim %s: %w", req.Node, err)
		}
		if err := sleepJitter(ctx, round); err != nil {
			return remediate.Recovery{}, fmt.Errorf("claim %s: %w", req.Node, err)
		}
	}
	return remediate.Recovery{}, fmt.Errorf("claim %s: contention persisted: %w", req.Node, err)
}

func sleepJitter(ctx context.Context, round int) error {
	d := time.Duration(rand.IntN(5*(min(round, 10)+1))) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Update implements remediate.Store.
func (f *Firestore) Update(ctx context.Context, rec remediate.Recovery) error {
	nodeRef := f.col(CollectionRecoveries).Doc(docID(rec.Node))
	var err error
	for round := 0; round < casRounds; round++ {
		var snaps []*firestore.DocumentSnapshot
		if snaps, err = f.client.GetAll(ctx, []*firestore.DocumentRef{nodeRef}); err != nil { // rest: firestore.projects.databases.documents.batchGet
			return fmt.Errorf("update %s: %w", rec.Node, err)
		}
		cur, err := fromSnapshot(snaps[0])
		if err != nil {
			return err
		}
		next, err := update(cur, rec)
		if err != nil {
			return err
		}
		doc, err := toDoc(next)
		if err != nil {
			return refused(err) // an encoding fails the same way every time
		}
		writes := []write{{snap: snaps[0], data: doc.fields()}, f.summaryRecWrite(doc)}
		if cur.Latest.Unfinished() && !next.Latest.Unfinished() {
			// Finishing: the node leaves its project's in-flight set.
			projRef := f.col(CollectionProjects).Doc(docID(cur.Latest.Project))
			ps, err := f.client.GetAll(ctx, []*firestore.DocumentRef{projRef}) // rest: firestore.projects.databases.documents.batchGet
			if err != nil {
				return fmt.Errorf("update %s: %w", rec.Node, err)
			}
			proj, err := projectFromSnapshot(ps[0])
			if err != nil {
				return err
			}
			if slices.Contains(proj.InFlight, rec.Node) {
				proj.InFlight = slices.DeleteFunc(proj.InFlight, func(n string) bool { return n == rec.Node })
				writes = append(writes, write{snap: ps[0], data: proj.fields()})
			}
		}
		err = f.commit(ctx, writes...)
		if err == nil {
			return nil
		}
		if refusedByFirestore(err) {
			return fmt.Errorf("update %s: %w", rec.Node, refused(err))
		}
		if !lostRace(err) {
			return fmt.Errorf("update %s: %w", rec.Node, err)
		}
		if err := sleepJitter(ctx, round); err != nil {
			return fmt.Errorf("update %s: %w", rec.Node, err)
		}
	}
	return fmt.Errorf("update %s: contention persisted: %w", rec.Node, err)
}

// KeepEvidence implements remediate.Store: read, add, commit on the read's
// precondition (a concurrent Update or Claim makes it read again).
func (f *Firestore) KeepEvidence(ctx context.Context, node string, e remediate.Evidence) (bool, error) {
	nodeRef := f.col(CollectionRecoveries).Doc(docID(node))
	var err error
	for round := 0; round < casRounds; round++ {
		var snaps []*firestore.DocumentSnapshot
		if snaps, err = f.client.GetAll(ctx, []*firestore.DocumentRef{nodeRef}); err != nil { // rest: firestore.projects.databases.documents.batchGet
			return false, fmt.Errorf("keep evidence of %s: %w", node, err)
		}
		cur, err := fromSnapshot(snaps[0])
		if err != nil {
			return false, err
		}
		next, kept := keepEvidence(cur, e)
		if !kept {
			return false, nil
		}
		doc, err := toDoc(next)
		if err != nil {
			return false, err
		}
		err = f.commit(ctx, write{snap: snaps[0], data: doc.fields()})
		if err == nil {
			return true, nil
		}
		if !lostRace(err) {
			return false, fmt.Errorf("keep evidence of %s: %w", node, err)
		}
		if err := sleepJitter(ctx, round); err != nil {
			return false, fmt.Errorf("keep evidence of %s: %w", node, err)
		}
	}
	return false, fmt.Errorf("keep evidence of %s: contention persisted: %w", node, err)
}

// Unfinished implements remediate.Store; recoveries are sorted by node name.
func (f *Firestore) Unfinished(ctx context.Context) ([]remediate.Recovery, error) {
	var out []remediate.Recovery
	err := each(f.col(CollectionRecoveries).Where("unfinished", "==", true).Documents(ctx), func(s *firestore.DocumentSnapshot) error { // rest: firestore.projects.databases.documents.runQuery
		n, err := fromSnapshot(s)
		if err != nil {
			return err
		}
		if n.Latest != nil && n.Latest.Unfinished() {
			out = append(out, *n.Latest)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list unfinished recoveries: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

func (d deferralDoc) deferral() remediate.Deferral {
	return remediate.Deferral{Node: d.Node, Project: d.Project, Since: d.Since, Due: d.Due, Reason: d.Reason}
}

// SetDeferral implements remediate.Store.
func (f *Firestore) SetDeferral(ctx context.Context, d remediate.Deferral) error {
	if d.Node == "" {
		return fmt.Errorf("set deferral: empty node")
	}
	doc := deferralDoc{Node: d.Node, Project: d.Project, Since: d.Since, Due: d.Due, Reason: d.Reason}
	if err := f.setWithSummary(ctx, f.col(CollectionDeferrals).Doc(docID(d.Node)), doc, d.Node, "deferral", doc.fields()); err != nil {
		return fmt.Errorf("set deferral of %s: %w", d.Node, err)
	}
	return nil
}

// ClearDeferral implements remediate.Store; clearing an absent deferral is
// not an error.
func (f *Firestore) ClearDeferral(ctx context.Context, node string) error {
	if err := f.setWithSummary(ctx, f.col(CollectionDeferrals).Doc(docID(node)), nil, node, "deferral", nil); err != nil {
		return fmt.Errorf("clear deferral of %s: %w", node, err)
	}
	return nil
}

// SetHold implements remediate.Store.
func (f *Firestore) SetHold(ctx context.Context, h remediate.Hold) error {
	if h.Node == "" {
		return fmt.Errorf("set hold: empty node")
	}
	doc := holdDoc{Node: h.Node, Project: h.Project, NodeID: h.NodeID, Since: h.Since, EventID: h.EventID, Reason: h.Reason}
	if err := f.setWithSummary(ctx, f.col(CollectionHolds).Doc(docID(h.Node)), doc, h.Node, "hold", doc.fields()); err != nil {
		return fmt.Errorf("set hold of %s: %w", h.Node, err)
	}
	return nil
}

// ClearHold implements remediate.Store; clearing an absent hold is not an
// error.
func (f *Firestore) ClearHold(ctx context.Context, node string) error {
	if err := f.setWithSummary(ctx, f.col(CollectionHolds).Doc(docID(node)), nil, node, "hold", nil); err != nil {
		return fmt.Errorf("clear hold of %s: %w", node, err)
	}
	return nil
}

// DueDeferrals implements remediate.Store; deferrals are sorted by due time,
// then node name.
func (f *Firestore) DueDeferrals(ctx context.Context, now time.Time) ([]remediate.Deferral, error) {
	var out []remediate.Deferral
	err := eachDoc(f.col(CollectionDeferrals).Where("due", "<=", now).OrderBy("due", firestore.Asc).Documents(ctx), func(d deferralDoc) error { // rest: firestore.projects.databases.documents.runQuery
		out = append(out, d.deferral())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list due deferrals: %w", err)
	}
	sortDeferrals(out)
	return out, nil
}

func (f *Firestore) stateRef() *firestore.DocumentRef {
	return f.col(CollectionState).Doc("sweep")
}

// SweepCursor implements remediate.Store.
func (f *Firestore) SweepCursor(ctx context.Context) (string, error) {
	snaps, err := f.client.GetAll(ctx, []*firestore.DocumentRef{f.stateRef()}) // rest: firestore.projects.databases.documents.batchGet
	if err != nil {
		return "", fmt.Errorf("read sweep cursor: %w", err)
	}
	s := snaps[0]
	if !s.Exists() {
		return "", nil
	}
	var d stateDoc
	if err := s.DataTo(&d); err != nil {
		return "", fmt.Errorf("read sweep cursor: %w", err)
	}
	return d.Cursor, nil
}

// SetSweepCursor implements remediate.Store.
func (f *Firestore) SetSweepCursor(ctx context.Context, cursor string) error {
	if _, err := f.stateRef().Set(ctx, stateDoc{Cursor: cursor, UpdatedAt: f.clock()}); err != nil { // rest: firestore.projects.databases.documents.commit
		return fmt.Errorf("save sweep cursor: %w", err)
	}
	return nil
}
