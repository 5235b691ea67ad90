package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/entries/*.want.json from the current output")

const entriesDir = "../../testdata/entries"

// fixtureOpts are the options every fixture is read with: two allowed
// projects and a 16 KiB limit so that oversized.json stays a small file.
var fixtureOpts = Options{AllowedProjects: []string{"acme-ml", "acme-research"}, MaxEntryBytes: 16 << 10}

// goldenItem is how a fixture's result is written to its .want.json.
type goldenItem struct {
	Index  int          `json:"index"`
	Event  *Event       `json:"event,omitempty"`
	Reject *RejectError `json:"reject,omitempty"`
	Error  string       `json:"error,omitempty"`
}

func fixtures(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"*.json", "*.jsonl"} {
		m, err := filepath.Glob(filepath.Join(entriesDir, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, ".want.json") {
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no fixtures in %s", entriesDir)
	}
	return out
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(entriesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readAll(t *testing.T, data []byte, opts Options) []goldenItem {
	t.Helper()
	r := NewReader(bytes.NewReader(data), opts)
	got := []goldenItem{}
	for i := 0; ; i++ {
		if i > len(data)+1 {
			t.Fatalf("reader did not stop after %d items", i)
		}
		it, err := r.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		g := goldenItem{Index: it.Index}
		if it.Err != nil {
			var re *RejectError
			if !errors.As(it.Err, &re) {
				t.Fatalf("item %d: error %v (%T) is not a *RejectError", it.Index, it.Err, it.Err)
			}
			g.Reject, g.Error = re, re.Error()
		} else {
			ev := it.Event
			g.Event = &ev
		}
		got = append(got, g)
	}
}

// TestFixturesGolden reads every file in testdata/entries through the Reader
// and compares the result with the file's .want.json (go test -update
// rewrites them; review the diff). A file holding one object must also give
// the same result through Parse.
func TestFixturesGolden(t *testing.T) {
	for _, f := range fixtures(t) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data := readFixture(t, name)
			got := readAll(t, data, fixtureOpts)
			wantFile := strings.TrimSuffix(strings.TrimSuffix(f, ".json"), ".jsonl") + ".want.json"
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(wantFile, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantBytes, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			var want []goldenItem
			if err := json.Unmarshal(wantBytes, &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("items mismatch (-want +got):\n%s", diff)
			}

			if trimmed := bytes.TrimSpace(data); len(got) == 1 && len(trimmed) > 0 && trimmed[0] == '{' {
				ev, err := Parse(data, fixtureOpts)
				if got[0].Reject != nil {
					var re *RejectError
					if !errors.As(err, &re) {
						t.Fatalf("Parse: got error %v, want %v", err, got[0].Reject)
					}
					if diff := cmp.Diff(got[0].Reject.Code, re.Code); diff != "" {
						t.Errorf("Parse and Reader disagree on the reject code (-reader +parse):\n%s", diff)
					}
					return
				}
				if err != nil {
					t.Fatalf("Parse: %v, but the Reader accepted it", err)
				}
				if diff := cmp.Diff(*got[0].Event, ev); diff != "" {
					t.Errorf("Parse and Reader disagree (-reader +parse):\n%s", diff)
				}
			}
		})
	}
}

// TestParseFixtures states, per fixture, what Parse must make of it. It
// repeats the essentials of the golden files so that a careless -update
// cannot silently bless a regression.
func TestParseFixtures(t *testing.T) {
	const llm = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
	tests := []struct {
		name       string
		file       string
		wantCode   string // "" = accepted
		wantField  string
		wantNode   string
		wantWorker string
		wantMethod string
		wantCause  Cause
	}{
		{"maintenance terminate names the node in resourceName", "terminate-maintenance.json", "", "", llm, "", MethodTerminate, CauseMaintenance},
		{"tpu_worker entry carries the worker from labels", "terminate-worker.json", "", "", llm, "7", MethodTerminate, CausePreemption},
		{"restart without reason is unknown", "restart.json", "", "", "projects/acme-ml/locations/europe-west4-a/nodes/v3-8-exp", "", MethodRestart, CauseUnknown},
		{"node only in labels, location label as zone", "labels-only-node.json", "", "", "projects/acme-research/locations/us-east5-a/nodes/v5p-256-pretrain", "", MethodTerminate, CauseMaintenance},
		{"zones form with a trailing worker", "resource-name-worker.json", "", "", llm, "3", MethodTerminate, CauseMaintenance},
		{"unseen reason is unknown", "unknown-reason.json", "", "", llm, "", MethodTerminate, CauseUnknown},
		{"stopped by the user is user", "user-requested.json", "", "", llm, "", MethodTerminate, CauseUser},
		{"a person as principal is user whatever the reason", "user-principal.json", "", "", llm, "", MethodTerminate, CauseUser},
		{"the customer's service account is user", "customer-service-account.json", "", "", llm, "", MethodTerminate, CauseUser},
		{"a Google service agent is not user", "service-agent-principal.json", "", "", llm, "", MethodTerminate, CauseMaintenance},
		{"preempted", "preemption.json", "", "", llm, "", MethodTerminate, CausePreemption},
		{"hardware failure enum", "hardware.json", "", "", llm, "", MethodTerminate, CauseHardware},
		{"host error text", "host-error.json", "", "", llm, "", MethodTerminate, CauseHardware},
		{"spot", "spot.json", "", "", llm, "", MethodTerminate, CausePreemption},
		{"a non-string reason is classified from its JSON text", "reason-object.json", "", "", llm, "", MethodTerminate, CausePreemption},
		{"no metadata", "no-reason.json", "", "", llm, "", MethodTerminate, CauseUnknown},
		{"missing insertId is synthesized", "missing-insert-id.json", "", "", llm, "", MethodTerminate, CauseMaintenance},
		{"push body", "pubsub-push.json", "", "", llm, "", MethodTerminate, CauseMaintenance},
		{"push body with a worker entry", "pubsub-push-worker.json", "", "", llm, "7", MethodTerminate, CausePreemption},
		{"CloudEvent data", "cloudevent-data.json", "", "", llm, "", MethodTerminate, CauseMaintenance},

		{"foreign service", "foreign-service.json", CodeForeignService, "protoPayload.serviceName", "", "", "", ""},
		{"foreign method", "foreign-method.json", CodeForeignMethod, "protoPayload.methodName", "", "", "", ""},
		{"foreign method inside a push body", "pubsub-push-foreign-method.json", CodeForeignMethod, "protoPayload.methodName", "", "", "", ""},
		{"malformed JSON", "malformed.json", CodeMalformedJSON, "", "", "", "", ""},
		{"a JSON string is not an entry", "not-object.json", CodeNotObject, "", "", "", "", ""},
		{"no node anywhere", "missing-node.json", CodeMissingNode, "protoPayload.resourceName", "", "", "", ""},
		{"path traversal in the node id", "invalid-node.json", CodeInvalidNode, "protoPayload.resourceName", "", "", "", ""},
		{"a queued resource is not a node", "queued-resource-name.json", CodeInvalidNode, "protoPayload.resourceName", "", "", "", ""},
		{"resourceName and labels name different nodes", "node-mismatch.json", CodeNodeMismatch, "protoPayload.resourceName", "", "", "", ""},
		{"resourceName and labels name different projects", "project-mismatch.json", CodeNodeMismatch, "protoPayload.resourceName", "", "", "", ""},
		{"resourceName and labels name different workers", "worker-mismatch.json", CodeNodeMismatch, "protoPayload.resourceName", "", "", "", ""},
		{"project outside the allow-list", "project-not-allowed.json", CodeProjectNotAllowed, "protoPayload.resourceName", "", "", "", ""},
		{"unparseable timestamp", "bad-timestamp.json", CodeBadTimestamp, "timestamp", "", "", "", ""},
		{"a number where methodName should be", "wrong-type.json", CodeWrongType, "protoPayload.methodName", "", "", "", ""},
		{"entry over the limit", "oversized.json", CodeTooLarge, "", "", "", "", ""},
		{"bad base64 in a push body", "pubsub-push-bad-base64.json", CodeBadBase64, "message.data", "", "", "", ""},
		{"push body without data", "pubsub-push-no-data.json", CodeEmptyMessage, "message.data", "", "", "", ""},
		{"push body carrying non-JSON", "pubsub-push-not-json.json", CodeMalformedJSON, "message.data", "", "", "", ""},
		{"the sweep message is not an entry", "pubsub-push-sweep.json", CodeForeignService, "protoPayload.serviceName", "", "", "", ""},
		{"an entry without logName", "missing-log-name.json", CodeMissingLogName, "logName", "", "", "", ""},
		{"a log named like the audit log", "foreign-log.json", CodeForeignLog, "logName", "", "", "", ""},
		{"the audit log of another project", "log-of-another-project.json", CodeForeignLog, "logName", "", "", "", ""},
		{"a terminate in the admin-activity log", "terminate-in-activity-log.json", CodeForeignLog, "logName", "", "", "", ""},
		{"a node delete in the system-event log", "admin-in-system-event-log.json", CodeForeignLog, "logName", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Parse(readFixture(t, tt.file), fixtureOpts)
			if tt.wantCode != "" {
				var re *RejectError
				if !errors.As(err, &re) {
					t.Fatalf("Parse: got error %v, want a *RejectError %s", err, tt.wantCode)
				}
				if diff := cmp.Diff(RejectError{Code: tt.wantCode, Field: tt.wantField}, RejectError{Code: re.Code, Field: re.Field}); diff != "" {
					t.Errorf("reject mismatch (-want +got):\n%s\n(%v)", diff, re)
				}
				if re.Reason == "" {
					t.Errorf("reject %s has no reason", re.Code)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := struct {
				Node, Worker, Method, Service string
				Cause                         Cause
			}{ev.Node.Name(), ev.Worker, ev.Method, ev.Service, ev.Cause}
			want := struct {
				Node, Worker, Method, Service string
				Cause                         Cause
			}{tt.wantNode, tt.wantWorker, tt.wantMethod, ServiceTPU, tt.wantCause}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event mismatch (-want +got):\n%s", diff)
			}
			if ev.InsertID == "" {
				t.Error("InsertID is empty")
			}
		})
	}
}

func TestParseExtractsEveryField(t *testing.T) {
	got, err := Parse(readFixture(t, "terminate-worker.json"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Event{
		InsertID:        "-r3wz8ke1b2c",
		Time:            time.Date(2026, 11, 20, 5, 1, 2, 500_000_000, time.UTC),
		ReceiveTime:     time.Date(2026, 11, 20, 5, 1, 3, 100_000_000, time.UTC),
		LogName:         "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event",
		Service:         ServiceTPU,
		Method:          MethodTerminate,
		ResourceType:    "tpu_worker",
		ResourceLabels:  map[string]string{"project_id": "acme-ml", "zone": "us-central2-b", "node_id": "llm-v4-128", "worker_id": "7"},
		Principal:       "system@google.com",
		Node:            NodeRef{Project: "acme-ml", Zone: "us-central2-b", Node: "llm-v4-128"},
		Worker:          "7",
		TerminateReason: "PREEMPTED",
		Cause:           CausePreemption,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
}

func TestParseEnvelopeGivesTheSameEventAsTheEntry(t *testing.T) {
	want, err := Parse(readFixture(t, "terminate-maintenance.json"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pubsub-push.json", "cloudevent-data.json"} {
		got, err := Parse(readFixture(t, f), Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: mismatch (-entry +envelope):\n%s", f, diff)
		}
	}
}

func TestRejectErrorReadsLikeASentence(t *testing.T) {
	entry := strings.Replace(string(readFixture(t, "terminate-maintenance.json")), `"tpu.nodes.terminate"`, `"compute.instances.stop"`, 1)
	_, err := Parse([]byte(entry), Options{})
	want := `protoPayload.methodName: "compute.instances.stop" is not tpu.nodes.terminate or tpu.nodes.restart`
	if err == nil || err.Error() != want {
		t.Errorf("Parse error = %v, want %s", err, want)
	}
}

func TestParseSizeLimits(t *testing.T) {
	entry := readFixture(t, "terminate-maintenance.json")
	small := Options{MaxEntryBytes: len(entry)}
	if _, err := Parse(entry, small); err != nil {
		t.Fatalf("an entry exactly at the limit: %v", err)
	}
	tooSmall := Options{MaxEntryBytes: len(entry) - 1}
	wrapped := pushBody(entry)
	tests := []struct {
		name      string
		data      []byte
		opts      Options
		wantField string
	}{
		{"entry one byte over the limit", entry, tooSmall, ""},
		{"envelope payload over the limit", wrapped, tooSmall, "message.data"},
		{"raw input over twice the limit", bytes.Repeat([]byte(" "), 2*len(entry)+1), small, ""},
		{"default limit is 256 KiB", append(bytes.Repeat([]byte(" "), 256<<10), entry...), Options{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data, tt.opts)
			var re *RejectError
			if !errors.As(err, &re) || re.Code != CodeTooLarge || re.Field != tt.wantField {
				t.Errorf("Parse error = %#v, want too-large on %q", err, tt.wantField)
			}
		})
	}
	if _, err := Parse(wrapped, small); err != nil {
		t.Errorf("an envelope whose payload is at the limit: %v", err)
	}
}

func pushBody(payload []byte) []byte {
	b, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(payload), "messageId": "42", "attributes": map[string]string{"k": "v"}},
		"subscription": "projects/acme-ml/subscriptions/s",
	})
	return b
}

func TestUnwrap(t *testing.T) {
	entry := readFixture(t, "terminate-maintenance.json")
	tests := []struct {
		name      string
		data      []byte
		want      []byte
		wantAttrs map[string]string
		wantCode  string
	}{
		{"a bare entry is returned unchanged", entry, entry, nil, ""},
		{"a push body is decoded", pushBody(entry), entry, map[string]string{"k": "v"}, ""},
		{"unpadded base64 is accepted", []byte(`{"message":{"data":"eyJhIjoxfQ"}}`), []byte(`{"a":1}`), nil, ""},
		{"the sweep message passes through", []byte(SweepMessage), []byte(SweepMessage), nil, ""},
		{"invalid JSON passes through for Parse to reject", []byte(`{"message":`), []byte(`{"message":`), nil, ""},
		{"bad base64", []byte(`{"message":{"data":"***"}}`), nil, nil, CodeBadBase64},
		{"data that is not a string", []byte(`{"message":{"data":{"a":1}}}`), nil, nil, CodeBadEnvelope},
		{"no data", []byte(`{"message":{"attributes":{"a":"b"}}}`), nil, map[string]string{"a": "b"}, CodeEmptyMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, attrs, err := Unwrap(tt.data)
			var re *RejectError
			if tt.wantCode != "" {
				if !errors.As(err, &re) || re.Code != tt.wantCode {
					t.Fatalf("Unwrap error = %v, want %s", err, tt.wantCode)
				}
			} else if err != nil {
				t.Fatalf("Unwrap: %v", err)
			}
			if diff := cmp.Diff(string(tt.want), string(got)); diff != "" {
				t.Errorf("payload mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAttrs, attrs); diff != "" {
				t.Errorf("attrs mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsSweep(t *testing.T) {
	tests := []struct {
		payload string
		want    bool
	}{
		{SweepMessage, true},
		{"  {\n  \"autoheal\" : \"sweep\"\n}\n", true},
		{`{"zones":["us-central2-b"],"autoheal":"sweep"}`, true},
		{`{"autoheal":"SWEEP"}`, false},
		{`{"Autoheal":"sweep"}`, false},
		{`{"autoheal":"sweep"`, false},
		{`{"autoheal":true}`, false},
		{`["autoheal","sweep"]`, false},
		{`"sweep"`, false},
		{``, false},
		{string(readFixture(t, "terminate-maintenance.json")), false},
	}
	for _, tt := range tests {
		if got := IsSweep([]byte(tt.payload)); got != tt.want {
			t.Errorf("IsSweep(%q) = %v, want %v", tt.payload, got, tt.want)
		}
	}
	payload, _, err := Unwrap(readFixture(t, "pubsub-push-sweep.json"))
	if err != nil || !IsSweep(payload) {
		t.Errorf("a push body carrying the sweep message: IsSweep = false (err %v)", err)
	}
}

func TestSyntheticInsertIDIgnoresFormatting(t *testing.T) {
	pretty := readFixture(t, "missing-insert-id.json")
	var v any
	if err := json.Unmarshal(pretty, &v); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(v)
	a, err := Parse(pretty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(compact, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.InsertID, SyntheticInsertIDPrefix) || a.InsertID != b.InsertID {
		t.Errorf("synthesized ids %q and %q, want equal and prefixed %q", a.InsertID, b.InsertID, SyntheticInsertIDPrefix)
	}
	other, err := Parse(bytes.Replace(pretty, []byte("llm-v4-128"), []byte("llm-v4-256"), 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if other.InsertID == a.InsertID {
		t.Errorf("entries about different nodes got the same synthesized id %q", a.InsertID)
	}
}

func TestParseNodeSources(t *testing.T) {
	const base = `{"insertId":"i","protoPayload":{"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":%s},"resource":{"type":"t","labels":%s}}`
	tests := []struct {
		name, resourceName, labels string
		wantNode, wantWorker       string
		wantCode                   string
	}{
		{"full resource name with service prefix", `"//tpu.googleapis.com/projects/p/locations/z/nodes/n"`, `{}`, "projects/p/locations/z/nodes/n", "", ""},
		{"labels agree with the name", `"projects/p/locations/z/nodes/n"`, `{"project_id":"p","zone":"z","node_id":"n","worker_id":"1"}`, "projects/p/locations/z/nodes/n", "1", ""},
		{"zone and location labels disagree", `""`, `{"project_id":"p","zone":"z","location":"y","node_id":"n"}`, "", "", CodeNodeMismatch},
		{"zone label disagrees with the name", `"projects/p/locations/z/nodes/n"`, `{"zone":"other"}`, "", "", CodeNodeMismatch},
		{"labels without node_id", `""`, `{"project_id":"p","zone":"z"}`, "", "", CodeMissingNode},
		{"too few segments", `"projects/p/locations/z"`, `{}`, "", "", CodeInvalidNode},
		{"empty segment", `"projects/p/locations//nodes/n"`, `{}`, "", "", CodeInvalidNode},
		{"query characters in the node id", `"projects/p/locations/z/nodes/n?x=1"`, `{}`, "", "", CodeInvalidNode},
		{"bad label value", `""`, `{"project_id":"p","zone":"z","node_id":"a b"}`, "", "", CodeInvalidNode},
		{"legacy domain project id", `"projects/example.com:p/locations/z/nodes/n"`, `{}`, "projects/example.com:p/locations/z/nodes/n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(strings.Replace(strings.Replace(base, "%s", tt.resourceName, 1), "%s", tt.labels, 1))
			ev, err := Parse(data, Options{AcceptMissingLogName: true}) // hand-written: no logName
			if tt.wantCode != "" {
				var re *RejectError
				if !errors.As(err, &re) || re.Code != tt.wantCode {
					t.Fatalf("Parse error = %v, want %s", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Node.Name() != tt.wantNode || ev.Worker != tt.wantWorker {
				t.Errorf("got node %q worker %q, want %q %q", ev.Node.Name(), ev.Worker, tt.wantNode, tt.wantWorker)
			}
		})
	}
}

func TestPeekFindsTheInsertIDBareOrWrapped(t *testing.T) {
	tests := []struct {
		file, want string
	}{
		{"foreign-method.json", "fx00000115"},
		{"pubsub-push-foreign-method.json", "fx00000127"},
		{"pubsub-push.json", "1x7kq2ed4a9f"},
		{"malformed.json", ""},
		{"not-object.json", ""},
		{"pubsub-push-bad-base64.json", ""},
	}
	for _, tt := range tests {
		if got := Peek(readFixture(t, tt.file)).InsertID; got != tt.want {
			t.Errorf("Peek(%s).InsertID = %q, want %q", tt.file, got, tt.want)
		}
	}
}

func TestPeekReadsWhatARejectedEntryNames(t *testing.T) {
	foreign := `{"insertId":"c1","timestamp":"2026-11-20T03:50:00.5Z","protoPayload":{"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.create","resourceName":"projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"}}`
	tests := []struct {
		name string
		in   string
		want Event
	}{
		{name: "foreign method names its node, method and time", in: foreign, want: Event{
			InsertID: "c1", Time: time.Date(2026, 11, 20, 3, 50, 0, 500000000, time.UTC), Service: ServiceTPU, Method: "tpu.nodes.create",
			Node: NodeRef{Project: "acme-ml", Zone: "us-central2-b", Node: "llm-v4-128"}}},
		{name: "wrapped in a push body", in: `{"message":{"data":"` + base64.StdEncoding.EncodeToString([]byte(foreign)) + `"}}`, want: Event{
			InsertID: "c1", Time: time.Date(2026, 11, 20, 3, 50, 0, 500000000, time.UTC), Service: ServiceTPU, Method: "tpu.nodes.create",
			Node: NodeRef{Project: "acme-ml", Zone: "us-central2-b", Node: "llm-v4-128"}}},
		{name: "contradicting node sources name no node", in: `{"insertId":"m1","protoPayload":{"resourceName":"projects/a/locations/z/nodes/n"},"resource":{"labels":{"project_id":"b"}}}`,
			want: Event{InsertID: "m1"}},
		{name: "not JSON gives nothing", in: `not json`, want: Event{}},
		{name: "bad base64 gives nothing", in: `{"message":{"data":1}}`, want: Event{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Peek([]byte(tt.in))); diff != "" {
				t.Errorf("Peek (-want +got):\n%s", diff)
			}
		})
	}
}
