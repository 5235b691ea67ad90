package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// TestSimulateServesTheFleetToAnotherClient starts `autoheal simulate` on a
// free port, deletes a node through the real TPU client over the network, and
// checks the call summary and --fleet-out after the stop signal.
func TestSimulateServesTheFleetToAnotherClient(t *testing.T) {
	out := filepath.Join(t.TempDir(), "after.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"simulate", "--fleet", fleetFile, "--fleet-out", out, "--addr", "127.0.0.1:0"}, nil, &stdout, &stderr)
	}()

	urlRE := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("simulate printed no address; stdout %q stderr %q", stdout.String(), stderr.String())
	}

	opts, err := tpuapi.EndpointOptions(url)
	if err != nil {
		t.Fatalf("EndpointOptions: %v", err)
	}
	client, err := tpuapi.NewFromOptions(ctx, opts...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	op, err := client.DeleteNode(ctx, healthyNode)
	if err != nil {
		t.Fatalf("DeleteNode: %v", err)
	}
	if done, err := client.GetOperation(ctx, op); !done || err != nil {
		t.Fatalf("GetOperation = %v, %v; want done", done, err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("simulate: %v (stderr %q)", err, stderr.String())
	}
	if got := stdout.String(); !strings.Contains(got, "nodes.delete 1") {
		t.Errorf("stdout = %q; want the call summary to count nodes.delete 1", got)
	}
	after, err := tpufake.ReadFleetFile(out)
	if err != nil {
		t.Fatalf("--fleet-out: %v", err)
	}
	before, err := tpufake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(after.Nodes), len(before.Nodes)-1; got != want {
		t.Errorf("--fleet-out has %d nodes; want %d (the deleted one gone)", got, want)
	}
	for _, n := range after.Nodes {
		if n.Name == healthyNode {
			t.Errorf("--fleet-out still has %s after its delete", healthyNode)
		}
	}
}

func TestSimulateNeedsAFleet(t *testing.T) {
	res := runCLI(t, nil, "simulate", "--addr", "127.0.0.1:0")
	if got := exitCode(res.err, io.Discard); got != exitUsage || !strings.Contains(fmt.Sprint(res.err), "--fleet") {
		t.Errorf("simulate without --fleet: exit %d, error %v; want %d naming --fleet", got, res.err, exitUsage)
	}
}

// TestSimulateServesComputeEngineBesideTheTPUAPI: a combined fleet file is
// served as both fakes; the compute/v1 client reaches the instances at the
// printed address.
func TestSimulateServesComputeEngineBesideTheTPUAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"simulate", "--fleet", "../../internal/computefake/testdata/fleet-combined.json", "--addr", "127.0.0.1:0", "--compute-addr", "127.0.0.1:0"}, nil, &stdout, &stderr)
	}()
	urlRE := regexp.MustCompile(`Compute Engine at (http://127\.0\.0\.1:\d+)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("simulate printed no Compute Engine address; stdout %q stderr %q", stdout.String(), stderr.String())
	}
	opts, err := computevm.EndpointOptions(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := computevm.NewFromOptions(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.GetInstance(ctx, computevm.Ref{Project: "acme-ml", Zone: "us-central1-c", Name: "trainer-a"})
	if err != nil || in.Status != "RUNNING" {
		t.Fatalf("GetInstance = %v, %v", in, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("simulate: %v (stderr %q)", err, stderr.String())
	}
	if got := stdout.String(); !strings.Contains(got, "instances.get 1") {
		t.Errorf("stdout = %q; want the compute call summary", got)
	}
}
