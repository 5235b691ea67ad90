package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/internal/tpulegacy"
)

// targetFlags choose the TPU control plane: the simulated one seeded from a
// fleet file, a local control plane at --tpu-endpoint, or the real TPU API
// with Application Default Credentials. The last two are read-only unless
// --apply is given.
type targetFlags struct {
	fleet    string
	fleetOut string
	endpoint string
	apply    bool
	// computeEndpoint is --compute-endpoint: the Compute Engine of the
	// instance path (autoheal simulate's, or "" for none unless the real
	// TPU API is the target).
	computeEndpoint string
	fs              *flag.FlagSet
	// computeAddr serves the simulated Compute Engine of a fleet file
	// that holds instances on this address (autoheal simulate's
	// --compute-addr; "" = a local test server).
	computeAddr string

	embedded []byte              // a fleet to use instead of --fleet (autoheal demo)
	after    func(tpufake.Fleet) // called with the simulated fleet after the run
	listener net.Listener        // serve the simulated fleet here (autoheal simulate)
	// opDelays makes the simulated operations take this long on the replay
	// clock (autoheal demo: deletes and creates take minutes, as real ones
	// do, so the report shows a real timeline); nil = done at once.
	opDelays map[string]time.Duration
	// simNow is the simulated control plane's clock, set by replay to its
	// own clock once that exists (nil = the wall clock).
	simNow func() time.Time
}

func addTargetFlags(fs *flag.FlagSet) *targetFlags {
	t := &targetFlags{fs: fs}
	fs.StringVar(&t.fleet, "fleet", "", "act on a simulated TPU control plane seeded from this fleet `file` (a JSON array of TPU v2 nodes, concatenated \"gcloud ... tpu-vm describe --format=json\" outputs, or {\"nodes\":[...],\"queuedResources\":[...]}); without it the real TPU API is read, and changed only with --apply")
	fs.StringVar(&t.fleetOut, "fleet-out", "", "write the simulated fleet to this `file` after the run (needs --fleet)")
	fs.StringVar(&t.endpoint, "tpu-endpoint", os.Getenv("AUTOHEAL_TPU_ENDPOINT"), "talk to the TPU v2 API at this `URL` (such as autoheal simulate's) instead of Google's; read-only unless --apply ($AUTOHEAL_TPU_ENDPOINT when set)")
	fs.StringVar(&t.computeEndpoint, "compute-endpoint", os.Getenv("AUTOHEAL_COMPUTE_ENDPOINT"), "talk to the Compute Engine API at this `URL` (such as autoheal simulate's) for Compute Engine TPU VMs; read-only unless --apply ($AUTOHEAL_COMPUTE_ENDPOINT when set; with --fleet, the fleet file's instances are simulated instead)")
	fs.BoolVar(&t.apply, "apply", false, "without --fleet: really delete and recreate nodes through the TPU API (default: decide and record only)")
	return t
}

// checkTarget validates the target flags together with the policy's: it runs
// before any input is read.
func (t *targetFlags) check(p *policyFlags) error {
	if t.apply && p.cfg.DryRun {
		return usagef("--dry-run and --apply contradict each other: give one")
	}
	if t.endpoint != "" && (t.fleet != "" || t.embedded != nil) {
		return usagef("--tpu-endpoint and --fleet both choose the control plane: give one")
	}
	if t.endpoint != "" {
		if _, err := tpuapi.EndpointOptions(t.endpoint); err != nil {
			return usagef("--tpu-endpoint: %v", err)
		}
	}
	if t.fleetOut != "" && t.fleet == "" && t.embedded == nil {
		return usagef("--fleet-out needs --fleet (only the simulated fleet can be written)")
	}
	if t.computeEndpoint != "" && flagGiven(t.fs, "compute-endpoint") && (t.fleet != "" || t.embedded != nil) {
		return usagef("--compute-endpoint and --fleet both choose the Compute Engine: give one (a fleet file's instances are simulated)")
	}
	if t.computeEndpoint != "" {
		if _, err := computevm.EndpointOptions(t.computeEndpoint); err != nil {
			return usagef("--compute-endpoint: %v", err)
		}
	}
	return nil
}

// target is an open TPU control plane.
type target struct {
	tpu   remediate.TPU
	srv   *tpufake.Server // nil for the real API
	after func(tpufake.Fleet)
	out   *os.File // --fleet-out, created up front so a bad path fails early
	// readOnly: a real control plane without --apply. The caller runs the
	// policy in dry-run, and tpu refuses every mutation besides.
	readOnly bool

	legacy *tpulegacy.Client // the v1 client of the real API, nil otherwise
	// compute is the instance path's Compute Engine (nil: none chosen;
	// instance entries are recorded as skip); csrv the simulated one when
	// the fleet file holds instances.
	compute computevm.Instances
	csrv    *computefake.Server
	maint   remediate.MaintenanceTPU // the maintenance calls (read-only unless --apply on the real API)
}

// open checks the flags and opens the control plane. It reads the fleet file
// and creates --fleet-out before any input is read.
func (t *targetFlags) open(ctx context.Context) (*target, error) {
	if t.fleet == "" && t.embedded == nil {
		if t.fleetOut != "" {
			return nil, usagef("--fleet-out needs --fleet (only the simulated fleet can be written)")
		}
		tg := &target{readOnly: !t.apply}
		if t.endpoint != "" {
			opts, err := tpuapi.EndpointOptions(t.endpoint)
			if err != nil {
				return nil, usagef("--tpu-endpoint: %v", err)
			}
			c, err := tpuapi.NewFromOptions(ctx, opts...)
			if err != nil {
				return nil, setupf("TPU API client for --tpu-endpoint %s: %v", t.endpoint, err)
			}
			tg.tpu = c
		} else {
			c, err := tpuapi.NewFromOptions(ctx)
			if err != nil {
				return nil, setupf("TPU API client (Application Default Credentials; use --fleet FILE to run without credentials): %v", err)
			}
			// Legacy TPU Nodes go through the v1 API (tpulegacy); the
			// gRPC connection is dialled on first use.
			legacy, err := tpulegacy.NewFromOptions(ctx)
			if err != nil {
				return nil, setupf("TPU v1 API client for legacy TPU Nodes (Application Default Credentials): %v", err)
			}
			tg.tpu, tg.legacy = tpuapi.Router{V2: c, V1: legacy}, legacy
		}
		// Maintenance notices are decided as the function decides them
		// (function.newMaintainer): the v2 and v2alpha1 clients on the
		// same endpoint.
		epOpts, err := tpuapi.EndpointOptions(t.endpoint)
		if err != nil {
			return nil, usagef("--tpu-endpoint: %v", err)
		}
		m, err := tpuapi.NewMaintenanceFromOptions(ctx, epOpts...)
		if err != nil {
			return nil, setupf("TPU API client for maintenance (Application Default Credentials; use --fleet FILE to run without credentials): %v", err)
		}
		tg.maint = m
		if t.computeEndpoint != "" || t.endpoint == "" {
			// The real Compute Engine beside the real TPU API, or the
			// one --compute-endpoint names.
			opts, err := computevm.EndpointOptions(t.computeEndpoint)
			if err != nil {
				return nil, usagef("--compute-endpoint: %v", err)
			}
			c, err := computevm.NewFromOptions(ctx, opts...)
			if err != nil {
				return nil, setupf("Compute Engine client (--compute-endpoint %q): %v", t.computeEndpoint, err)
			}
			tg.compute = c
		}
		if tg.readOnly {
			tg.tpu = readOnlyTPU{tg.tpu}
			tg.maint = readOnlyMaintenance{tg.maint}
			if tg.compute != nil {
				tg.compute = readOnlyCompute{tg.compute}
			}
		}
		return tg, nil
	}
	var fleet tpufake.Fleet
	var err error
	if t.embedded != nil {
		fleet, err = tpufake.ReadFleet(bytes.NewReader(t.embedded))
	} else {
		fleet, err = tpufake.ReadFleetFile(t.fleet)
	}
	if err != nil {
		return nil, usagef("--fleet: %v", err)
	}
	tg := &target{after: t.after}
	if t.fleetOut != "" {
		if tg.out, err = os.Create(t.fleetOut); err != nil {
			return nil, usagef("--fleet-out: %v", err)
		}
	}
	var opts []tpufake.Option
	if t.listener != nil {
		opts = append(opts, tpufake.WithListener(t.listener))
	}
	if len(t.opDelays) > 0 {
		opts = append(opts, tpufake.WithClock(func() time.Time {
			if t.simNow != nil {
				return t.simNow()
			}
			return time.Now()
		}))
		for verb, d := range t.opDelays {
			opts = append(opts, tpufake.WithOperationDelay(verb, d))
		}
	}
	tg.srv = tpufake.New(fleet, opts...)
	svc, err := tg.srv.Service(ctx)
	if err != nil {
		tg.close()
		return nil, fmt.Errorf("simulated TPU API client: %w", err)
	}
	c := tpuapi.New(svc)
	tg.tpu = c
	// The simulated fleet also serves patch, guest attributes and
	// v2alpha1 performMaintenance.
	if tg.maint, err = tpuapi.NewMaintenanceFromOptions(ctx, tg.srv.ClientOptions()...); err != nil {
		tg.close()
		return nil, fmt.Errorf("simulated TPU API client: %w", err)
	}
	if t.embedded == nil {
		// A fleet file that holds Compute Engine instances is also a
		// simulated Compute Engine, on the same clock.
		cf, ok, err := computeFleet(t.fleet)
		if err != nil {
			tg.close()
			return nil, usagef("--fleet: %v", err)
		}
		if ok {
			copts := []computefake.Option{computefake.WithClock(func() time.Time {
				if t.simNow != nil {
					return t.simNow()
				}
				return time.Now()
			})}
			if t.computeAddr != "" {
				ln, err := net.Listen("tcp", t.computeAddr)
				if err != nil {
					tg.close()
					return nil, usagef("--compute-addr %s: %v", t.computeAddr, err)
				}
				copts = append(copts, computefake.WithListener(ln))
			}
			tg.csrv = computefake.New(cf, copts...)
			svc, err := tg.csrv.Service(ctx)
			if err != nil {
				tg.close()
				return nil, fmt.Errorf("simulated Compute Engine client: %w", err)
			}
			tg.compute = computevm.New(svc)
		}
	}
	return tg, nil
}

// computeFleet reads the fleet file as a Compute Engine fleet; ok says it
// holds instances. A file that does not parse as one is a TPU-only fleet (a
// JSON array of TPU nodes reads as instances that are not), unless it is an
// object with an "instances" key: then its instances are wrong, and that is
// said rather than silently dropped.
func computeFleet(path string) (f computefake.Fleet, ok bool, err error) {
	f, err = computefake.ReadFleetFile(path)
	if err != nil {
		var obj map[string]json.RawMessage
		if data, rerr := os.ReadFile(path); rerr == nil && json.Unmarshal(data, &obj) == nil && obj["instances"] != nil {
			return computefake.Fleet{}, false, err
		}
		return computefake.Fleet{}, false, nil
	}
	return f, len(f.Instances) > 0, nil
}

// finish writes --fleet-out (when asked for) and stops the simulated control
// plane. It is called once, after the run, whatever its outcome.
func (tg *target) finish() error {
	defer tg.close()
	if tg.after != nil && tg.srv != nil {
		tg.after(tg.srv.Fleet())
	}
	if tg.out == nil {
		return nil
	}
	if err := tg.srv.Fleet().Write(tg.out); err != nil {
		return fmt.Errorf("--fleet-out %s: %w", tg.out.Name(), err)
	}
	if err := tg.out.Close(); err != nil {
		return fmt.Errorf("--fleet-out %s: %w", tg.out.Name(), err)
	}
	tg.out = nil
	return nil
}

func (tg *target) close() {
	if tg.out != nil {
		tg.out.Close()
	}
	if tg.srv != nil {
		tg.srv.Close()
	}
	if tg.csrv != nil {
		tg.csrv.Close()
	}
	if tg.legacy != nil {
		_ = tg.legacy.Close()
	}
}

// errReadOnly is returned by readOnlyTPU's mutating calls. The handler in
// dry-run never makes them: this is the second lock on the door.
var errReadOnly = errors.New("read-only: the TPU API is only read without --apply")

// readOnlyTPU passes reads through and refuses every mutation.
type readOnlyTPU struct{ remediate.TPU }

func (readOnlyTPU) DeleteNode(context.Context, string) (string, error) { return "", errReadOnly }
func (readOnlyTPU) CreateNode(context.Context, string, string, *tpu.Node) (string, error) {
	return "", errReadOnly
}
func (readOnlyTPU) ResetQueuedResource(context.Context, string) (string, error) {
	return "", errReadOnly
}
func (readOnlyTPU) CreateQueuedResource(context.Context, string, string, *tpu.QueuedResource) (string, error) {
	return "", errReadOnly
}
func (readOnlyTPU) DeleteQueuedResource(context.Context, string) (string, error) {
	return "", errReadOnly
}

// readOnlyMaintenance passes the maintenance reads through and refuses the
// mutations, as readOnlyTPU does.
type readOnlyMaintenance struct{ remediate.MaintenanceTPU }

func (readOnlyMaintenance) PatchNodeMetadata(context.Context, string, map[string]string) (string, error) {
	return "", errReadOnly
}
func (readOnlyMaintenance) PerformMaintenance(context.Context, string) (string, error) {
	return "", errReadOnly
}
func (readOnlyMaintenance) PerformMaintenanceQueuedResource(context.Context, string, []string) (string, error) {
	return "", errReadOnly
}

// readOnlyCompute passes the Compute Engine reads through and refuses the
// mutations, as readOnlyTPU does.
type readOnlyCompute struct{ computevm.Instances }

func (readOnlyCompute) Start(context.Context, computevm.Ref, string) (string, error) {
	return "", errReadOnly
}
func (readOnlyCompute) Insert(context.Context, computevm.Ref, *compute.Instance, string) (string, error) {
	return "", errReadOnly
}
func (readOnlyCompute) RecreateInstances(context.Context, string, []string, string) (string, error) {
	return "", errReadOnly
}
func (readOnlyCompute) SetMetadataKey(context.Context, computevm.Ref, *compute.Instance, string, string) (string, error) {
	return "", errReadOnly
}
func (readOnlyCompute) ReportHostAsFaulty(context.Context, computevm.Ref, string, string) (string, error) {
	return "", errReadOnly
}

// checkZones refuses, before any work, a zone the control plane does not
// know: on the simulated fleet, a zone none of its nodes (nor, with a
// simulated Compute Engine, its instances) is in; on the real API, one whose
// listing answers NOT FOUND (from the TPU API, and from Compute Engine too
// when it is a target: a Compute Engine TPU VM's zone need not be a TPU API
// location).
func (tg *target) checkZones(ctx context.Context, projects, zones []string) error {
	if tg.srv != nil {
		known := map[string]bool{}
		for _, n := range tg.srv.Fleet().Nodes {
			if _, z := remediate.NodeProjectZone(n.Name); z != "" {
				known[z] = true
			}
		}
		if tg.csrv != nil {
			for _, in := range tg.csrv.Fleet().Instances {
				if z := in.Zone[strings.LastIndexByte(in.Zone, '/')+1:]; z != "" {
					known[z] = true
				}
			}
		}
		for _, z := range zones {
			if !known[z] {
				return usagef("--zones %s: no such zone in the fleet file (its zones: %s)", z, strings.Join(sortedKeys(known), ", "))
			}
		}
		return nil
	}
	for _, p := range projects {
		for _, z := range zones {
			parent := "projects/" + p + "/locations/" + z
			if _, _, err := tg.tpu.ListNodes(ctx, parent, ""); !remediate.IsNotFound(err) {
				continue
			}
			if tg.compute == nil {
				return usagef("--zones %s: no such zone: the TPU API has no location %s", z, parent)
			}
			if _, err := tg.compute.ListOptedIn(ctx, p, z); remediate.IsNotFound(err) {
				return usagef("--zones %s: no such zone: neither the TPU API (location %s) nor Compute Engine (projects/%s/zones/%s) knows it", z, parent, p, z)
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
