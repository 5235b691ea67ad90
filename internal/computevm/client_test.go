package computevm_test

import (
	"context"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/failure"
)

func TestListOptedInListsOnlyOptedInTPUVMsAndSurvivesPageAnomalies(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c, err := computevm.NewFromOptions(ctx, e.fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	c.PageSize = 2
	all, err := c.ListOptedIn(ctx, project, zone)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range all {
		if in.Name == "web-1" {
			t.Errorf("listed web-1, an n2 VM without the label")
		}
	}
	if len(all) != 11 {
		t.Errorf("listed %d instances, want the 11 opted-in TPU VMs of the zone", len(all))
	}
	for _, f := range []computefake.PageFault{computefake.PageRepeat, computefake.PageRestart} {
		e.fake.Fail(computefake.FailRule{Method: "instances.list", Page: f, Nth: 2, Times: 1})
		if _, err := c.ListOptedIn(ctx, project, zone); failure.KindOf(err) != failure.Transient {
			t.Errorf("page fault %s: error %v (kind %v), want a transient error, not a loop", f, err, failure.KindOf(err))
		}
	}
}

func TestErrorsAreClassified(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, computefake.WithOperationDelay("start", 0)) // operations answer DONE
	c, err := computevm.NewFromOptions(ctx, e.fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	ref := computevm.Ref{Project: project, Zone: zone, Name: "reserved-1"}
	if _, err := e.fake.HostError(ref.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInstance(ctx, computevm.Ref{Project: project, Zone: zone, Name: "nope"}); failure.KindOf(err) != failure.NotFound {
		t.Errorf("get of a missing instance: %v", err)
	}
	for _, tt := range []struct {
		rule computefake.FailRule
		want failure.Kind
	}{
		{computefake.FailRule{Method: "instances.start", Code: 503}, failure.Transient},
		{computefake.FailRule{Method: "instances.start", Code: 429}, failure.Transient},
		{computefake.FailRule{Method: "instances.start", Code: 403}, failure.Permanent},
		{computefake.FailRule{Method: "instances.start", Code: 400, Reason: "resourceNotReady"}, failure.Transient},
		{computefake.FailRule{Method: "instances.start", Capacity: computefake.ZoneResourcePoolExhausted}, failure.Stockout},
		{computefake.FailRule{Method: "instances.start", Capacity: computefake.ZoneResourcePoolExhaustedWithDetails}, failure.Stockout},
		{computefake.FailRule{Method: "instances.start", Capacity: computefake.QuotaExceededRegion}, failure.Quota},
		{computefake.FailRule{Method: "instances.start", OperationError: true}, failure.Transient},
		{computefake.FailRule{Method: "instances.start", Malformed: true}, failure.Transient},
	} {
		tt.rule.Times = 1
		e.fake.Fail(tt.rule)
		op, err := c.Start(ctx, ref, computevm.RequestID(tt.rule.String()))
		if err == nil {
			_, err = c.GetOperation(ctx, project, zone, op)
		}
		if got := failure.KindOf(err); got != tt.want {
			t.Errorf("%s: kind %v (%v), want %v", tt.rule.String(), got, err, tt.want)
		}
	}
}
