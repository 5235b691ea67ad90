package tpufake

import (
	"strings"
	"testing"
	"unsafe"

	tpu "google.golang.org/api/tpu/v2"
)

// Nodes recreated with the same large startup script share one copy of it,
// whichever way it reached the server (seed fleet, create, patch); a
// different script stays different, and a script no node holds any more
// leaves the intern table when it is rebuilt.
func TestStoredNodesShareLargeMetadataValues(t *testing.T) {
	script := strings.Repeat("echo resume\n", 3000)
	node := func(name, script string) *tpu.Node {
		return &tpu.Node{Name: "projects/p/locations/us-central2-b/nodes/" + name, AcceleratorType: "v4-8",
			RuntimeVersion: "tpu-ubuntu2204-base", Metadata: map[string]string{"startup-script": script, "small": "x"}}
	}
	s := &Server{nodes: map[string]*tpu.Node{}, order: map[string]int{}, interned: map[string]string{}}
	// Every value is a fresh allocation, as a JSON decode makes.
	fresh := func(v string) string { return string([]byte(v)) }
	for _, name := range []string{"a", "b", "c"} {
		s.putNode(node(name, fresh(script)))
	}
	s.putNode(node("other", fresh(script+"# another\n")))
	data := func(name string) *byte {
		return unsafe.StringData(s.nodes["projects/p/locations/us-central2-b/nodes/"+name].Metadata["startup-script"])
	}
	if data("a") != data("b") || data("a") != data("c") {
		t.Error("three nodes with the same startup script hold separate copies; want one shared")
	}
	if data("other") == data("a") {
		t.Error("a different script shares the common one's copy")
	}
	for _, name := range []string{"a", "b", "c", "other"} {
		n := s.nodes["projects/p/locations/us-central2-b/nodes/"+name]
		want := script
		if name == "other" {
			want += "# another\n"
		}
		if n.Metadata["startup-script"] != want || n.Metadata["small"] != "x" {
			t.Errorf("node %s metadata changed by interning", name)
		}
	}

	// 200 distinct scripts, each replaced by the next on one node: the
	// table holds the live ones (plus at most as many again), not all 200.
	for i := range 200 {
		s.putNode(node("churn", fresh(script+strings.Repeat("#", i+1))))
	}
	if got, limit := len(s.interned), max(2*3, internMinPurge); got > limit {
		t.Errorf("intern table after 200 replaced scripts = %d values; want at most %d", got, limit)
	}
}
