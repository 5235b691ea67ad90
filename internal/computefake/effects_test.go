package computefake_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

// whats is each effect as "what instance by".
func whats(es []computefake.Effect) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.What+" "+e.Instance[len("projects/acme-ml/zones/us-central1-c/instances/"):]+" "+e.By)
	}
	return out
}

// TestEffectsAreWhatChangedAndWho: a call that failed without its effect
// and a start of a RUNNING instance leave none; one that failed and landed
// later leaves one when it lands; the platform's and people's acts are
// theirs.
func TestEffectsAreWhatChangedAndWho(t *testing.T) {
	f := start(t, fleetFile)
	const alice = "alice@acme.example"
	if _, err := f.HostError(name("reserved-1")); err != nil {
		t.Fatal(err)
	}
	f.Fail(computefake.FailRule{Method: "instances.start", Resource: name("reserved-1"), Code: 503, Times: 1})
	if _, err := f.svc.Instances.Start(project, zone, "reserved-1").Do(); err == nil {
		t.Fatal("the first start did not fail")
	}
	f.Fail(computefake.FailRule{Method: "instances.start", Resource: name("reserved-1"), Code: 503, Applied: true, AppliedAfter: time.Minute, Times: 1})
	if _, err := f.svc.Instances.Start(project, zone, "reserved-1").Do(); err == nil {
		t.Fatal("the second start did not fail")
	}
	if got := whats(f.Effects()); !cmp.Equal(got, []string{"hostError reserved-1 " + computefake.SystemPrincipal}) {
		t.Fatalf("before the late start landed: %v", got)
	}
	f.clock.add(time.Minute)
	f.clock.add(time.Minute)                                                           // booted
	if _, err := f.svc.Instances.Start(project, zone, "reserved-1").Do(); err != nil { // RUNNING: does nothing
		t.Fatal(err)
	}
	if _, err := f.PersonStop(name("trainer-a"), alice); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Minute)
	if _, err := f.PersonStart(name("trainer-a"), alice); err != nil {
		t.Fatal(err)
	}
	if _, err := f.PersonRelabel(name("spot-stop"), alice, map[string]string{"team": "web"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"hostError reserved-1 " + computefake.SystemPrincipal,
		"start reserved-1 " + computefake.DefaultCaller,
		"stop trainer-a " + alice,
		"start trainer-a " + alice,
		"setLabels spot-stop " + alice,
	}
	es := f.Effects()
	if diff := cmp.Diff(want, whats(es)); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	if got := es[len(es)-1].Labels; !cmp.Equal(got, map[string]string{"team": "web"}) {
		t.Errorf("labels left = %v", got)
	}
	if got := f.get(t, "spot-stop").Labels; got["tpu-autoheal"] != "" {
		t.Errorf("spot-stop still opted in after the relabel: %v", got)
	}
	if got := entryMethods(f.AuditEntries()); got[len(got)-1] != "v1.compute.instances.setLabels" {
		t.Errorf("last audit entry %s, want the person's setLabels", got[len(got)-1])
	}
}
