package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// outcomeRecorder passes every record on and remembers, for each recovery a
// record shows the run starting (a recreate or reset that is not a dry
// run), how it went on: the continuation records of replay and sweep carry
// the recovery's phase and, on the last one, its outcome. So the output can
// end with each recovery's last state, which the entry's own line (its
// first step) cannot say.
type outcomeRecorder struct {
	next remediate.Recorder

	mu     sync.Mutex
	list   []*tracked
	byNode map[string]*tracked // the node's latest recovery
}

type tracked struct {
	o     outcome
	ended bool
}

func newOutcomeRecorder(next remediate.Recorder) *outcomeRecorder {
	return &outcomeRecorder{next: next, byNode: map[string]*tracked{}}
}

func (o *outcomeRecorder) Record(ctx context.Context, r remediate.Record) error {
	o.observe(r)
	return o.next.Record(ctx, r)
}

func (o *outcomeRecorder) observe(r remediate.Record) {
	if r.Node == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.byNode[r.Node]
	starts := (r.Action == remediate.ActionRecreate || r.Action == remediate.ActionReset) && !r.DryRun && r.Phase != ""
	if starts && (t == nil || t.ended) {
		t = &tracked{o: outcome{Node: r.Node, Action: string(r.Action)}}
		o.list = append(o.list, t)
		o.byNode[r.Node] = t
	}
	if t == nil || t.ended {
		return
	}
	if r.Phase != "" {
		t.o.Phase = string(r.Phase)
	}
	if r.Generation > 0 {
		t.o.Generation = r.Generation
	}
	if !r.Time.IsZero() {
		t.o.Time = r.Time.UTC().Format(time.RFC3339Nano)
	}
	switch r.Outcome {
	case remediate.OutcomeRecovered, remediate.OutcomeClosed, remediate.OutcomeAbandoned:
		t.ended = true
		t.o.Outcome = string(r.Outcome)
		if r.Outcome != remediate.OutcomeRecovered {
			t.o.Reason = r.Reason
			if r.Err != "" && !strings.Contains(r.Reason, r.Err) {
				t.o.Reason += ": " + r.Err
			}
		}
		t.o.TimeToRecoverSeconds = r.TimeToRecover.Seconds()
	}
}

// unfinishedStore is the part of the ledger that says what is left.
type unfinishedStore interface {
	Unfinished(ctx context.Context) ([]remediate.Recovery, error)
}

// results is every recovery the run started, in the order they started,
// each with its last state; one that did not end is unfinished, with its
// next look as the ledger has it.
func (o *outcomeRecorder) results(ctx context.Context, store unfinishedStore) ([]outcome, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	left := map[string]remediate.Recovery{}
	if store != nil {
		un, err := store.Unfinished(ctx)
		if err != nil {
			return nil, fmt.Errorf("list unfinished recoveries: %w", err)
		}
		for _, r := range un {
			left[r.Node] = r
		}
	}
	out := make([]outcome, 0, len(o.list))
	for _, t := range o.list {
		oc := t.o
		if !t.ended {
			oc.Outcome = outcomeUnfinished
			if r, ok := left[oc.Node]; ok {
				oc.Phase = string(r.Phase)
				oc.Reason = r.LastError
				if !r.NextLookAt.IsZero() {
					oc.NextLookAt = r.NextLookAt.UTC().Format(time.RFC3339)
				}
			}
		}
		out = append(out, oc)
	}
	return out, nil
}

// countRecoveries counts outcomes by how they ended.
func countRecoveries(os []outcome) recoveryCounts {
	c := recoveryCounts{Started: len(os)}
	for _, o := range os {
		switch o.Outcome {
		case string(remediate.OutcomeRecovered):
			c.Recovered++
		case string(remediate.OutcomeClosed):
			c.Closed++
		case string(remediate.OutcomeAbandoned):
			c.Abandoned++
		default:
			c.Unfinished++
		}
	}
	return c
}

// started reports whether the run started (or resumed) a recovery of node.
func (o *outcomeRecorder) started(node string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.byNode[node]
	return ok
}

// resume tracks a recovery an earlier run left unfinished in the ledger,
// which this run goes on with: its outcome is this run's to report.
func (o *outcomeRecorder) resume(r remediate.Recovery) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.byNode[r.Node]; t != nil && !t.ended {
		return
	}
	t := &tracked{o: outcome{Node: r.Node, Action: string(r.Action), Phase: string(r.Phase), Generation: r.Generation}}
	o.list = append(o.list, t)
	o.byNode[r.Node] = t
}
