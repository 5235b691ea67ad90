package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tpu-autoheal/autoheal/cmd/autoheal/demo"
	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// demoTPU7x is the demo's third part: a 4-VM tpu7x multi-host slice in a
// managed instance group on a simulated Compute Engine. One VM's host
// error is one incident for the slice: record (the MIG repairs it); the
// MIG is stuck, so past the stuck grace the sweep recreates the slice's
// instances together, once. The same computevm backend as the function,
// on a simulated clock.
func demoTPU7x(ctx context.Context, stdout io.Writer) error {
	f, err := computefake.ReadFleet(bytes.NewReader(demo.TPU7x))
	if err != nil {
		return fmt.Errorf("demo tpu7x fleet: %w", err)
	}
	now := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	srv := computefake.New(f, computefake.WithClock(clock))
	defer srv.Close()
	client, err := computevm.NewFromOptions(ctx, srv.ClientOptions()...)
	if err != nil {
		return err
	}
	rec := &computevm.Recovery{
		Compute: client, Store: computevm.NewMemory(), Ledger: ledger.NewMemory(ledger.WithClock(clock)), Recorder: &demoRecords{},
		Config: remediate.DefaultConfig(), Policy: vmpolicy.DefaultConfig(), Holder: "autoheal-demo", Now: clock,
		Sealer: seal.RandomLocalKeys(),
	}
	const project, zone = "acme-ml", "us-central1-c"
	mig := computefake.MIGName(project, zone, "slice-mig")
	if err := srv.SetMIGStuck(mig, true); err != nil {
		return err
	}
	slice := zone + "/slice-mig"
	fmt.Fprintf(stdout, "\nTPU7x on Compute Engine: a 4-VM tpu7x-standard-4t multi-host slice in a MIG (%s, a third\nsimulated fleet); one VM (slice-mig-w1) has a host error and the MIG does not repair it.\n", slice)
	out := newPrinter("text", stdout, "").withActions(instanceActions())
	show := func(rs []remediate.Record) error {
		for _, r := range rs {
			l := lineOf(r, events.Event{Time: r.Time})
			l.Node, l.Cause = slice, "hardware"
			if err := out.print(l); err != nil {
				return err
			}
		}
		return nil
	}
	entry, err := srv.HostError(computefake.InstanceName(project, zone, "slice-mig-w1"))
	if err != nil {
		return err
	}
	ev, err := events.Parse(entry.JSON(), events.Options{})
	if err != nil {
		return fmt.Errorf("demo tpu7x host error: %w", err)
	}
	recs, err := rec.HandleEvent(ctx, ev)
	if err != nil {
		return err
	}
	if err := show(recs); err != nil {
		return err
	}
	hostErr := now
	now = now.Add(rec.Policy.StuckGrace + time.Minute)
	res, err := rec.Sweep(ctx, []string{project}, []string{zone})
	if err != nil {
		return err
	}
	if err := show(res.Records); err != nil {
		return err
	}
	n := srv.Count("instanceGroupManagers.recreateInstances", "")
	fmt.Fprintf(stdout, "    %s: %d recreateInstances of all 4 VMs together, %s after the host error\n",
		slice, n, now.Sub(hostErr).Round(time.Minute))
	if n != 1 {
		return fmt.Errorf("demo tpu7x: %d recreateInstances of %s, want 1", n, slice)
	}
	return nil
}

// instanceActions are the action words of the instance backend
// (internal/vmpolicy), which its table shows.
func instanceActions() []string {
	var out []string
	for _, a := range vmpolicy.Actions {
		out = append(out, string(a))
	}
	return out
}
