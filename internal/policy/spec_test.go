package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"
	tpualpha "google.golang.org/api/tpu/v2alpha1"

	"github.com/tpu-autoheal/autoheal/startup"
)

// specCase is one file of testdata/spec: a node as `gcloud compute tpus
// tpu-vm describe --format=json` prints it, the policy, and the create body
// recreate must send, written out by hand (never derived through CleanSpec).
type specCase struct {
	About  string `json:"about"`
	Config struct {
		StartupScript string   `json:"startupScript"`
		ResumeScript  string   `json:"resumeScript"`
		ResumeKeys    []string `json:"resumeKeys"`
	} `json:"config"`
	Generation int             `json:"generation"`
	Node       json.RawMessage `json:"node"`
	Create     json.RawMessage `json:"create"`
	Warnings   []string        `json:"warnings"`
}

func TestCreateBodyMatchesLiteralExpectations(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "spec", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no spec cases in testdata/spec (err %v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var c specCase
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var node tpu.Node
			if err := json.Unmarshal(c.Node, &node); err != nil {
				t.Fatalf("%s: node: %v", file, err)
			}
			cfg := DefaultConfig()
			cfg.StartupScript, cfg.ResumeScript, cfg.ResumeKeys = c.Config.StartupScript, c.Config.ResumeScript, c.Config.ResumeKeys

			body, warnings := CreateSpec(CleanSpec(&node), c.Generation, cfg)

			gotJSON, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(gotJSON, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(c.Create, &want); err != nil {
				t.Fatalf("%s: create: %v", file, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\ncreate body (-want +got):\n%s", c.About, diff)
			}
			if diff := cmp.Diff(c.Warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// Fates of a tpu.Node field in recreate.
const (
	carried   = "carried: a person chose it"
	cleared   = "output only: observed state, not sent on create"
	routed    = "output only, but kept: it routes the create to the API that made the node (v1 or v2); the API ignores it"
	nameField = "goes in the create call's parent and nodeId, not in the body"
	plumbing  = "client plumbing, not a field of the resource"
)

// nodeFields lists every field of the v2 tpu.Node and what recreate does
// with it. A field the client library gains fails
// TestEveryNodeFieldIsCarriedOrListed until it is added here, so a new API
// field cannot silently disappear from recreated nodes.
var nodeFields = map[string]string{
	"AcceleratorConfig":      carried,
	"AcceleratorType":        carried,
	"ApiVersion":             routed,
	"BootDiskConfig":         carried,
	"CidrBlock":              carried,
	"CreateTime":             cleared,
	"DataDisks":              carried,
	"Description":            carried,
	"Health":                 cleared, // not marked output only in the docs, but it is what the node is, not a choice
	"HealthDescription":      cleared,
	"Id":                     cleared,
	"Labels":                 carried, // plus the generation label
	"Metadata":               carried, // except startup-script (the policy) and autoheal-maintenance
	"MultisliceNode":         cleared,
	"Name":                   nameField,
	"NetworkConfig":          carried,
	"NetworkConfigs":         carried,
	"NetworkEndpoints":       cleared,
	"ProtectionTier":         cleared,
	"QueuedResource":         cleared,
	"RuntimeVersion":         carried,
	"SchedulingConfig":       carried,
	"ServiceAccount":         carried,
	"ShieldedInstanceConfig": carried,
	"State":                  cleared,
	"Symptoms":               cleared,
	"Tags":                   carried,
	"UpcomingMaintenance":    cleared,
	"ForceSendFields":        plumbing,
	"NullFields":             plumbing,
	"ServerResponse":         plumbing,
}

// notInV2 lists the fields of the v2alpha1 Node, nested ones included, that
// v2 lacks. Recreate speaks v2 (the client decodes a node into the v2 type),
// so it cannot carry them: a node that relies on one comes back without it.
var notInV2 = map[string]string{
	"AutocheckpointEnabled":                    "not in v2, cannot be carried: a recreated node comes back without autocheckpoint",
	"BootDiskConfig.DiskSizeGb":                "not in v2, cannot be carried: the boot disk comes back at the default size",
	"BootDiskConfig.EnableConfidentialCompute": "not in v2, cannot be carried: the boot disk comes back without confidential compute",
	"BootDiskConfig.ProvisionedIops":           "not in v2, cannot be carried",
	"BootDiskConfig.ProvisionedThroughput":     "not in v2, cannot be carried",
	"BootDiskConfig.SourceImage":               "not in v2, cannot be carried: the runtime version's image is used",
	"BootDiskConfig.StoragePool":               "not in v2, cannot be carried",
	"DataDisks.WorkerIds":                      "not in v2, cannot be carried: each data disk comes back on every worker",
	"SchedulingConfig.ProvisioningModel":       "not in v2, cannot be carried (v2 has spot, preemptible, reserved)",
	"SchedulingConfig.ReservationName":         "not in v2, cannot be carried: a node on a named reservation comes back on any matching one",
	"SchedulingConfig.TerminationTimestamp":    "not in v2, cannot be carried",
}

// alphaOnly returns the paths (Field.Sub) of the fields of alpha, nested
// ones included, that v2 lacks.
func alphaOnly(alpha, v2 reflect.Type, path string) []string {
	for alpha.Kind() == reflect.Ptr || alpha.Kind() == reflect.Slice {
		alpha = alpha.Elem()
	}
	for v2.Kind() == reflect.Ptr || v2.Kind() == reflect.Slice {
		v2 = v2.Elem()
	}
	if alpha.Kind() != reflect.Struct || v2.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < alpha.NumField(); i++ {
		f := alpha.Field(i)
		name := f.Name
		if path != "" {
			name = path + "." + f.Name
		}
		g, ok := v2.FieldByName(f.Name)
		if !ok {
			out = append(out, name)
			continue
		}
		out = append(out, alphaOnly(f.Type, g.Type, name)...)
	}
	return out
}

// setPath fills the field at path (Field.Sub) of v, allocating what leads
// to it, and returns its JSON name.
func setPath(v reflect.Value, path []string) string {
	for {
		switch v.Kind() {
		case reflect.Ptr:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
			continue
		case reflect.Slice:
			if v.Len() == 0 {
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			}
			v = v.Index(0)
			continue
		}
		f, _ := v.Type().FieldByName(path[0])
		fv := v.FieldByName(path[0])
		if len(path) == 1 {
			fill(fv, path[0])
			return strings.Split(f.Tag.Get("json"), ",")[0]
		}
		v, path = fv, path[1:]
	}
}

// fill sets every field reachable from v to a non-zero value derived from
// path, so that a dropped field, however deep, shows as a difference.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("v-" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(7 + len(path)))
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Ptr:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Name == "ForceSendFields" || f.Name == "NullFields" {
				continue
			}
			fill(v.Field(i), path+"."+f.Name)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), path+"[0]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, "key-"+path)
		fill(e, path)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		panic(fmt.Sprintf("fill %s: kind %s not handled", path, v.Kind()))
	}
}

// TestEveryNodeFieldIsCarriedOrListed walks every field of the v2 tpu.Node by
// reflection: each must be listed in nodeFields, and recreate (CleanSpec,
// then createSpec) must carry every writable one whole, alone and with every
// other field set, and clear the output-only ones.
func TestEveryNodeFieldIsCarriedOrListed(t *testing.T) {
	typ := reflect.TypeOf(tpu.Node{})
	for i := 0; i < typ.NumField(); i++ {
		if _, ok := nodeFields[typ.Field(i).Name]; !ok {
			t.Errorf("tpu.Node field %s is not in nodeFields: decide whether recreate carries it (and make it so) or why it is dropped", typ.Field(i).Name)
		}
	}
	for name := range nodeFields {
		if _, ok := typ.FieldByName(name); !ok {
			t.Errorf("nodeFields lists %s, which tpu.Node no longer has", name)
		}
	}

	var all tpu.Node
	fill(reflect.ValueOf(&all).Elem(), "node")
	all.ApiVersion = "V2" // V1 would make it a legacy node, with no metadata
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		fate := nodeFields[f.Name]
		if fate == plumbing || fate == "" {
			continue
		}
		var alone tpu.Node
		reflect.ValueOf(&alone).Elem().Field(i).Set(reflect.ValueOf(all).Field(i))
		for _, in := range []*tpu.Node{&alone, &all} {
			which := "alone"
			if in == &all {
				which = "with every field set"
			}
			body, _ := CreateSpec(CleanSpec(in), 2, Config{})
			want := reflect.ValueOf(*in).Field(i)
			got := reflect.ValueOf(*body).Field(i)
			switch fate {
			case carried, routed:
				if f.Type.Kind() == reflect.Map {
					// Labels gain the generation label, metadata a startup
					// script: every key of the node must be there as it was.
					for _, k := range want.MapKeys() {
						if g := got.MapIndex(k); !g.IsValid() || g.Interface() != want.MapIndex(k).Interface() {
							t.Errorf("%s (%s): key %v not carried: got %v, want %v", f.Name, which, k, g, want.MapIndex(k))
						}
					}
					continue
				}
				if diff := cmp.Diff(want.Interface(), got.Interface()); diff != "" {
					t.Errorf("%s (%s) is writable but recreate does not carry it (-node +create body):\n%s", f.Name, which, diff)
				}
			default:
				if !got.IsZero() {
					t.Errorf("%s (%s) is %q but is in the create body: %v", f.Name, which, fate, got.Interface())
				}
			}
		}
	}
}

// TestV2Alpha1FieldsMissingFromV2AreListed walks the v2alpha1 Node, nested
// fields included: every field v2 also has is covered by the v2 walk; every
// field v2 lacks must be in notInV2, and is shown to be lost when such a
// node is read through v2 and recreated.
func TestV2Alpha1FieldsMissingFromV2AreListed(t *testing.T) {
	only := alphaOnly(reflect.TypeOf(tpualpha.Node{}), reflect.TypeOf(tpu.Node{}), "")
	seen := map[string]bool{}
	for _, path := range only {
		seen[path] = true
		why, ok := notInV2[path]
		if !ok {
			t.Errorf("v2alpha1 Node field %s is not in v2: list it in notInV2 (recreate cannot carry it)", path)
			continue
		}
		var n tpualpha.Node
		n.Name = "projects/p/locations/z/nodes/n"
		tag := setPath(reflect.ValueOf(&n).Elem(), strings.Split(path, "."))
		b, err := json.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"`+tag+`"`) {
			t.Fatalf("%s: test did not set it: %s", path, b)
		}
		var asV2 tpu.Node
		if err := json.Unmarshal(b, &asV2); err != nil {
			t.Fatal(err)
		}
		body, _ := CreateSpec(CleanSpec(&asV2), 1, Config{})
		out, _ := json.Marshal(body)
		if strings.Contains(string(out), `"`+tag+`"`) {
			t.Errorf("%s is listed as %q, but the create body carries it: %s", path, why, out)
		}
	}
	for path := range notInV2 {
		if !seen[path] {
			t.Errorf("notInV2 lists %s, which is no longer a v2alpha1-only field: if v2 has it now, carry it", path)
		}
	}
}

func TestPolicyKeysAreTheStartupPackagesKeys(t *testing.T) {
	if ResumeOptInKey != startup.MetadataTrainCmd {
		t.Errorf("ResumeOptInKey = %q, startup.MetadataTrainCmd = %q", ResumeOptInKey, startup.MetadataTrainCmd)
	}
	if StartupScriptKey != startup.MetadataStartupScript {
		t.Errorf("StartupScriptKey = %q, startup.MetadataStartupScript = %q", StartupScriptKey, startup.MetadataStartupScript)
	}
}

func TestStartupScriptFor(t *testing.T) {
	const resume, own, site = "#resume", "#own", "#site"
	withResume := Config{ResumeScript: resume, ResumeKeys: []string{ResumeOptInKey, "autoheal-checkpoint-dir"}}
	tests := []struct {
		name         string
		md           map[string]string
		cfg          Config
		want         string
		wantWarnings int
	}{
		{"own script kept when nothing is configured and the node did not opt in", map[string]string{StartupScriptKey: own}, withResume, own, 0},
		{"opted-in node with all keys gets the resume script silently", map[string]string{ResumeOptInKey: "python t.py", "autoheal-checkpoint-dir": "gs://b/c"}, withResume, resume, 0},
		{"opted-in node missing a needed key is warned", map[string]string{ResumeOptInKey: "python t.py"}, withResume, resume, 1},
		{"opted-in node's own script replaced and a key missing: two warnings", map[string]string{ResumeOptInKey: "python t.py", StartupScriptKey: own}, withResume, resume, 2},
		{"opted in but no resume script handed in keeps its own", map[string]string{ResumeOptInKey: "python t.py", StartupScriptKey: own}, Config{}, own, 0},
		{"opted in, no resume script handed in, no own script: warned", map[string]string{ResumeOptInKey: "python t.py"}, Config{}, "", 1},
		{"configured script replaces the node's own with a warning", map[string]string{StartupScriptKey: own}, Config{StartupScript: site, ResumeScript: resume}, site, 1},
		{"configured script on a node with no script: no warning", nil, Config{StartupScript: site}, site, 0},
		{"configured resume script is checked for its keys", map[string]string{}, Config{StartupScript: resume, ResumeScript: resume, ResumeKeys: []string{ResumeOptInKey}}, resume, 1},
		{"nothing at all: warned", nil, withResume, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings := StartupScriptFor(tt.md, tt.cfg)
			if got != tt.want {
				t.Errorf("script = %q, want %q", got, tt.want)
			}
			if len(warnings) != tt.wantWarnings {
				t.Errorf("warnings = %q, want %d", warnings, tt.wantWarnings)
			}
			for _, w := range warnings {
				for _, v := range tt.md {
					if strings.TrimSpace(v) != "" && strings.Contains(w, v) {
						t.Errorf("warning %q shows a metadata value %q", w, v)
					}
				}
			}
		})
	}
}

func TestLegacyNodeIsRecreatedWithoutScriptAndWarned(t *testing.T) {
	n := &tpu.Node{Name: "projects/p/locations/z/nodes/n", ApiVersion: "V1", AcceleratorType: "v2-8", Metadata: map[string]string{NoticeMetadataKey: "{}"}}
	body, warnings := CreateSpec(CleanSpec(n), 1, Config{StartupScript: "#site"})
	if _, ok := body.Metadata[StartupScriptKey]; ok {
		t.Errorf("legacy node got a startup script: %v", body.Metadata)
	}
	if _, ok := body.Metadata[NoticeMetadataKey]; ok {
		t.Errorf("legacy node carries %s", NoticeMetadataKey)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "legacy TPU Node") {
		t.Errorf("warnings = %q, want the legacy warning", warnings)
	}
}
