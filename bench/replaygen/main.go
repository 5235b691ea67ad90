// Command replaygen writes a simulated fleet and a time-ordered JSON Lines
// export of TPU audit entries about it, for the replay benchmarks in
// bench/replay.sh.
//
//	replaygen -mode healthy -entries 1000000 -nodes 1000 -fleet fleet.json -out entries.jsonl
//	replaygen -mode recreate -entries 10000 -fleet fleet.json -out entries.jsonl
//
// healthy: -nodes READY/HEALTHY opted-in nodes, -entries terminates spread
// over them round robin (the common case: a maintenance wave that recovered
// by itself). recreate: -entries TERMINATED opted-in nodes, one terminate
// each, so every entry is a recreate.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "replaygen:", err)
		os.Exit(1)
	}
}

func run() error {
	mode := flag.String("mode", "healthy", "healthy or recreate")
	entries := flag.Int("entries", 100000, "entries to write")
	nodes := flag.Int("nodes", 1000, "nodes in the fleet (healthy mode)")
	fleetOut := flag.String("fleet", "fleet.json", "fleet file to write")
	out := flag.String("out", "entries.jsonl", "export to write (JSON Lines)")
	flag.Parse()
	if *entries <= 0 || *nodes <= 0 {
		return fmt.Errorf("-entries and -nodes must be positive")
	}
	state, health := "READY", "HEALTHY"
	switch *mode {
	case "healthy":
	case "recreate":
		*nodes = *entries
		state, health = "TERMINATED", "UNHEALTHY_MAINTENANCE"
	default:
		return fmt.Errorf("-mode %q: want healthy or recreate", *mode)
	}
	var f tpufake.Fleet
	for i := range *nodes {
		f.Nodes = append(f.Nodes, &tpu.Node{
			Name: nodeName(i), AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base",
			State: state, Health: health, Labels: map[string]string{"tpu-autoheal": "enabled"},
			Metadata: map[string]string{"autoheal-train-cmd": "python3 train.py"},
		})
	}
	fh, err := os.Create(*fleetOut)
	if err != nil {
		return err
	}
	if err := f.Write(fh); err != nil {
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}

	oh, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(oh, 1<<20)
	start := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	for i := range *entries {
		ts := start.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		fmt.Fprintf(w, `{"insertId":"bench-%d","timestamp":%q,"receiveTimestamp":%q,"logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%%2Fsystem_event","protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":%q,"authenticationInfo":{"principalEmail":"system@google.com"},"metadata":{"terminateReason":"Terminated due to a maintenance event"}},"resource":{"type":"audited_resource","labels":{"project_id":"acme-ml","service":"tpu.googleapis.com"}}}`+"\n",
			i, ts, ts, nodeName(i%*nodes))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return oh.Close()
}

func nodeName(i int) string {
	return fmt.Sprintf("projects/acme-ml/locations/us-central2-b/nodes/bench-%d", i)
}
