package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tpu-autoheal/autoheal/cmd/autoheal/demo"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// demoMaintenance is the demo's second part: against a second
// simulated fleet, a sweep turns a node's upcoming maintenance notice into
// prepare; the simulated guest reports its checkpoint on every worker; the
// next sweep starts the maintenance early (maintain). The same Handler,
// Maintainer and adapters as the function, on a simulated clock.
func demoMaintenance(ctx context.Context, stdout io.Writer) error {
	f, err := tpufake.ReadFleet(bytes.NewReader(demo.Maintenance))
	if err != nil {
		return fmt.Errorf("demo maintenance fleet: %w", err)
	}
	srv := tpufake.New(f, tpufake.WithOperationPolls(0))
	defer srv.Close()
	svc, err := srv.Service(ctx)
	if err != nil {
		return err
	}
	mt, err := tpuapi.NewMaintenanceFromOptions(ctx, srv.ClientOptions()...)
	if err != nil {
		return err
	}
	now := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	cfg := remediate.DefaultConfig()
	var recs demoRecords
	h, err := remediate.New(remediate.Deps{TPU: tpuapi.New(svc), Recorder: &recs, Clock: clock, Holder: "autoheal-demo",
		Maintenance: mt, Notices: ledger.NewMemoryNotices()}.WithLedger(ledger.NewMemory(ledger.WithClock(clock))), cfg)
	if err != nil {
		return err
	}
	opts := remediate.SweepOptions{Projects: []string{"acme-ml"}, Zones: []string{"us-east5-a"}}

	fmt.Fprintln(stdout, "\nBefore maintenance: a node with an upcoming maintenance notice (a second simulated fleet).")
	out := newPrinter("text", stdout, "")
	show := func(rs []remediate.Record) error {
		for _, r := range rs {
			l := lineOf(r, events.Event{Time: r.Time})
			l.Cause = "maintenance"
			if err := out.print(l); err != nil {
				return err
			}
		}
		return nil
	}
	res, err := h.Sweep(ctx, opts)
	if err != nil {
		return err
	}
	if err := show(res.Records); err != nil {
		return err
	}

	// The simulated guest: each worker sees the notice, checkpoints, reports.
	now = now.Add(4 * time.Minute)
	for _, n := range srv.Fleet().Nodes {
		notice := remediate.SentNotice(n)
		if notice == nil {
			continue
		}
		report, _ := json.Marshal(remediate.CheckpointReport{Notice: notice.Notice, Checkpoint: "gs://acme-ckpt/ft/step-18000", Time: now.Format(time.RFC3339)})
		for w := range remediate.Workers(n) {
			srv.SetGuestAttribute(n.Name, tpufake.GuestAttribute{Worker: fmt.Sprint(w), Namespace: remediate.CheckpointNamespace, Key: remediate.CheckpointKey, Value: string(report)})
		}
		for _, ln := range wrap(fmt.Sprintf("guest at %s: every worker (%d) of %s wrote a checkpoint and reported autoheal/checkpoint",
			now.Format(time.RFC3339), remediate.Workers(n), shortNode(n.Name)), textWidth-4) {
			fmt.Fprintf(stdout, "    %s\n", ln)
		}
	}
	now = now.Add(time.Minute)
	if res, err = h.Sweep(ctx, opts); err != nil {
		return err
	}
	if err := show(res.Records); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nMaintenance fleet after the run:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tHEALTH\tUPCOMING MAINTENANCE\tNOTICE SENT")
	for _, n := range srv.Fleet().Nodes {
		um, sent := "-", "-"
		if n.UpcomingMaintenance != nil {
			um = n.UpcomingMaintenance.MaintenanceStatus + " " + n.UpcomingMaintenance.Type
		}
		if s := remediate.SentNotice(n); s != nil {
			sent = s.SentAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", shortNode(n.Name), dash(n.State), dash(n.Health), um, sent)
	}
	return tw.Flush()
}

type demoRecords struct{}

func (*demoRecords) Record(context.Context, remediate.Record) error { return nil }
