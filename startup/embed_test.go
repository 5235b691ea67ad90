package startup

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScriptIsTheFileOnDisk(t *testing.T) {
	onDisk, err := os.ReadFile("resume-training.sh")
	if err != nil {
		t.Fatal(err)
	}
	if Script != string(onDisk) {
		t.Errorf("embedded Script (%d bytes) differs from resume-training.sh (%d bytes); rebuild", len(Script), len(onDisk))
	}
}

func TestScriptFitsInOneMetadataValue(t *testing.T) {
	if got := len(Script); got == 0 || got > MaxMetadataValueBytes {
		t.Errorf("len(Script) = %d, want 1..%d (one metadata value)", got, MaxMetadataValueBytes)
	}
}

func TestScriptIsStrictBash(t *testing.T) {
	for _, want := range []string{"#!/usr/bin/env bash\n", "\nset -euo pipefail\n"} {
		if !strings.Contains(Script, want) {
			t.Errorf("Script lacks %q", want)
		}
	}
	if !strings.HasPrefix(Script, "#!") {
		t.Errorf("Script does not start with a shebang: %.40q", Script)
	}
}

// Names drift apart silently otherwise: a key the script does not read, or
// that users cannot find in the README, is a key that does nothing.
func TestEveryNameIsReadByTheScriptAndDocumented(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range append(MetadataKeys(), MetadataWorkerNumber) {
		if !strings.Contains(Script, "md_string "+key+" ") && !strings.Contains(Script, "md_int "+key+" ") &&
			!strings.Contains(Script, "md_get "+key+" ") {
			t.Errorf("Script does not read metadata key %q", key)
		}
		if !strings.Contains(string(readme), "`"+key+"`") {
			t.Errorf("README.md does not document metadata key %q", key)
		}
	}
	for _, env := range []string{EnvResumeFrom, EnvCheckpointDir, EnvWorker, EnvAttempt, EnvNotice, EnvTrainPGID} {
		if !strings.Contains(Script, "export "+env+"=") && !strings.Contains(Script, " "+env+"=\"") &&
			!strings.Contains(Script, "\t"+env+"=\"") {
			t.Errorf("Script does not export %s", env)
		}
		if !strings.Contains(string(readme), "`"+env+"`") {
			t.Errorf("README.md does not document %s", env)
		}
	}
}

func TestMissingKeys(t *testing.T) {
	tests := []struct {
		name     string
		metadata map[string]string
		want     []string
	}{
		{"node without metadata misses the training command", nil, []string{MetadataTrainCmd}},
		{"blank training command counts as missing", map[string]string{MetadataTrainCmd: " \n"}, []string{MetadataTrainCmd}},
		{"training command alone is enough", map[string]string{MetadataTrainCmd: "python3 train.py"}, nil},
		{"other keys do not stand in for the training command",
			map[string]string{MetadataCheckpointDir: "gs://b/c", MetadataStartupScript: "#!/bin/bash"}, []string{MetadataTrainCmd}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MissingKeys(tt.metadata)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("MissingKeys(%v) mismatch (-want +got):\n%s", tt.metadata, diff)
			}
		})
	}
}

// The JSON the script prints by hand and the Go types the function decodes
// must name the same fields; the README must show them.
func TestReportShapesMatchTheScriptAndTheReadme(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		attribute string
		shape     any
	}{
		{GuestAttributeNotice, NoticeReport{}},
		{GuestAttributeCheckpoint, CheckpointReport{}},
		{GuestAttributeResumed, ResumedReport{}},
	} {
		key := strings.TrimPrefix(tt.attribute, GuestAttributeNamespace+"/")
		if !strings.Contains(Script, "guest_put "+key+" ") {
			t.Errorf("Script never writes guest attribute %s", tt.attribute)
		}
		if !strings.Contains(string(readme), "`"+tt.attribute+"`") {
			t.Errorf("README.md does not document guest attribute %s", tt.attribute)
		}
		typ := reflect.TypeOf(tt.shape)
		for i := range typ.NumField() {
			name := typ.Field(i).Tag.Get("json")
			if !strings.Contains(Script, `"`+name+`":`) {
				t.Errorf("%s field %q: Script never writes it", typ.Name(), name)
			}
		}
	}
	for _, key := range []string{MetadataMaintenance} {
		if !strings.Contains(Script, "attributes/"+key) {
			t.Errorf("Script does not watch metadata key %q", key)
		}
		if !strings.Contains(string(readme), "`"+key+"`") {
			t.Errorf("README.md does not document metadata key %q", key)
		}
	}
}

// A notice as the function's prepare writes it decodes into Notice, field
// by field, and nothing in it is left over.
func TestNoticeDecodesTheDocumentedShape(t *testing.T) {
	raw := `{"notice":"2026-12-08T02:00:00Z","sentAt":"2026-12-01T08:00:00Z","status":"PENDING",` +
		`"type":"SCHEDULED","windowStart":"2026-12-08T02:00:00Z","windowEnd":"2026-12-08T06:00:00Z","canReschedule":true}`
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var got Notice
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode notice: %v", err)
	}
	want := Notice{Notice: "2026-12-08T02:00:00Z", SentAt: "2026-12-01T08:00:00Z", Status: "PENDING", Type: "SCHEDULED",
		WindowStart: "2026-12-08T02:00:00Z", WindowEnd: "2026-12-08T06:00:00Z", CanReschedule: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Notice mismatch (-want +got):\n%s", diff)
	}
}
