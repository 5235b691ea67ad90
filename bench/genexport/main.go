// Command genexport writes a synthetic Cloud Logging export of TPU system
// events for the parser benchmark (bench/parse.sh), in the mix measured on a
// real maintenance night: 35% node terminates with a terminateReason, 35%
// per-worker terminates (tpu_worker resource), 15% restarts, 15% entries of
// methods tpu-autoheal does not handle.
//
//	genexport -size 1000000000 -form jsonl > export.jsonl
//	genexport -size 1000000000 -form array > export.json   # as gcloud logging read --format=json prints it
//
// It prints to stderr how many entries it wrote and how many are
// tpu.nodes.terminate, the count jq and the reader must both select.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "genexport:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("genexport", flag.ContinueOnError)
	size := fs.Int64("size", 100<<20, "approximate output size in `bytes`")
	form := fs.String("form", "jsonl", "`form`: jsonl (one compact entry a line) or array (gcloud's pretty-printed JSON array)")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *form != "jsonl" && *form != "array" {
		return fmt.Errorf("-form %q: want jsonl or array", *form)
	}
	array := *form == "array"
	w := bufio.NewWriterSize(stdout, 1<<20)
	rng := rand.New(rand.NewPCG(*seed, 2))
	start := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	var written, n, terminates int64
	var buf, pretty bytes.Buffer
	if array {
		w.WriteString("[\n")
		written += 2
	}
	for written < *size {
		e := entry(rng, n, start.Add(time.Duration(n)*37*time.Millisecond))
		if e.ProtoPayload.MethodName == "tpu.nodes.terminate" {
			terminates++
		}
		buf.Reset()
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e); err != nil {
			return err
		}
		out := buf.Bytes()
		if array {
			pretty.Reset()
			if n > 0 {
				pretty.WriteString(",\n")
			}
			if err := json.Indent(&pretty, bytes.TrimSpace(out), "  ", "  "); err != nil {
				return err
			}
			out = append([]byte("  "), pretty.Bytes()...)
			if n > 0 {
				out = pretty.Bytes()
				out = append(out[:2], append([]byte("  "), out[2:]...)...)
			}
		}
		k, err := w.Write(out)
		if err != nil {
			return err
		}
		written += int64(k)
		n++
	}
	if array {
		w.WriteString("\n]\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "entries %d terminates %d bytes %d\n", n, terminates, written)
	return nil
}

type labels map[string]string

type logEntry struct {
	ProtoPayload     proto    `json:"protoPayload"`
	InsertID         string   `json:"insertId"`
	Resource         resource `json:"resource"`
	Timestamp        string   `json:"timestamp"`
	Severity         string   `json:"severity"`
	LogName          string   `json:"logName"`
	ReceiveTimestamp string   `json:"receiveTimestamp"`
}

type proto struct {
	Type               string            `json:"@type"`
	Status             map[string]string `json:"status"`
	AuthenticationInfo map[string]string `json:"authenticationInfo"`
	ServiceName        string            `json:"serviceName"`
	MethodName         string            `json:"methodName"`
	ResourceName       string            `json:"resourceName"`
	Metadata           map[string]string `json:"metadata"`
}

type resource struct {
	Type   string `json:"type"`
	Labels labels `json:"labels"`
}

var (
	projects = []string{"acme-ml", "acme-research", "acme-prod-training"}
	zones    = []string{"us-central2-b", "europe-west4-a", "us-east5-a", "us-east1-d"}
	reasons  = []string{"Terminated due to a maintenance event", "PREEMPTED", "HARDWARE_FAILURE", "host error", "HOST_MAINTENANCE"}
	foreign  = []string{"tpu.nodes.create", "tpu.nodes.delete", "tpu.nodes.get", "tpu.nodes.stop"}
)

func entry(rng *rand.Rand, n int64, ts time.Time) logEntry {
	project := projects[rng.IntN(len(projects))]
	zone := zones[rng.IntN(len(zones))]
	node := fmt.Sprintf("llm-v5p-%d-%04d", 8<<rng.IntN(6), rng.IntN(2000))
	e := logEntry{
		ProtoPayload: proto{
			Type:               "type.googleapis.com/google.cloud.audit.AuditLog",
			Status:             map[string]string{},
			AuthenticationInfo: map[string]string{"principalEmail": "system@google.com"},
			ServiceName:        "tpu.googleapis.com",
			ResourceName:       fmt.Sprintf("projects/%s/locations/%s/nodes/%s", project, zone, node),
			Metadata:           map[string]string{},
		},
		InsertID:         fmt.Sprintf("%x%06d", rng.Uint32(), n%1000000),
		Resource:         resource{Type: "audited_resource", Labels: labels{"project_id": project, "service": "tpu.googleapis.com"}},
		Timestamp:        ts.Format(time.RFC3339Nano),
		Severity:         "NOTICE",
		LogName:          "projects/" + project + "/logs/cloudaudit.googleapis.com%2Fsystem_event",
		ReceiveTimestamp: ts.Add(time.Duration(300+rng.IntN(900)) * time.Millisecond).Format(time.RFC3339Nano),
	}
	switch r := rng.IntN(100); {
	case r < 35: // node terminate with a reason
		e.ProtoPayload.MethodName = "tpu.nodes.terminate"
		e.ProtoPayload.Metadata["terminateReason"] = reasons[rng.IntN(len(reasons))]
		e.Resource.Labels["method"] = "tpu.nodes.terminate"
	case r < 70: // per-worker terminate
		e.ProtoPayload.MethodName = "tpu.nodes.terminate"
		e.ProtoPayload.Status = map[string]string{"message": "TPU worker terminated"}
		e.ProtoPayload.Metadata["terminateReason"] = reasons[rng.IntN(len(reasons))]
		e.Resource = resource{Type: "tpu_worker", Labels: labels{"project_id": project, "zone": zone, "node_id": node, "worker_id": fmt.Sprint(rng.IntN(64))}}
	case r < 85: // restart
		e.ProtoPayload.MethodName = "tpu.nodes.restart"
		e.Resource.Labels["method"] = "tpu.nodes.restart"
	default: // a method tpu-autoheal does not handle
		e.ProtoPayload.MethodName = foreign[rng.IntN(len(foreign))]
		e.Resource.Labels["method"] = e.ProtoPayload.MethodName
	}
	return e
}
