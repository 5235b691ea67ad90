// Package demo holds the inputs of `autoheal demo`: copies of the bundled
// simulated fleet (testdata/fleet.json) and maintenance incident
// (testdata/replay/incident.jsonl), embedded so the demo runs from any
// directory. cmd/autoheal's tests keep the copies identical to testdata.
package demo

import _ "embed"

// Fleet is testdata/fleet.json.
//
//go:embed fleet.json
var Fleet []byte

// Incident is testdata/replay/incident.jsonl.
//
//go:embed incident.jsonl
var Incident []byte

// Maintenance is the fleet of the demo's second part: a node with an
// upcoming maintenance notice (prepare, then maintain early).
//
//go:embed maintenance.json
var Maintenance []byte

// TPU7x is the simulated Compute Engine fleet of the demo's third part: a
// 4-VM tpu7x multi-host slice in a managed instance group
// (internal/computefake/testdata/fleet.json's slice-mig).
//
//go:embed tpu7x.json
var TPU7x []byte
