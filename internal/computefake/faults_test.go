package computefake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

func TestInjectedErrorCodes(t *testing.T) {
	tests := []struct {
		code       int
		wantReason string
		wantInMsg  string
	}{
		{400, "badRequest", "injected"},
		{403, "forbidden", "Required 'compute.instances.stop' permission for 'projects/acme-ml/zones/us-central1-c/instances/trainer-a'"},
		{404, "notFound", "was not found"},
		{409, "alreadyExists", "already exists"},
		{412, "conditionNotMet", "fingerprint"},
		{429, "rateLimitExceeded", "Queries per minute"},
		{500, "backendError", "Internal error"},
		{503, "backendError", "unavailable"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("HTTP ", tt.code), func(t *testing.T) {
			f := start(t, fleetFile)
			f.Fail(computefake.FailRule{Method: "instances.stop", Resource: name("trainer-a"), Code: tt.code, Times: 1})
			_, err := f.svc.Instances.Stop(project, zone, "trainer-a").Do()
			herr := apiErr(t, err, tt.code, tt.wantReason)
			if !strings.Contains(herr.Message, tt.wantInMsg) {
				t.Errorf("message %q, want it to contain %q", herr.Message, tt.wantInMsg)
			}
			if got := f.status(t, "trainer-a"); got != "RUNNING" {
				t.Errorf("after a failed stop without effect: %s", got)
			}
			if _, err := f.svc.Instances.Stop(project, zone, "trainer-a").Do(); err != nil {
				t.Errorf("second stop (rule used up): %v", err)
			}
		})
	}
}

func TestNthAndTimesPickTheCalls(t *testing.T) {
	f := start(t, fleetFile)
	f.Fail(computefake.FailRule{Method: "instances.get", Resource: name("trainer-a"), Nth: 2, Times: 2, Code: 503})
	var got []bool
	for range 5 {
		_, err := f.svc.Instances.Get(project, zone, "trainer-a").Do()
		got = append(got, err != nil)
	}
	if want := []bool{false, true, true, false, false}; !cmp.Equal(want, got) {
		t.Errorf("failed calls = %v, want %v", got, want)
	}
	// Other resources are not counted.
	if _, err := f.svc.Instances.Get(project, zone, "web-1").Do(); err != nil {
		t.Errorf("get of another instance: %v", err)
	}
}

func TestErrorThatTakesEffectNowAndLater(t *testing.T) {
	f := start(t, fleetFile, computefake.WithOperationDelay("stop", 0))
	f.Fail(computefake.FailRule{Method: "instances.stop", Resource: name("trainer-a"), Code: 500, Applied: true, Times: 1})
	_, err := f.svc.Instances.Stop(project, zone, "trainer-a").Do()
	apiErr(t, err, 500, "backendError")
	if got := f.status(t, "trainer-a"); got != "TERMINATED" {
		t.Errorf("after a 500 that took effect: %s", got)
	}

	f.Fail(computefake.FailRule{Method: "instances.stop", Resource: name("web-1"), Code: 503, Applied: true, AppliedAfter: 40 * time.Second, Times: 1})
	_, err = f.svc.Instances.Stop(project, zone, "web-1").Do()
	apiErr(t, err, 503, "backendError")
	f.clock.add(39 * time.Second)
	if got := f.status(t, "web-1"); got != "RUNNING" {
		t.Errorf("39 s after a 503 that lands at 40 s: %s", got)
	}
	f.clock.add(time.Second)
	if got := f.status(t, "web-1"); got != "TERMINATED" {
		t.Errorf("40 s after: %s, want the late stop landed", got)
	}
	// The late call left its operation and admin-activity entry like any other.
	if n := f.Succeeded("instances.stop"); n != 2 {
		t.Errorf("Succeeded(stop) = %d, want 2", n)
	}
}

func TestHangPastTheDeadlineThenLands(t *testing.T) {
	f := start(t, fleetFile, computefake.WithOperationDelay("delete", 0))
	f.Fail(computefake.FailRule{Method: "instances.delete", Hang: true, Applied: true, AppliedAfter: 10 * time.Second, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f.svc.Instances.Delete(project, zone, "trainer-a").Context(ctx).Do()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging delete = %v, want the caller's deadline", err)
	}
	f.get(t, "trainer-a")
	f.clock.add(10 * time.Second)
	_, err = f.svc.Instances.Get(project, zone, "trainer-a").Do()
	apiErr(t, err, 404, "notFound")
	reqs := f.Requests()
	if r := reqs[0]; r.Status != 0 || !strings.Contains(r.Fault, "hang") {
		t.Errorf("logged hang = %+v", r)
	}
}

func TestLostAnswerAfterTheCallTookEffect(t *testing.T) {
	f := start(t, fleetFile)
	f.Fail(computefake.FailRule{Method: "instances.stop", Lost: true, Times: 1})
	_, err := f.svc.Instances.Stop(project, zone, "trainer-a").Do()
	var herr *googleapi.Error
	if err == nil || errors.As(err, &herr) {
		t.Fatalf("lost answer = %v, want a transport error (no HTTP answer)", err)
	}
	if got := f.status(t, "trainer-a"); got != "STOPPING" {
		t.Errorf("after the lost stop: %s, want it under way", got)
	}
	// Its operation exists: the audit log names it, the caller never saw it.
	es := f.AuditEntries()
	if len(es) != 1 || es[0].ProtoPayload.MethodName != "v1.compute.instances.stop" {
		t.Fatalf("entries = %+v", es)
	}
	if _, err := f.svc.ZoneOperations.Get(project, zone, es[0].Operation.ID).Do(); err != nil {
		t.Errorf("the lost call's operation: %v", err)
	}
}

func TestMalformedBody(t *testing.T) {
	f := start(t, fleetFile)
	f.Fail(computefake.FailRule{Method: "instances.get", Malformed: true, Times: 1})
	if _, err := f.svc.Instances.Get(project, zone, "trainer-a").Do(); err == nil {
		t.Error("get with a malformed body succeeded")
	}
	f.Fail(computefake.FailRule{Method: "instances.start", Resource: name("stopped-by-alice"), Malformed: true, Applied: true, Times: 1})
	if _, err := f.svc.Instances.Start(project, zone, "stopped-by-alice").Do(); err == nil {
		t.Error("start with a malformed body succeeded")
	}
	if got := f.status(t, "stopped-by-alice"); got != "PROVISIONING" {
		t.Errorf("after the garbled start that took effect: %s", got)
	}
}

func TestOperationEndsInErrorWithAndWithoutItsEffect(t *testing.T) {
	f := start(t, fleetFile)
	f.Fail(computefake.FailRule{Method: "operation:instances.delete", Resource: name("trainer-a"), Reason: "RESOURCE_NOT_READY", Code: 400, Times: 1})
	op, err := f.svc.Instances.Delete(project, zone, "trainer-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Minute)
	got := f.op(t, op)
	if got.Status != "DONE" || got.Error == nil || got.Error.Errors[0].Code != "RESOURCE_NOT_READY" || got.HttpErrorStatusCode != 400 || got.HttpErrorMessage != "BAD REQUEST" {
		t.Fatalf("failed delete's operation = %+v", got)
	}
	if f.status(t, "trainer-a") != "RUNNING" {
		t.Error("a delete whose operation failed without effect removed the instance")
	}
	f.Fail(computefake.FailRule{Method: "instances.delete", Resource: name("web-1"), OperationError: true, Applied: true, Times: 1})
	op, err = f.svc.Instances.Delete(project, zone, "web-1").Do()
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Minute)
	if got := f.op(t, op); got.Error == nil || got.Error.Errors[0].Code != "INTERNAL_ERROR" {
		t.Errorf("operation = %+v", got)
	}
	_, err = f.svc.Instances.Get(project, zone, "web-1").Do()
	apiErr(t, err, 404, "notFound") // the delete happened anyway
	if n := f.Succeeded("instances.delete"); n != 0 {
		t.Errorf("Succeeded(delete) = %d, want 0 (both ended in error)", n)
	}
}

func TestCapacityErrorsAreShapedLikeComputeEngines(t *testing.T) {
	tests := []struct {
		capacity   computefake.Capacity
		wantCode   string
		wantHTTP   int64
		wantMsg    string
		wantDetail string
	}{
		{computefake.ZoneResourcePoolExhausted, "ZONE_RESOURCE_POOL_EXHAUSTED", 503,
			"The zone 'projects/acme-ml/zones/us-central1-c' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", ""},
		{computefake.ZoneResourcePoolExhaustedWithDetails, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 503,
			"The zone 'projects/acme-ml/zones/us-central1-c' does not have enough resources available to fulfill the request.  '(resource type:compute)'.", "errorInfo"},
		{computefake.QuotaExceededRegion, "QUOTA_EXCEEDED", 403, "Quota 'TPUS_PER_TPU_FAMILY' exceeded.  Limit: 16.0 in region us-central1.", "region"},
		{computefake.QuotaExceededZone, "QUOTA_EXCEEDED", 403, "Quota 'TPUS_PER_TPU_FAMILY' exceeded.  Limit: 16.0 in zone us-central1-c.", "zone"},
	}
	for _, tt := range tests {
		t.Run(string(tt.capacity), func(t *testing.T) {
			f := start(t, fleetFile)
			f.Fail(computefake.FailRule{Method: "instances.insert", Capacity: tt.capacity})
			op, err := f.svc.Instances.Insert(project, zone, newTPUVM("trainer-b")).Do()
			if err != nil {
				t.Fatal(err)
			}
			if got := f.status(t, "trainer-b"); got != "PROVISIONING" {
				t.Errorf("while the insert runs: %s", got)
			}
			f.clock.add(3 * time.Minute)
			got := f.op(t, op)
			if got.Error == nil {
				t.Fatalf("operation = %+v, want an error", got)
			}
			e := got.Error.Errors[0]
			if e.Code != tt.wantCode || e.Message != tt.wantMsg || got.HttpErrorStatusCode != tt.wantHTTP {
				t.Errorf("error = %s %q (HTTP %d)", e.Code, e.Message, got.HttpErrorStatusCode)
			}
			switch tt.wantDetail {
			case "errorInfo":
				if len(e.ErrorDetails) != 1 || e.ErrorDetails[0].ErrorInfo == nil {
					t.Errorf("details = %+v", e.ErrorDetails)
				}
			case "region", "zone":
				if len(e.ErrorDetails) != 1 || e.ErrorDetails[0].QuotaInfo == nil || e.ErrorDetails[0].QuotaInfo.Dimensions[tt.wantDetail] == "" {
					t.Errorf("quota details = %+v", e.ErrorDetails)
				}
			}
			_, err = f.svc.Instances.Get(project, zone, "trainer-b").Do()
			apiErr(t, err, 404, "notFound") // a failed insert leaves no instance
		})
	}
}

func TestReadLagShowsTheOldStateForAWhile(t *testing.T) {
	f := start(t, fleetFile, computefake.WithOperationDelay("delete", 0), computefake.WithOperationDelay("insert", 0))
	f.Fail(computefake.FailRule{Method: "instances.delete", Resource: name("trainer-a"), ReadLag: 30 * time.Second})
	if _, err := f.svc.Instances.Delete(project, zone, "trainer-a").Do(); err != nil {
		t.Fatal(err)
	}
	if got := f.status(t, "trainer-a"); got != "RUNNING" {
		t.Errorf("get right after the delete: %s, want the lagged RUNNING", got)
	}
	names, _ := listNames(t, f, "name=trainer-a", 0)
	if len(names) != 1 {
		t.Errorf("list right after the delete = %v, want the lagged instance", names)
	}
	f.clock.add(30 * time.Second)
	_, err := f.svc.Instances.Get(project, zone, "trainer-a").Do()
	apiErr(t, err, 404, "notFound")
	// An insert lags as not found.
	f.Fail(computefake.FailRule{Method: "instances.insert", ReadLag: 10 * time.Second})
	if _, err := f.svc.Instances.Insert(project, zone, newTPUVM("trainer-b")).Do(); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Instances.Get(project, zone, "trainer-b").Do()
	apiErr(t, err, 404, "notFound")
	f.clock.add(10 * time.Second)
	f.get(t, "trainer-b")
}

func TestPagingAnomalies(t *testing.T) {
	page := func(f *fake, tok string) ([]string, string) {
		t.Helper()
		l, err := f.svc.Instances.List(project, zone).MaxResults(4).PageToken(tok).Do()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, in := range l.Items {
			names = append(names, in.Name)
		}
		return names, l.NextPageToken
	}
	t.Run("repeated token", func(t *testing.T) {
		f := start(t, fleetFile)
		_, tok := page(f, "")
		f.Fail(computefake.FailRule{Method: "instances.list", Page: computefake.PageRepeat, Times: 1})
		names, next := page(f, tok)
		if next != tok || len(names) != 4 {
			t.Errorf("repeat page: %v, next %q, want the request's own token %q", names, next, tok)
		}
	})
	t.Run("last page points back to the first", func(t *testing.T) {
		f := start(t, fleetFile)
		f.Fail(computefake.FailRule{Method: "instances.list", Page: computefake.PageRestart, Nth: 3, Times: 1})
		var all []string
		tok, seen := "", map[string]bool{}
		for range 5 {
			names, next := page(f, tok)
			all = append(all, names...)
			if next == "" || seen[next] {
				break
			}
			seen[next], tok = true, next
		}
		if len(all) != 16 || all[12] != all[0] {
			t.Errorf("listed %v, want the 12 instances and then the first page again", all)
		}
	})
	t.Run("skipped page", func(t *testing.T) {
		f := start(t, fleetFile)
		f.Fail(computefake.FailRule{Method: "instances.list", Page: computefake.PageSkip, Times: 1})
		first, tok := page(f, "")
		second, next := page(f, tok)
		if first[0] != "trainer-a" || second[0] != "slice-mig-w0" || next != "" {
			t.Errorf("skip: %v then %v (next %q), want the second page skipped", first, second, next)
		}
	})
	t.Run("empty page with a next token", func(t *testing.T) {
		f := start(t, fleetFile)
		f.Fail(computefake.FailRule{Method: "instances.list", Page: computefake.PageEmpty, Times: 1})
		names, tok := page(f, "")
		if len(names) != 0 || tok == "" {
			t.Fatalf("empty page: %v, next %q", names, tok)
		}
		names, _ = page(f, tok)
		if names[0] != "trainer-a" {
			t.Errorf("after the empty page: %v, want the first page", names)
		}
	})
}

func TestFailRefusesARuleThatCannotApply(t *testing.T) {
	f := start(t, fleetFile)
	for _, r := range []computefake.FailRule{
		{Method: "instances.reset"},
		{Method: "instances.get", Page: computefake.PageSkip},
		{Method: "instances.get", OperationError: true},
		{Method: "instances.list", Applied: true},
		{Method: "instances.stop", AppliedAfter: time.Second},
		{Method: "instances.stop", Capacity: "NO_SUCH_THING"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Fail(%+v) accepted", r)
				}
			}()
			f.Fail(r)
		}()
	}
}

func TestIntermittentSlowness(t *testing.T) {
	f := start(t, fleetFile)
	f.Fail(computefake.FailRule{Method: "instances.get", Delay: time.Hour, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.svc.Instances.Get(project, zone, "trainer-a").Context(ctx).Do(); err == nil {
		t.Error("a call delayed an hour answered before its deadline")
	}
}

// TestAnotherWritersMetadataWriteMakesAStaleFingerprintFail: OtherWriter
// lands its keys before the call; the call, sent with the fingerprint read
// before, is refused 412 conditionNotMet and changes nothing; sent again
// on top of a fresh read, it lands and both writes are there.
func TestAnotherWritersMetadataWriteMakesAStaleFingerprintFail(t *testing.T) {
	f := start(t, fleetFile)
	f.Fail(computefake.FailRule{Method: "instances.setMetadata", Resource: name("trainer-a"), Times: 1, OtherWriter: map[string]string{"team-note": "theirs"}})
	keys := func(md *compute.Metadata) map[string]string {
		out := map[string]string{}
		for _, it := range md.Items {
			out[it.Key] = *it.Value
		}
		return out
	}
	setOurs := func() error {
		in, err := f.svc.Instances.Get(project, zone, "trainer-a").Do()
		if err != nil {
			t.Fatal(err)
		}
		md := in.Metadata
		md.Items = append(md.Items, &compute.MetadataItems{Key: "ours", Value: new("1")})
		_, err = f.svc.Instances.SetMetadata(project, zone, "trainer-a", md).Do()
		return err
	}
	before, _ := f.Instance(name("trainer-a"))
	apiErr(t, setOurs(), 412, "conditionNotMet")
	after, _ := f.Instance(name("trainer-a"))
	if got := keys(after.Metadata); got["team-note"] != "theirs" || got["ours"] != "" {
		t.Errorf("after the refused call: %v, want theirs and not ours", got)
	}
	if after.Metadata.Fingerprint == before.Metadata.Fingerprint {
		t.Error("the other writer's write did not move the fingerprint")
	}
	if err := setOurs(); err != nil {
		t.Fatalf("sent again on a fresh read: %v", err)
	}
	final, _ := f.Instance(name("trainer-a"))
	if got := keys(final.Metadata); got["team-note"] != "theirs" || got["ours"] != "1" || got["startup-script"] == "" {
		t.Errorf("after the second call: %v, want theirs, ours and the startup script", got)
	}
}

func TestOtherWriterIsOnlyForSetMetadata(t *testing.T) {
	f := start(t, fleetFile)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "OtherWriter") {
			t.Errorf("Fail(OtherWriter on instances.start) = %v, want a panic naming OtherWriter", r)
		}
	}()
	f.Fail(computefake.FailRule{Method: "instances.start", OtherWriter: map[string]string{"k": "v"}})
}
