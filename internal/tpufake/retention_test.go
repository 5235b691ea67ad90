package tpufake_test

import (
	"fmt"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// createNodes creates n v4-8 nodes named prefix-0.. and returns their
// operations' names, oldest first.
func createNodes(t *testing.T, svc *tpu.Service, prefix string, n int) []string {
	t.Helper()
	var ops []string
	for i := range n {
		spec := &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base"}
		op, err := svc.Projects.Locations.Nodes.Create(zone, spec).NodeId(fmt.Sprintf("%s-%d", prefix, i)).Do()
		if err != nil {
			t.Fatalf("create %s-%d: %v", prefix, i, err)
		}
		ops = append(ops, op.Name)
	}
	return ops
}

func TestFinishedOperationsAreKeptUpToTheRetention(t *testing.T) {
	const keep = 5
	c := &vclock{t: clock}
	s, svc := start(t, "", tpufake.WithClock(c.now), tpufake.WithOperationPolls(0), tpufake.WithOperationRetention(keep))
	ops := createNodes(t, svc, "n", 3*keep)
	// All finished within the last hour: every one is kept, however many
	// (a wave finishes thousands on one tick, and each recovery must still
	// see its own operation done).
	for i, name := range ops {
		if op, err := svc.Projects.Locations.Operations.Get(name).Do(); err != nil || !op.Done {
			t.Errorf("poll of operation %d (%s), finished just now = %+v, %v; want done", i, name, op, err)
		}
	}
	// An hour later, the next finished operation makes the server forget
	// all but the newest `keep`: every older one answers NOT_FOUND, as the
	// real API does for an operation it forgot.
	c.add(tpufake.OperationMinAge)
	ops = append(ops, createNodes(t, svc, "m", 1)...)
	for i, name := range ops {
		op, err := svc.Projects.Locations.Operations.Get(name).Do()
		if i < len(ops)-keep {
			apiErr(t, err, 404, "NOT_FOUND")
			continue
		}
		if err != nil || !op.Done || op.Error != nil {
			t.Errorf("poll of recent operation %d (%s) = %+v, %v; want done", i, name, op, err)
		}
	}
	// The polls of a forgotten operation are not counted forever either;
	// a kept one's are.
	newest := ops[len(ops)-1]
	if got := s.Count("operations.get", newest); got != 1 {
		t.Errorf("Count(operations.get) of the newest operation = %d, want 1", got)
	}
	c.add(tpufake.OperationMinAge)
	createNodes(t, svc, "k", keep)
	if got := s.Count("operations.get", newest); got != 0 {
		t.Errorf("Count(operations.get) of an operation forgotten since = %d, want 0", got)
	}
	if got, want := s.Count("operations.get", ""), 3*keep+(3*keep+1); got != want { // both rounds of polls
		t.Errorf("Count(operations.get) of any operation = %d, want %d (exact)", got, want)
	}
}

func TestRunningOperationsOutliveTheRetention(t *testing.T) {
	c := &vclock{t: clock}
	_, svc := start(t, fleetFile, tpufake.WithClock(c.now), tpufake.WithOperationRetention(2),
		tpufake.WithOperationDelay("delete", 10*time.Minute), tpufake.WithOperationDelay("create", 0))
	del, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
	if err != nil {
		t.Fatal(err)
	}
	createNodes(t, svc, "n", 10) // ten operations finish while the delete runs
	if got := getOp(t, svc, del.Name); got.Done {
		t.Fatalf("delete done before its delay passed: %+v", got)
	}
	c.add(10 * time.Minute)
	// Just done: a poll right after still sees the result.
	if got := getOp(t, svc, del.Name); !got.Done || got.Error != nil {
		t.Errorf("delete after its delay = %+v, want done", got)
	}
}

func TestZeroRetentionKeepsEveryOperation(t *testing.T) {
	_, svc := start(t, "", tpufake.WithOperationPolls(0), tpufake.WithOperationRetention(0))
	for _, name := range createNodes(t, svc, "n", 10) {
		if got := getOp(t, svc, name); !got.Done {
			t.Errorf("operation %s = %+v, want done", name, got)
		}
	}
}
