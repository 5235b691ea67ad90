package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"
)

func TestParseFallback(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Fallback
		err  string
	}{
		{"", Fallback{Mode: FallbackWait}, ""},
		{"wait", Fallback{Mode: FallbackWait}, ""},
		{"zones:us-central2-a,us-central2-c", Fallback{Mode: FallbackZones, Zones: []string{"us-central2-a", "us-central2-c"}}, ""},
		{" zones:us-central2-a, us-central2-a ", Fallback{Mode: FallbackZones, Zones: []string{"us-central2-a"}}, ""},
		{"queue", Fallback{Mode: FallbackQueue, ValidFor: 12 * time.Hour}, ""},
		{"queue:6h", Fallback{Mode: FallbackQueue, ValidFor: 6 * time.Hour}, ""},
		{"wait:1h", Fallback{}, "wait takes no argument"},
		{"zones:", Fallback{}, "is not a zone"},
		{"zones:us-central2", Fallback{}, `"us-central2" is not a zone`},
		{"queue:forever", Fallback{}, "want queue:VALID_FOR"},
		{"queue:-1h", Fallback{}, "want queue:VALID_FOR"},
		{"elsewhere", Fallback{}, "want wait, zones:Z1,Z2 or queue[:VALID_FOR]"},
	} {
		got, err := ParseFallback(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseFallback(%q) = %v, %v; want an error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFallback(%q): %v", tt.in, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseFallback(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestZoneFallbackIsRefusedWithAReason: a zones: fallback is used only for
// a spec that can live in another zone, and only to zones of its region
// that tpu-autoheal watches; each refusal names why.
func TestZoneFallbackIsRefusedWithAReason(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Zones = []string{"us-central2-b", "us-central2-a", "europe-west4-a"}
	const home = "projects/p/locations/us-central2-b/nodes/n"
	spec := func(fallback string, edit func(*tpu.Node)) *tpu.Node {
		n := &tpu.Node{AcceleratorType: "v4-8", Metadata: map[string]string{StockoutMetadataKey: fallback}}
		if edit != nil {
			edit(n)
		}
		return n
	}
	for _, tt := range []struct {
		name string
		spec *tpu.Node
		want string
	}{
		{"no metadata waits", &tpu.Node{}, "wait"},
		{"a zone of the region watched is used", spec("zones:us-central2-a", nil), "zones:us-central2-a: accepted (another zone after 3 stockouts; 1 so far), but creating in another zone is not carried out by this version: waiting in us-central2-b"},
		{"a zone of another region is refused", spec("zones:europe-west4-a", nil),
			"zones: refused: europe-west4-a is in region europe-west4, not the node's region us-central2 (same region only): waiting in us-central2-b"},
		{"a zone not watched is refused", spec("zones:us-central2-c", nil), "zones: refused: us-central2-c is not in AUTOHEAL_ZONES (us-central2-b,us-central2-a,europe-west4-a): waiting in us-central2-b"},
		{"data disks pin it", spec("zones:us-central2-a", func(n *tpu.Node) { n.DataDisks = []*tpu.AttachedDisk{{SourceDisk: "d"}} }),
			"zones: refused: its spec attaches zonal data disks (pinned to us-central2-b): waiting in us-central2-b"},
		{"a reservation pins it", spec("zones:us-central2-a", func(n *tpu.Node) { n.SchedulingConfig = &tpu.SchedulingConfig{Reserved: true} }),
			"zones: refused: its spec creates it under a reservation (pinned to us-central2-b): waiting in us-central2-b"},
		{"a malformed value waits", spec("zones:nowhere", nil), `autoheal-stockout="zones:nowhere": "nowhere" is not a zone such as us-central2-a: waiting in the zone`},
		{"queue is not carried out yet", spec("queue:6h", nil), "queue: not carried out by this version: waiting in us-central2-b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := describeFallback(Recovery{Node: home, Spec: tt.spec, Stockouts: 1}, cfg)
			if got != tt.want {
				t.Errorf("fallback = %q\nwant       %q", got, tt.want)
			}
		})
	}
}
