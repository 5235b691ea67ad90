package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/internal/tpulegacy"
)

// targetFlags choose the TPU control plane: the simulated one seeded from a
// fleet file, or the real TPU API with Application Default Credentials.
type targetFlags struct {
	fleet    string
	fleetOut string

	embedded []byte              // a fleet to use instead of --fleet (autoheal demo)
	after    func(tpufake.Fleet) // called with the simulated fleet after the run
	listener net.Listener        // serve the simulated fleet here (autoheal simulate)
}

func addTargetFlags(fs *flag.FlagSet) *targetFlags {
	t := &targetFlags{}
	fs.StringVar(&t.fleet, "fleet", "", "run against a simulated TPU control plane seeded from this fleet `file` (a JSON array of TPU v2 nodes, or {\"nodes\":[...],\"queuedResources\":[...]}); without it the real TPU API is used with Application Default Credentials")
	fs.StringVar(&t.fleetOut, "fleet-out", "", "write the simulated fleet to this `file` after the run (needs --fleet)")
	return t
}

// target is an open TPU control plane.
type target struct {
	tpu   remediate.TPU
	srv   *tpufake.Server // nil for the real API
	after func(tpufake.Fleet)
	out   *os.File // --fleet-out, created up front so a bad path fails early

	legacy *tpulegacy.Client // the v1 client of the real API, nil otherwise
}

// open checks the flags and opens the control plane. It reads the fleet file
// and creates --fleet-out before any input is read.
func (t *targetFlags) open(ctx context.Context) (*target, error) {
	if t.fleet == "" && t.embedded == nil {
		if t.fleetOut != "" {
			return nil, usagef("--fleet-out needs --fleet (only the simulated fleet can be written)")
		}
		c, err := tpuapi.NewFromOptions(ctx)
		if err != nil {
			return nil, fmt.Errorf("TPU API client (Application Default Credentials; use --fleet FILE to run without credentials): %w", err)
		}
		// Legacy TPU Nodes go through the v1 API (tpulegacy); the
		// gRPC connection is dialled on first use.
		legacy, err := tpulegacy.NewFromOptions(ctx)
		if err != nil {
			return nil, fmt.Errorf("TPU v1 API client for legacy TPU Nodes (Application Default Credentials): %w", err)
		}
		return &target{tpu: tpuapi.Router{V2: c, V1: legacy}, legacy: legacy}, nil
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
	tg.srv = tpufake.New(fleet, opts...)
	svc, err := tg.srv.Service(ctx)
	if err != nil {
		tg.close()
		return nil, fmt.Errorf("simulated TPU API client: %w", err)
	}
	c := tpuapi.New(svc)
	tg.tpu = c
	return tg, nil
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
	if tg.legacy != nil {
		_ = tg.legacy.Close()
	}
}
