package remediate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// failingMarks fails MarkEvent, as a ledger outage would.
type failingMarks struct{ remediate.Store }

func (failingMarks) MarkEvent(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("firestore: unavailable")
}

// Killed mutation: a MarkEvent error swallowed. An entry decided and
// acted on but not marked processed must be answered with a transient
// error, so that Pub/Sub redelivers it and the mark is made; swallowed, the
// delivery is acknowledged and a redelivery of the same entry (Pub/Sub
// delivers at least once) is decided again as if new.
func TestMarkEventFailureIsReturnedAsTransient(t *testing.T) {
	for _, tt := range []struct {
		name  string
		state string
		want  remediate.Action
	}{
		{"healthy node: record", "READY", remediate.ActionRecord},
		{"terminated node: recreate", "TERMINATED", remediate.ActionRecreate},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := fullNode(tt.state)
			if tt.state == "READY" {
				n.Health = "HEALTHY"
			}
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n}})
			remediate.SetStore(e.h, failingMarks{e.store})
			r, err := e.h.Handle(context.Background(), terminate("e1"))
			if err == nil {
				t.Fatalf("Handle with MarkEvent failing = nil error (record %s %q); want a transient error", r.Action, r.Reason)
			}
			if remediate.KindOf(err) != remediate.KindTransient {
				t.Errorf("error %v is %v, want transient (redelivered)", err, remediate.KindOf(err))
			}
			if !strings.Contains(r.Err, "mark event") {
				t.Errorf("record error %q, want it to name the failed mark", r.Err)
			}
			if r.Action != tt.want {
				t.Errorf("action %s, want %s", r.Action, tt.want)
			}
		})
	}
}
