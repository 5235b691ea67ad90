package remediate

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// run advances a claimed recovery: Advance → save the new phase → make the
// call → Advance on its result …, until the recovery waits (an operation is
// running, or a failure backs off) or ends. It never waits for an
// operation: the recovery is saved with its NextLookAt, which releases the
// lease until then. Failures of TPU calls are the recovery's (saved, looked
// at again); only a ledger failure is returned.
// obs ends as the node was last read.
func (h *Handler) run(ctx context.Context, rec Recovery, obs *Observation, r *Record) error {
	rec.NextLookAt = time.Time{} // held now: the lease, not a stale look, protects it
	failures := rec.Failures
	var res StepResult
	refused := false // this run's last call was refused for capacity or quota
	for i := 0; ; i++ {
		next, eff := Advance(rec, *obs, res, h.now(), h.Config)
		if i == maxStepsPerCall && eff.Kind != EffectNone {
			next, eff = rec, Effect{}
			next.NextLookAt = h.now().Add(lookAgain(h.Config))
		}
		if ctx.Err() != nil && eff.Kind != EffectNone {
			// The caller gave up (deadline, shutdown): not a verdict on the
			// node. Save where we are; the next look goes on.
			next, eff = rec, Effect{}
			next.NextLookAt = h.now()
			ctx = context.WithoutCancel(ctx)
		}
		next, eff, sealErr := h.checkSeal(ctx, rec, next, eff, r) // specseal.go
		if sealErr != nil {
			return h.sealWait(ctx, rec, sealErr, r)
		}
		if sendsCall(eff.Kind) && h.Config.Actor != "" {
			next.Actors = appendOp(next.Actors, h.Config.Actor) // saved before the call goes out
		}
		if changed(rec, next) || i == 0 {
			if err := h.save(ctx, next); err != nil {
				r.Phase = rec.Phase
				return err
			}
		}
		rec = next
		if refused {
			r.Refusal, refused = refusalOf(rec, h.Config), false
		}
		if eff.Kind == EffectNone {
			break
		}
		res = h.effect(ctx, rec, eff, obs, r)
		refused = isExhausted(res.Err)
	}
	h.describeEnd(rec, failures, r)
	return nil
}

// describeEnd puts the recovery's state into the record.
func (h *Handler) describeEnd(rec Recovery, failuresBefore int, r *Record) {
	r.Phase, r.Generation = rec.Phase, rec.Generation
	switch rec.Phase {
	case PhaseRecovered:
		r.Outcome = OutcomeRecovered
		if !rec.StartedAt.IsZero() {
			r.TimeToRecover = h.now().Sub(rec.StartedAt)
		}
	case PhaseClosed:
		r.Outcome = OutcomeClosed
		r.Action, r.Reason = ActionRecord, rec.LastError
		if rec.Action == ActionReset && r.Reason != "" && len(r.Steps) > 0 && r.Steps[len(r.Steps)-1].Name == string(EffectDefer) {
			r.Action = ActionSkip
		}
	case PhaseAbandoned:
		r.Outcome = OutcomeAbandoned
		r.Err = fmt.Sprintf("recovery gen %d %s", rec.Generation, rec.LastError)
		r.Reason += "; abandoned: needs a person"
		if r.Spec == nil && rec.Spec != nil {
			if rec.Action == ActionReset {
				r.Spec = rec.Spec
			} else {
				r.Spec, _ = createSpec(rec.Spec, rec.Generation, h.Config)
			}
		}
	default:
		if rec.Failures > failuresBefore || (rec.Failures == failuresBefore && rec.LastError != "" && rec.LastKind.Exhausted()) {
			r.Outcome = OutcomeFailed
			r.Warnings = append(r.Warnings, rec.LastError)
		}
		if !rec.NextLookAt.IsZero() {
			r.Reason += fmt.Sprintf("; phase %s, next look at %s", rec.Phase, rec.NextLookAt.UTC().Format(time.RFC3339))
		}
	}
}

// sendsCall reports whether an effect is a mutating call whose audit entry
// will name the process's identity.
func sendsCall(k EffectKind) bool {
	return k == EffectDelete || k == EffectCreate || k == EffectReset
}

// changed reports whether next differs from rec in anything the ledger
// keeps: the whole recovery is compared, so a field added to Recovery is
// saved without anyone remembering to list it here (a hand list of ten
// fields once missed the evidence rule's; TestChangedSeesEveryField).
func changed(rec, next Recovery) bool {
	return !reflect.DeepEqual(rec, next)
}

// effect makes one call the recovery asked for and returns its result; a
// read updates obs.
func (h *Handler) effect(ctx context.Context, rec Recovery, eff Effect, obs *Observation, r *Record) StepResult {
	res := StepResult{Effect: eff.Kind}
	switch eff.Kind {
	case EffectGet:
		n, err := timedGet(h, ctx, r, EffectGet, eff.Target, h.TPU.GetNode)
		res.Err = err
		if err == nil {
			obs.Node = n
		}
	case EffectGetQR:
		q, err := timedGet(h, ctx, r, EffectGetQR, eff.Target, h.TPU.GetQueuedResource)
		res.Err = err
		if err == nil {
			obs.QueuedResource = q
		}
	case EffectDelete:
		res.Err = h.call(ctx, r, "delete", "", func(ctx context.Context) (string, error) {
			op, err := h.TPU.DeleteNode(ctx, eff.Target)
			res.Operation = op
			return op, err
		})
	case EffectCreate:
		r.Spec = eff.Spec
		r.Warnings = append(r.Warnings, eff.Warnings...)
		parent, _, _, nodeID, err := parseNodeName(eff.Target)
		if err != nil {
			res.Err = &Error{Kind: KindPermanent, Err: err}
			break
		}
		res.Err = h.call(ctx, r, "create", "", func(ctx context.Context) (string, error) {
			op, err := h.TPU.CreateNode(ctx, parent, nodeID, eff.Spec)
			res.Operation = op
			return op, err
		})
	case EffectPoll:
		var done bool
		err := h.call(ctx, r, "poll-operation", eff.Target, func(ctx context.Context) (string, error) {
			var err error
			done, err = h.TPU.GetOperation(ctx, eff.Target)
			return "", err
		})
		res.Done, res.Err = done, err
	case EffectReset:
		res.Err = h.call(ctx, r, "reset", "", func(ctx context.Context) (string, error) {
			op, err := h.TPU.ResetQueuedResource(ctx, eff.Target)
			res.Operation = op
			return op, err
		})
	case EffectMarkReset:
		first, err := h.Store.MarkEvent(ctx, "reset:"+eff.Target, h.now().Add(resetMarkTTL(h.Config)))
		res.First, res.Err = first, err
		r.Steps = append(r.Steps, Step{Name: string(eff.Kind), Start: h.now(), Err: errText(err)})
	case EffectDefer:
		err := h.Store.SetDeferral(ctx, Deferral{Node: rec.Node, Project: rec.Project, Since: h.now(), Due: eff.Due, Reason: eff.Reason})
		res.Err = err
		r.Steps = append(r.Steps, Step{Name: string(eff.Kind), Start: h.now(), Err: errText(err)})
	}
	return res
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Continue advances every unfinished recovery whose NextLookAt (and lease)
// is due, at most Workers at once: each is observed, decided and stepped
// like a delivery, so a continuation is exactly a redelivery of the node's
// own event. Sweeps call it first; `autoheal replay` calls it as its clock
// advances. advanced counts the recoveries looked at.
func (h *Handler) Continue(ctx context.Context) (advanced int, err error) {
	return h.continueDue(ctx, func(string) bool { return true }, func(Record, bool) {})
}

// continueDue is Continue for a sweep: take says whether the sweep still
// decides about a node (it is marked as seen either way), add collects the
// records.
func (h *Handler) continueDue(ctx context.Context, take func(node string) bool, add func(Record, bool)) (int, error) {
	recs, err := h.Store.Unfinished(ctx)
	if err != nil {
		return 0, fmt.Errorf("continue: list unfinished recoveries: %w", err)
	}
	now := h.now()
	var due []Recovery
	for _, rec := range recs {
		// A recovery held or waiting is not decided about again now.
		if ok := take(rec.Node); ok && !now.Before(rec.LeaseUntil) && !now.Before(rec.NextLookAt) {
			due = append(due, rec)
		}
	}
	h.parallel(ctx, len(due), func(i int) { add(h.sweepNode(ctx, due[i].Node, nil, due[i].Cause, false, nil)) })
	return len(due), nil
}

// parallel runs f(0..n-1) on at most Workers goroutines, stopping to start
// new ones once ctx is done.
func (h *Handler) parallel(ctx context.Context, n int, f func(i int)) {
	sem := make(chan struct{}, h.workers())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}(i)
	}
	wg.Wait()
}

// Drain runs Continue until no recovery is unfinished or rounds are used up,
// moving a virtual clock (advance) to the earliest next look before each
// round: `autoheal replay` and tests, whose clock is not the wall clock,
// finish their recoveries with it. It returns how many recoveries are still
// unfinished.
func (h *Handler) Drain(ctx context.Context, advance func(to time.Time), rounds int) (unfinished int, err error) {
	for range rounds {
		recs, err := h.Store.Unfinished(ctx)
		if err != nil {
			return 0, fmt.Errorf("drain: %w", err)
		}
		if len(recs) == 0 {
			return 0, nil
		}
		var next time.Time
		for _, r := range recs {
			at := r.NextLookAt
			if r.LeaseUntil.After(at) {
				at = r.LeaseUntil
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		if now := h.now(); next.After(now) {
			advance(next)
		}
		if _, err := h.Continue(ctx); err != nil {
			return len(recs), err
		}
	}
	recs, err := h.Store.Unfinished(ctx)
	return len(recs), err
}
