package computefake_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

// script makes a fixed sequence of calls, one at a time, against a fake on
// a virtual clock with faults drawn from seed, moving the clock 20 s between
// calls; it never branches on an answer, so two runs differ only by what
// the fake did. It returns the request log.
func script(t *testing.T, seed uint64) []computefake.Request {
	t.Helper()
	f := start(t, fleetFile, computefake.WithRequestLog(1000))
	f.FailRandomly(computefake.Chaos{Seed: seed, Rate: 0.35})
	calls := []func(ctx context.Context){
		func(ctx context.Context) { _, _ = f.svc.Instances.Get(project, zone, "trainer-a").Context(ctx).Do() },
		func(ctx context.Context) {
			_, _ = f.svc.Instances.List(project, zone).Filter("labels.tpu-autoheal=enabled").MaxResults(3).Context(ctx).Do()
		},
		func(ctx context.Context) { _, _ = f.svc.Instances.Stop(project, zone, "trainer-a").Context(ctx).Do() },
		func(ctx context.Context) { _, _ = f.svc.Instances.Start(project, zone, "trainer-a").Context(ctx).Do() },
		func(ctx context.Context) {
			in, ok := f.Instance(name("web-1"))
			if !ok {
				return
			}
			md := in.Metadata
			md.Items = append(md.Items, &compute.MetadataItems{Key: fmt.Sprint("k", len(md.Items)), Value: new("v")})
			_, _ = f.svc.Instances.SetMetadata(project, zone, "web-1", md).Context(ctx).Do()
		},
		func(ctx context.Context) {
			_, _ = f.svc.Instances.Insert(project, zone, newTPUVM("trainer-b")).Context(ctx).Do()
		},
		func(ctx context.Context) { _, _ = f.svc.Instances.Delete(project, zone, "trainer-b").Context(ctx).Do() },
		func(ctx context.Context) {
			_, _ = f.svc.InstanceGroupManagers.ListManagedInstances(project, zone, "slice-mig").MaxResults(2).Context(ctx).Do()
		},
		func(ctx context.Context) {
			_, _ = f.svc.InstanceGroupManagers.RecreateInstances(project, zone, "serve-mig", &compute.InstanceGroupManagersRecreateInstancesRequest{
				Instances: []string{"zones/" + zone + "/instances/serve-mig-a1b2"}}).Context(ctx).Do()
		},
		func(ctx context.Context) {
			_, _ = f.svc.Instances.AggregatedList(project).MaxResults(5).Context(ctx).Do()
		},
	}
	for round := range 8 {
		for i, call := range calls {
			f.callOnce(t, call)
			f.clock.add(20 * time.Second)
			if round == 3 && i == 0 {
				if _, err := f.HostError(name("serve-mig-c3d4")); err != nil {
					t.Logf("host error: %v", err) // part of the script either way
				}
			}
		}
	}
	return f.Requests()
}

// callOnce makes one call of the script and returns once the server has
// answered it. A call that hangs is given up as soon as the server has
// logged it, as a caller's deadline would, with no real-time timeout either
// way: explicit synchronisation, so the next call never overtakes this one.
// A call that made no request (the script's setMetadata of a deleted
// instance) logs nothing.
func (f *fake) callOnce(t *testing.T, call func(context.Context)) {
	t.Helper()
	before := len(f.Requests())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(ctx)
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		if reqs := f.Requests(); len(reqs) > before && strings.Contains(reqs[before].Fault, "hang") {
			cancel()
			<-done
			return
		}
		time.Sleep(100 * time.Microsecond) // waiting for the server to log the request, not for time to pass
	}
}

func TestSeededFaultsReplayExactly(t *testing.T) {
	first := script(t, 42)
	second := script(t, 42)
	if diff := cmp.Diff(first, second); diff != "" {
		t.Fatalf("same seed, different request logs (-first +second):\n%s", diff)
	}
	kinds := map[string]int{}
	for _, r := range first {
		if r.Fault != "" {
			kinds[strings.SplitN(r.Fault, ",", 2)[0]]++
		}
	}
	if len(kinds) < 5 {
		t.Errorf("seed 42 injected %v: want a mix of at least 5 kinds of fault over %d calls", kinds, len(first))
	}
	other := script(t, 43)
	if cmp.Equal(first, other) {
		t.Error("seeds 42 and 43 gave the same request log")
	}
}

func TestDrawnFaultsFitTheirCalls(t *testing.T) {
	f := start(t, fleetFile, computefake.WithRequestLog(1000))
	f.FailRandomly(computefake.Chaos{Seed: 7, Rate: 1, Kinds: []computefake.FaultKind{computefake.KindPageSkip, computefake.KindReadLag}})
	for range 20 {
		_, _ = f.svc.Instances.Get(project, zone, "trainer-a").Do()
		_, _ = f.svc.Instances.List(project, zone).Do()
	}
	for _, r := range f.Requests() {
		switch r.Method {
		case "instances.get":
			if r.Fault != "" {
				t.Errorf("get drew %q: neither kind applies to a get", r.Fault)
			}
		case "instances.list":
			if r.Fault != "page skip" {
				t.Errorf("list drew %q, want page skip", r.Fault)
			}
		}
	}
}
