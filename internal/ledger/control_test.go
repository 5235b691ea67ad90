package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
)

// controlStore is what the function asks the ledger about control
// messages; Memory and Firestore both answer.
type controlStore interface {
	BeginSweep(ctx context.Context, id string, now time.Time, minInterval time.Duration) (ledger.SweepAdmission, error)
	EndSweep(ctx context.Context, id string, now time.Time) error
	IssueNonce(ctx context.Context, nonce string, expires time.Time) error
	TakeNonce(ctx context.Context, nonce string, now time.Time) (bool, error)
}

var (
	_ controlStore = (*ledger.Memory)(nil)
	_ controlStore = (*ledger.Firestore)(nil)
)

var t0 = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

// runControlContract checks the sweep gate and the nonces, one step at a
// time, as the function meets them.
func runControlContract(t *testing.T, s controlStore) {
	ctx := context.Background()
	const interval = 30 * time.Second
	for _, step := range []struct {
		name     string
		id       string
		at       time.Duration
		end      bool // the sweep id completes at `at` instead of starting
		act      bool
		redeliv  bool
		whyMatch string
	}{
		{"the first sweep acts", "m1", 0, false, true, false, ""},
		{"a second sweep while the first runs is not acted on", "m2", 5 * time.Second, false, false, false, "still running"},
		{"a redelivery of the unfinished first one is acted on", "m1", 20 * time.Second, false, true, true, ""},
		{"the first completes", "m1", 50 * time.Second, true, false, false, ""},
		{"a sweep 10s after it completed but 60s after it started acts", "m3", 60 * time.Second, false, true, false, ""},
		{"m3 completes", "m3", 61 * time.Second, true, false, false, ""},
		{"a sweep 20s after the last completed sweep started is not acted on", "m4", 80 * time.Second, false, false, false, "after the last completed sweep"},
		{"a redelivery of m3, completed, is not acted on either", "m3", 85 * time.Second, false, false, false, "after the last completed sweep"},
		{"after the interval the next acts", "m5", 91 * time.Second, false, true, false, ""},
	} {
		now := t0.Add(step.at)
		if step.end {
			if err := s.EndSweep(ctx, step.id, now); err != nil {
				t.Fatalf("%s: EndSweep: %v", step.name, err)
			}
			continue
		}
		a, err := s.BeginSweep(ctx, step.id, now, interval)
		if err != nil {
			t.Fatalf("%s: BeginSweep: %v", step.name, err)
		}
		if a.Act != step.act || a.Redelivery != step.redeliv || !strings.Contains(a.Why, step.whyMatch) {
			t.Errorf("%s: got %+v; want act %v, redelivery %v, why containing %q", step.name, a, step.act, step.redeliv, step.whyMatch)
		}
	}

	n := ledger.NewNonce()
	if err := s.IssueNonce(ctx, n, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		nonce string
		at    time.Duration
		want  bool
	}{
		{"an unknown nonce", ledger.NewNonce(), 0, false},
		{"a malformed nonce", "../state/follower", 0, false},
		{"the issued nonce", n, time.Second, true},
		{"the same nonce again (used)", n, 2 * time.Second, false},
	} {
		got, err := s.TakeNonce(ctx, c.nonce, t0.Add(c.at))
		if err != nil || got != c.want {
			t.Errorf("TakeNonce(%s) = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	late := ledger.NewNonce()
	if err := s.IssueNonce(ctx, late, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.TakeNonce(ctx, late, t0.Add(2*time.Minute)); got {
		t.Error("an expired nonce was taken")
	}
}

func TestMemoryControl(t *testing.T) {
	runControlContract(t, ledger.NewMemory(ledger.WithClock(func() time.Time { return t0 })))
}
