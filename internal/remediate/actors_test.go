package remediate_test

import (
	"context"
	"slices"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// The identity a process acts as is saved with the phase that sends its
// call: after `replay --apply` over the function's ledger hands a
// recovery to the function (or back), an audit entry of the other
// process's call is the recovery's own, not a person's delete.
func TestTheActorIsSavedWithTheCallItSends(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}}, tpufake.WithOperationDelay("delete", time.Hour))
	e.h.Config.Actor = "operator@acme.example"
	if _, err := e.h.Handle(context.Background(), terminate("e1")); err != nil {
		t.Fatal(err)
	}
	un, err := e.store.Unfinished(context.Background())
	if err != nil || len(un) != 1 {
		t.Fatalf("unfinished = %+v, %v; want the recovery, its delete running", un, err)
	}
	if !slices.Contains(un[0].Actors, "operator@acme.example") {
		t.Errorf("saved actors %q, want the identity that sent the delete", un[0].Actors)
	}
}

func TestAnEntryByAnActorOfTheRecoveryIsOurs(t *testing.T) {
	rec := remediate.Recovery{Actors: []string{"operator@acme.example"}}
	cfg := remediate.Config{Actor: "tpu-autoheal@acme-ops.iam.gserviceaccount.com"}
	for _, tc := range []struct {
		principal string
		ours      bool
	}{
		{"operator@acme.example", true},
		{"OPERATOR@acme.example", true},
		{"tpu-autoheal@acme-ops.iam.gserviceaccount.com", true},
		{"alice@acme.example", false},
		{"", false},
	} {
		if got := remediate.OurEntry(rec, remediate.Evidence{Principal: tc.principal}, cfg); got != tc.ours {
			t.Errorf("entry by %q: ours = %v, want %v", tc.principal, got, tc.ours)
		}
	}
}
