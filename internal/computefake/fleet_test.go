package computefake_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestReadFleetForms(t *testing.T) {
	describe := readFile(t, "testdata/describe-web-1.json")
	tests := []struct {
		name          string
		input         []byte
		wantInstances int
		wantMIGs      int
	}{
		{"object with instances and MIGs", readFile(t, fleetFile), 14, 2},
		{"array of instances", []byte("[" + string(describe) + "," + string(describe[:len(describe)-1]) + "]"), 2, 0},
		{"one describe output", describe, 1, 0},
		{"describe outputs one after another", append(append([]byte{}, describe...), describe...), 2, 0},
		{"combined with the TPU fleet", readFile(t, "testdata/fleet-combined.json"), 1, 0},
		{"TPU fleet only", []byte(`{"nodes": [], "queuedResources": []}`), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := computefake.ReadFleet(bytes.NewReader(tt.input))
			if tt.name == "array of instances" || tt.name == "describe outputs one after another" {
				// The same instance twice is refused: see the error table.
				if err == nil || !strings.Contains(err.Error(), "duplicate") {
					t.Fatalf("duplicate instances: err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Instances) != tt.wantInstances || len(f.InstanceGroupManagers) != tt.wantMIGs {
				t.Errorf("read %d instances, %d MIGs", len(f.Instances), len(f.InstanceGroupManagers))
			}
		})
	}
}

func TestReadFleetErrorsNameTheField(t *testing.T) {
	inst := func(fields string) string {
		return `{"instances": [{"name": "a", "zone": "https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-c", "machineType": "zones/us-central1-c/machineTypes/tpu7x-standard-4t"` + fields + `}]}`
	}
	tests := []struct{ name, input, want string }{
		{"empty", ``, "empty input"},
		{"not JSON", `nope`, "want a JSON array or object"},
		{"unknown top-level field", `{"instances": [], "vms": []}`, `unknown top-level field "vms"`},
		{"no name", `{"instances": [{"zone": "x"}]}`, "instances[0].name: missing"},
		{"no zone", `[{"name": "a", "machineType": "tpu7x-standard-4t"}]`, "instances[0].zone: missing"},
		{"bad zone", `[{"name": "a", "zone": "us-central1-c"}]`, "instances[0].zone:"},
		{"bad project", `[{"name": "a", "zone": "projects/p1/zones/us-central1-c"}]`, `instances[0].zone: "projects/p1/zones/us-central1-c": "p1" is not a project id`},
		{"TPU node in instances", `[{"name": "projects/p/locations/z/nodes/n"}]`, "TPU node"},
		{"machine type in another zone", inst(`, "x": 1`)[:0] + `[{"name": "a", "zone": "projects/acme-ml/zones/us-central1-c", "machineType": "zones/us-east5-a/machineTypes/tpu7x-standard-4t"}]`, "instances[0].machineType"},
		{"selfLink disagrees", inst(`, "selfLink": "https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-c/instances/b"`), "instances[0].selfLink"},
		{"wrong type", inst(`, "labels": ["a"]`), "instances[0].labels: cannot use JSON array"},
		{"syntax error", "{\n\"instances\": [\n{,}]}", "line 3"},
		{"created-by names no MIG", inst(`, "metadata": {"items": [{"key": "created-by", "value": "projects/1/zones/us-central1-c/instanceGroupManagers/m"}]}`), "instances[0].metadata.created-by"},
		{"bad termination action", inst(`, "scheduling": {"instanceTerminationAction": "HIBERNATE"}`), "instances[0].scheduling.instanceTerminationAction"},
		{"bad guest attribute", inst(`, "guestAttributes": [{"namespace": "a/b", "key": "k"}]`), "instances[0].guestAttributes[0]"},
		{"regional MIG", `{"instances": [], "instanceGroupManagers": [{"name": "m", "region": "r"}]}`, "instanceGroupManagers[0].region"},
		{"target size", `{"instances": [], "instanceGroupManagers": [{"name": "m", "zone": "projects/acme-ml/zones/z-a", "targetSize": 2}]}`, "instanceGroupManagers[0].targetSize: 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := computefake.ReadFleet(strings.NewReader(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestFleetWriteReadsBackAsTheSameFleet(t *testing.T) {
	f := start(t, fleetFile)
	if err := f.SetGuestAttribute(name("slice-mig-w0"), "autoheal", "checkpoint", "step=7"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Preempt(name("spot-delete")); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Minute)
	out := f.Fleet()
	var buf bytes.Buffer
	if err := out.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := computefake.ReadFleet(&buf)
	if err != nil {
		t.Fatalf("reading the written fleet: %v\n%s", err, buf.String())
	}
	ignore := cmp.Options{
		cmpopts.IgnoreFields(compute.Instance{}, "ServerResponse"),
		cmpopts.IgnoreFields(compute.InstanceGroupManager{}, "ServerResponse"),
		cmpopts.IgnoreFields(compute.InstanceGroupManagerStatus{}, "ForceSendFields"),
	}
	if diff := cmp.Diff(out, back, ignore); diff != "" {
		t.Errorf("written and read back (-written +read):\n%s", diff)
	}
	if len(back.Instances) != 13 || len(back.GuestAttributes[name("slice-mig-w0")]) != 1 {
		t.Errorf("read back %d instances, guest attributes %v", len(back.Instances), back.GuestAttributes)
	}
	// A fleet without MIGs is written as an array.
	buf.Reset()
	if err := (computefake.Fleet{Instances: out.Instances[:1]}).Write(&buf); err != nil || buf.Bytes()[0] != '[' {
		t.Errorf("fleet without MIGs written as %q…, %v", buf.String()[:10], err)
	}
	// A new server seeded with it serves the same state.
	g := computefake.New(back)
	defer g.Close()
	in, ok := g.Instance(name("spot-stop"))
	if !ok || in.Status != "RUNNING" {
		t.Errorf("reseeded spot-stop = %v", in)
	}
}

func TestNewPanicsOnAnInvalidFleet(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "instances[0]") {
			t.Errorf("recover = %v", r)
		}
	}()
	computefake.New(computefake.Fleet{Instances: []*compute.Instance{{Name: "a"}}})
}
