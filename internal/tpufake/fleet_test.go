package tpufake_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const (
	fleetFile       = "../../testdata/fleet.json"
	queuedFleetFile = "../../testdata/fleet-queued.json"
)

func readFleet(t *testing.T, path string) tpufake.Fleet {
	t.Helper()
	f, err := tpufake.ReadFleetFile(path)
	if err != nil {
		t.Fatalf("ReadFleetFile(%s): %v", path, err)
	}
	return f
}

func TestFleetRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		wantFirst byte // array form or object form
	}{
		{"array of nodes stays an array", fleetFile, '['},
		{"fleet with queued resources stays an object", queuedFleetFile, '{'},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := readFleet(t, tt.path)
			var buf bytes.Buffer
			if err := want.Write(&buf); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if got := buf.Bytes()[0]; got != tt.wantFirst {
				t.Errorf("Write starts with %q, want %q", got, tt.wantFirst)
			}
			if !bytes.Contains(buf.Bytes(), []byte("\n  ")) {
				t.Errorf("Write output is not indented:\n%s", buf.Bytes())
			}
			got, err := tpufake.ReadFleet(&buf)
			if err != nil {
				t.Fatalf("ReadFleet(Write output): %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round trip changed the fleet (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteEmptyFleetIsEmptyArray(t *testing.T) {
	var buf bytes.Buffer
	if err := (tpufake.Fleet{}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "[]\n"; got != want {
		t.Errorf("Write(empty) = %q, want %q", got, want)
	}
}

func TestReadFleetAcceptsSingleNodeObject(t *testing.T) {
	in := `{"name": "projects/p/locations/z/nodes/n1", "acceleratorType": "v4-8", "state": "READY"}`
	got, err := tpufake.ReadFleet(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ReadFleet: %v", err)
	}
	want := tpufake.Fleet{Nodes: []*tpu.Node{{Name: "projects/p/locations/z/nodes/n1", AcceleratorType: "v4-8", State: "READY"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadFleet (-want +got):\n%s", diff)
	}
}

func TestFleetFileScenarios(t *testing.T) {
	// testdata/README.md describes these; the replay demo relies on them.
	f := readFleet(t, fleetFile)
	got := map[string]string{}
	for _, n := range f.Nodes {
		got[n.Name[strings.LastIndex(n.Name, "/")+1:]] = n.State + "/" + n.Health + "/" + n.Labels["tpu-autoheal"]
	}
	want := map[string]string{
		"llm-v4-128":                   "TERMINATED/UNHEALTHY_MAINTENANCE/enabled",
		"v3-8-exp":                     "READY/HEALTHY/enabled",
		"spot-v5e-8-preempted":         "PREEMPTED//enabled",
		"v4-8-stopped-by-user":         "STOPPED//enabled",
		"v4-32-not-opted-in":           "TERMINATED/UNHEALTHY_MAINTENANCE/",
		"v5p-16-unhealthy-maintenance": "READY/UNHEALTHY_MAINTENANCE/enabled",
		"v4-16-repairing":              "REPAIRING/UNHEALTHY_MAINTENANCE/enabled",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fleet.json scenarios (-want +got):\n%s", diff)
	}
	llm := f.Nodes[0]
	if llm.Metadata["autoheal-train-cmd"] == "" || len(llm.DataDisks) == 0 || len(llm.Tags) == 0 ||
		llm.ShieldedInstanceConfig == nil || llm.ServiceAccount == nil || !llm.SchedulingConfig.Reserved {
		t.Errorf("llm-v4-128 lacks part of the full spec a recreate must carry over: %+v", llm)
	}

	q := readFleet(t, queuedFleetFile)
	if len(q.QueuedResources) != 2 {
		t.Fatalf("fleet-queued.json has %d queued resources, want 2", len(q.QueuedResources))
	}
	if got := q.QueuedResources[0].State.State; got != "SUSPENDED" {
		t.Errorf("spot queued resource state = %s, want SUSPENDED", got)
	}
	if got := q.Nodes[0].State; got != "PREEMPTED" || q.Nodes[0].QueuedResource != q.QueuedResources[0].Name {
		t.Errorf("first queued node = %s owned by %q, want PREEMPTED owned by %q", got, q.Nodes[0].QueuedResource, q.QueuedResources[0].Name)
	}
}

func TestReadFleetRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error
	}{
		{"empty input", "  \n", []string{"empty input"}},
		{"not JSON", "nodes: []", []string{"want a JSON array or object"}},
		{"syntax error names line and column", "[\n  {\"name\": \"projects/p/locations/z/nodes/a\",}\n]", []string{"line 2", "column"}},
		{"node without name", `[{"name":"projects/p/locations/z/nodes/a"},{"acceleratorType":"v4-8"}]`, []string{"nodes[1].name", "missing"}},
		{"short name", `[{"name":"llm-v4-128"}]`, []string{"nodes[0].name", `"llm-v4-128"`, "projects/P/locations/Z/nodes/N"}},
		{"upper-case node id", `[{"name":"projects/p/locations/z/nodes/LLM"}]`, []string{"nodes[0].name", `id "LLM"`}},
		{"duplicate node", `[{"name":"projects/p/locations/z/nodes/a"},{"name":"projects/p/locations/z/nodes/a"}]`, []string{"nodes[1].name", "duplicate of nodes[0]"}},
		{"null node", `[null]`, []string{"nodes[0]", "null node"}},
		{"wrong field type", `[{"name":"projects/p/locations/z/nodes/a","labels":{"team":7}}]`, []string{"nodes[0].labels", "number"}},
		{"numeric id", `{"nodes":[{"name":"projects/p/locations/z/nodes/a"},{"name":"projects/p/locations/z/nodes/b","id":12}]}`, []string{"nodes[1]"}},
		{"unknown top-level field", `{"nodes":[],"queuedResource":[]}`, []string{`"queuedResource"`}},
		{"object that is neither", `{"foo": 1}`, []string{"neither"}},
		{"nodes not an array", `{"nodes":{}}`, []string{"nodes"}},
		{"bad queuedResource reference", `[{"name":"projects/p/locations/z/nodes/a","queuedResource":"qr1"}]`, []string{"nodes[0].queuedResource", `"qr1"`}},
		{"queued resource without spec", `{"nodes":[],"queuedResources":[{"name":"projects/p/locations/z/queuedResources/q"}]}`, []string{"queuedResources[0].tpu.nodeSpec", "missing"}},
		{"queued resource short name", `{"nodes":[],"queuedResources":[{"name":"q"}]}`, []string{"queuedResources[0].name"}},
		{"node spec without parent", `{"queuedResources":[{"name":"projects/p/locations/z/queuedResources/q","tpu":{"nodeSpec":[{"nodeId":"a","node":{}}]}}]}`, []string{"queuedResources[0].tpu.nodeSpec[0].parent"}},
		{"node spec without node", `{"queuedResources":[{"name":"projects/p/locations/z/queuedResources/q","tpu":{"nodeSpec":[{"parent":"projects/p/locations/z","nodeId":"a"}]}}]}`, []string{"nodeSpec[0].node", "missing"}},
		{"node spec with bad id", `{"queuedResources":[{"name":"projects/p/locations/z/queuedResources/q","tpu":{"nodeSpec":[{"parent":"projects/p/locations/z","nodeId":"A_1","node":{}}]}}]}`, []string{"nodeSpec[0].nodeId", `"A_1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tpufake.ReadFleet(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("ReadFleet(%q) = nil error, want one containing %q", tt.in, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ReadFleet error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestReadFleetFileNamesThePath(t *testing.T) {
	path := filepath.Join("testdata", "node-without-name.json")
	_, err := tpufake.ReadFleetFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "nodes[1].name") {
		t.Errorf("ReadFleetFile(%s) error = %v, want it to name the file and nodes[1].name", path, err)
	}
	if _, err := tpufake.ReadFleetFile(filepath.Join("testdata", "absent.json")); err == nil {
		t.Error("ReadFleetFile(absent) = nil error")
	}
}
