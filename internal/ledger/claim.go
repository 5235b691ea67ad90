package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/policy"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// This file is the ledger's pure core: the rules of claiming, taking over and
// updating a recovery, shared by Memory and Firestore so that both stores
// behave identically. The adapters only load a nodeLedger, call these
// functions inside their atomic section, and save the result.

// maxRecreates bounds the recreate history kept per node. Decide needs only
// the recreates within the window; a few dozen cover any sane window and cap.
const maxRecreates = 64

// nodeLedger is everything the ledger keeps about one node.
type nodeLedger struct {
	Latest *remediate.Recovery // the node's latest recovery, nil if none
	// LeaseFor is the lease length granted by the claim; Update renews the
	// lease by this much.
	LeaseFor time.Duration
	// Counted records that Latest's start time is already in Recreates.
	Counted bool
	// Recreates are the start times of the node's recoveries that became
	// destructive (see countsAsRecreate), oldest first.
	Recreates []time.Time
}

// countsAsRecreate reports whether a recovery in phase p has destroyed, or
// may have destroyed, the node: from the moment the delete (or the queued
// resource reset, saved as creating) is requested, the recovery counts for
// the cooldown and the window cap. Counting at the request, not at done, is
// what makes the guards impossible to bypass by crashing mid-recovery. A
// recovery closed (done) without ever reaching those phases — the node
// recovered by itself — does not count.
func countsAsRecreate(p remediate.Phase) bool { return remediate.CountsAsRecreate(p) }

// recreatesWithin returns the times in (now-window, now], oldest first.
func recreatesWithin(times []time.Time, now time.Time, window time.Duration) []time.Time {
	var out []time.Time
	for _, t := range times {
		if t.After(now) || (window > 0 && !t.After(now.Add(-window))) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// claim applies a ClaimRequest to the node's ledger. inFlightOthers is the
// number of unfinished recoveries of other nodes in the same project.
//
// A live lease blocks every claimant, the holder included: one holder id may
// be shared by concurrent requests of one function instance, and two of them
// must never both act.
func claim(n nodeLedger, inFlightOthers int, req remediate.ClaimRequest) (nodeLedger, remediate.Recovery, error) {
	if req.Node == "" || req.Holder == "" {
		return n, remediate.Recovery{}, fmt.Errorf("claim: node %q and holder %q are required", req.Node, req.Holder)
	}
	lease := req.Config.Lease
	if lease <= 0 {
		lease = remediate.DefaultConfig().Lease
	}
	if r := n.Latest; r != nil && r.Unfinished() {
		if req.Now.Before(r.LeaseUntil) {
			return n, remediate.Recovery{}, fmt.Errorf("claim %s: held by %s until %s: %w",
				req.Node, r.Holder, r.LeaseUntil.Format(time.RFC3339), remediate.ErrClaimed)
		}
		// Take over: the phase, spec and operations are the recovery's
		// memory and are kept; only the claim changes hands. The guards are
		// not re-checked: finishing a recovery already started is never
		// worse than leaving the node deleted.
		t := upgradeRecovery(cloneRecovery(*r)) // legacy.go: the memory store's read
		t.Holder = req.Holder
		t.Attempts++
		t.LeaseUntil = req.Now.Add(lease)
		t.UpdatedAt = req.Now
		n.Latest = &t
		n.LeaseFor = lease
		return n, cloneRecovery(t), nil
	}

	if why, _, err := remediate.Guard(n.Recreates, inFlightOthers, req.Now, req.Config); err != nil {
		return n, remediate.Recovery{}, fmt.Errorf("claim %s: %s: %w", req.Node, why, err)
	}

	gen := 1
	if n.Latest != nil {
		gen = n.Latest.Generation + 1
	}
	r := remediate.Recovery{
		Node:       req.Node,
		Project:    req.Project,
		Action:     req.Action,
		Phase:      remediate.PhaseClaimed,
		Generation: gen,
		Holder:     req.Holder,
		LeaseUntil: req.Now.Add(lease),
		Attempts:   1,
		EventID:    req.EventID,
		Cause:      req.Cause,
		StartedAt:  req.Now,
		UpdatedAt:  req.Now,
	}
	n.Latest = &r
	n.LeaseFor = lease
	n.Counted = false
	return n, cloneRecovery(r), nil
}

// update applies rec to the node's ledger. The claim token is (Holder,
// Generation, Attempts) exactly as Claim returned them: a holder that was
// taken over, or whose recovery was finished and claimed again, gets
// ErrLeaseLost. A holder whose lease expired but was not taken over may still
// update; the update renews its lease.
func update(n nodeLedger, rec remediate.Recovery) (nodeLedger, error) {
	cur := n.Latest
	if cur == nil {
		return n, fmt.Errorf("update %s: no recovery claimed: %w", rec.Node, remediate.ErrLeaseLost)
	}
	if cur.Holder != rec.Holder || cur.Generation != rec.Generation || cur.Attempts != rec.Attempts {
		return n, fmt.Errorf("update %s: claim is %s gen %d attempt %d, not %s gen %d attempt %d: %w",
			rec.Node, cur.Holder, cur.Generation, cur.Attempts, rec.Holder, rec.Generation, rec.Attempts, remediate.ErrLeaseLost)
	}
	if !cur.Unfinished() && rec.Unfinished() {
		return n, fmt.Errorf("update %s: recovery gen %d is already %s: %w", rec.Node, cur.Generation, cur.Phase, remediate.ErrLeaseLost)
	}
	u := cloneRecovery(rec)
	// Identity and claim fields belong to the store, and so does the
	// evidence kept while the holder worked (keepEvidence).
	u.Node, u.Project, u.Generation, u.Holder, u.Attempts, u.StartedAt, u.Paused =
		cur.Node, cur.Project, cur.Generation, cur.Holder, cur.Attempts, cur.StartedAt, cur.Paused
	u.Evidence = slices.Clone(cur.Evidence)
	if u.UpdatedAt.Before(cur.UpdatedAt) {
		u.UpdatedAt = cur.UpdatedAt
	}
	lease := n.LeaseFor
	if lease <= 0 {
		lease = remediate.DefaultConfig().Lease
	}
	u.LeaseUntil = latest(rec.LeaseUntil, cur.LeaseUntil, u.UpdatedAt.Add(lease))
	if !u.NextLookAt.IsZero() && u.Unfinished() {
		// The holder is done until the next look (an operation runs, or a
		// failure backs off): whoever looks then takes the recovery over.
		u.LeaseUntil = u.NextLookAt
	}
	n.Latest = &u
	if countsAsRecreate(u.Phase) && !n.Counted {
		n.Recreates = append(n.Recreates, u.StartedAt)
		sort.Slice(n.Recreates, func(i, j int) bool { return n.Recreates[i].Before(n.Recreates[j]) })
		if len(n.Recreates) > maxRecreates {
			n.Recreates = n.Recreates[len(n.Recreates)-maxRecreates:]
		}
		n.Counted = true
	}
	return n, nil
}

func latest(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// cloneRecovery returns a deep copy of r, so that neither the caller nor the
// store can change the other's spec.
func cloneRecovery(r remediate.Recovery) remediate.Recovery {
	r.Spec = remediate.CloneNode(r.Spec)
	r.SentOps = slices.Clone(r.SentOps)
	r.Actors = slices.Clone(r.Actors)
	r.Evidence = slices.Clone(r.Evidence)
	return r
}

// maxEvidence bounds the evidence kept per recovery: a recovery needs the
// few entries about its own node, and an entry is kept once.
const maxEvidence = 32

// keepEvidence adds e to the node's unfinished recovery, whoever holds it;
// kept is false when there is none. An entry already kept (same InsertID,
// or the same operation's same entry) is not added again; beyond
// maxEvidence the oldest audit entries go (trimEvidence).
func keepEvidence(n nodeLedger, e remediate.Evidence) (nodeLedger, bool) {
	if n.Latest == nil || !n.Latest.Unfinished() {
		return n, false
	}
	r := cloneRecovery(*n.Latest)
	for _, k := range r.Evidence {
		if k.InsertID != "" && k.InsertID == e.InsertID && k.Time.Equal(e.Time) {
			n.Latest = &r
			return n, true
		}
	}
	r.Evidence = append(r.Evidence, e)
	sort.SliceStable(r.Evidence, func(i, j int) bool { return r.Evidence[i].Time.Before(r.Evidence[j].Time) })
	r.Evidence = trimEvidence(r.Evidence)
	n.Latest = &r
	return n, true
}

// trimEvidence drops the oldest audit entries beyond maxEvidence; the
// recovery's own markers (policy.IsMarker) are kept whatever their age
// and do not count toward the bound.
func trimEvidence(list []remediate.Evidence) []remediate.Evidence {
	audit := 0
	for _, e := range list {
		if !policy.IsMarker(e) {
			audit++
		}
	}
	drop := audit - maxEvidence
	if drop <= 0 {
		return list
	}
	out := list[:0]
	for _, e := range list {
		if drop > 0 && !policy.IsMarker(e) {
			drop--
			continue
		}
		out = append(out, e)
	}
	return out
}

// maxValueBytes is the longest string Firestore keeps in one field: its
// INVALID_ARGUMENT for a longer one says "longer than 1048487 bytes". The
// Memory ledger refuses a spec over it as Firestore does, so that both
// ledgers refuse the same recoveries, and alike (refused).
const maxValueBytes = 1_048_487

// refused is err as a write the ledger refused for good: no retry can
// mend it (remediate.KindPermanent; the engine acknowledges the delivery
// instead of having it redelivered forever).
func refused(err error) error {
	return &remediate.Error{Kind: remediate.KindPermanent, Err: err}
}

// checkSpecSize refuses, as Firestore would, a recovery whose encoded spec
// is over maxValueBytes.
func checkSpecSize(rec remediate.Recovery) error {
	spec, err := encodeNode(rec.Spec)
	if err != nil {
		return refused(err)
	}
	if len(spec) > maxValueBytes {
		return refused(fmt.Errorf("update %s: spec is %d bytes encoded, over the ledger's %d for one value", rec.Node, len(spec), maxValueBytes))
	}
	return nil
}

func encodeNode(n *tpu.Node) (string, error) {
	if n == nil {
		return "", nil
	}
	b, err := json.Marshal(n)
	if err != nil {
		return "", fmt.Errorf("encode spec of %s: %w", n.Name, err)
	}
	return string(b), nil
}

func decodeNode(s string) (*tpu.Node, error) {
	if s == "" {
		return nil, nil
	}
	var n tpu.Node
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	return &n, nil
}

// claimGuarded is claim with the fleet-wide guards around it: a pause
// covering the node refuses every claim, takeovers included (a person said
// stop); a new claim of a recreate or reset that passed the per-node rules
// is counted in the zone's storm breaker, or refused when it is open. A
// takeover is never refused by the breaker: finishing a recovery already
// started is never worse than leaving the node deleted, and it was counted
// when it started.
//
// It returns the node's next ledger and, when writeBreaker, the breaker
// state to save, also with a refusal (a Tripped refusal marks the trip).
func claimGuarded(n nodeLedger, inFlightOthers int, pause *remediate.Pause, b breakerState, req remediate.ClaimRequest) (next nodeLedger, nextBreaker breakerState, writeBreaker bool, rec remediate.Recovery, err error) {
	if pause != nil {
		return n, b, false, remediate.Recovery{}, &remediate.PausedError{Pause: *pause}
	}
	takeover := n.Latest != nil && n.Latest.Unfinished()
	next, rec, err = claim(n, inFlightOthers, req)
	if err != nil || takeover || !countsForBreaker(req.Action) {
		return next, b, false, rec, err
	}
	zone := claimZone(req)
	if zone == "" {
		return next, b, false, rec, nil
	}
	nb, write, open := breakerAdmit(b, zone, req.Now, req.Config)
	if open != nil {
		return n, nb, write, remediate.Recovery{}, open
	}
	return next, nb, write, rec, nil
}
