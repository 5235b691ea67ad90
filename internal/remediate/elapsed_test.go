package remediate_test

import (
	"context"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// slowHistoryStore is a ledger whose History read takes lag on the
// handler's clock (a slow Firestore), everything else taking no time.
type slowHistoryStore struct {
	remediate.Store
	clock *clock
	lag   time.Duration
}

func (s slowHistoryStore) History(ctx context.Context, node, project, eventID string, now time.Time, window time.Duration) (remediate.History, error) {
	s.clock.Advance(s.lag)
	return s.Store.History(ctx, node, project, eventID, now, window)
}

// A record's Elapsed is the decision's whole time, ledger reads included,
// not only its TPU calls (issue #12: 0.021 s for a 3.6 s recovery).
func TestRecordElapsedIncludesLedgerTime(t *testing.T) {
	for _, state := range []string{"READY", "TERMINATED"} {
		t.Run(state, func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode(state)}})
			remediate.SetStore(e.h, slowHistoryStore{Store: e.store, clock: e.clock, lag: 3600 * time.Millisecond})
			rec, err := e.h.Handle(context.Background(), terminate("e1"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := rec.Elapsed, 3600*time.Millisecond; got != want {
				t.Errorf("Elapsed = %v, want %v (the History read's time on the handler's clock)", got, want)
			}
			if got := e.records.list(); len(got) != 1 || got[0].Elapsed != rec.Elapsed {
				t.Errorf("recorded %d records, want 1 carrying Elapsed %v: %+v", len(got), rec.Elapsed, got)
			}
		})
	}
}
