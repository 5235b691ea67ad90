package policy

import (
	"errors"
	"testing"
	"time"
)

// A refused create leaves the kind of its failure in the recovery, typed:
// a stockout or quota is told by LastKind, not by LastError's words.
func TestTheLastFailureKeepsItsKind(t *testing.T) {
	cfg := DefaultConfig()
	creating := Recovery{Node: nodeName, Project: "acme-ml", Action: ActionRecreate, Phase: PhaseCreating, Generation: 2,
		Spec: CleanSpec(optedIn("TERMINATED", "")), DeleteSent: true, StartedAt: t0.Add(-time.Hour)}
	const msg = `There is no more capacity in the zone "us-central2-b"`
	for _, tc := range []struct {
		name        string
		kind        Kind
		wantRefusal string // the Refusal's kind, "" for none
	}{
		{"a stockout", KindStockout, "stockout"},
		{"a quota", KindQuota, "quota"},
		{"a permanent refusal", KindPermanent, ""},
		{"a transient failure", KindTransient, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := Advance(creating, Observation{}, StepResult{Effect: EffectCreate, Err: &Error{Kind: tc.kind, Err: errors.New(msg)}}, t0, cfg)
			if got.LastKind != tc.kind {
				t.Errorf("LastKind = %s (LastError %q); want %s", got.LastKind, got.LastError, tc.kind)
			}
			r := RefusalOf(got, cfg)
			switch {
			case tc.wantRefusal == "" && r != nil:
				t.Errorf("RefusalOf = %+v; want none", r)
			case tc.wantRefusal != "" && (r == nil || r.Kind != tc.wantRefusal || r.Message != msg):
				t.Errorf("RefusalOf = %+v; want a %s with the API's wording", r, tc.wantRefusal)
			}
		})
	}
	t.Run("words alone are no refusal", func(t *testing.T) {
		rec := creating
		rec.LastError = "create (stockout): " + msg
		if r := RefusalOf(rec, cfg); r != nil {
			t.Errorf("RefusalOf a recovery whose LastKind is none = %+v; want none", r)
		}
	})
	t.Run("a close forgets it, an abandon keeps it", func(t *testing.T) {
		refused := creating
		refused.LastError, refused.LastKind = "create (stockout): "+msg, KindStockout
		if got := CloseRecovery(refused, "opted out").LastKind; got != KindNone {
			t.Errorf("closed: LastKind %s; want none (LastError no longer names the failure)", got)
		}
		if got := Abandon(refused, "still unfinished, last error: "+refused.LastError).LastKind; got != KindStockout {
			t.Errorf("abandoned: LastKind %s; want stockout (its reason names the last failure)", got)
		}
	})
}

// KindInText reads the kind of a LastError written before LastKind
// existed; KindNamed reads the kind's word back.
func TestKindsReadFromWords(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Kind
	}{
		{`create (stockout): There is no more capacity in the zone`, KindStockout},
		{`create (quota): Quota 'TPUV4_CHIPS' exceeded`, KindQuota},
		{`create (exhausted): stockout`, KindStockout},
		{`create operation (permanent): operation op failed: PERMISSION_DENIED: denied`, KindPermanent},
		{`delete (transient): connection reset`, KindTransient},
		{`node is TERMINATED after the create`, KindNone},
		{``, KindNone},
	} {
		if got := KindInText(tc.text); got != tc.want {
			t.Errorf("KindInText(%q) = %s; want %s", tc.text, got, tc.want)
		}
	}
	for _, w := range []string{"none", "not found", "already exists", "stockout", "transient", "permanent", "quota"} {
		if got := KindNamed(w).String(); got != w {
			t.Errorf("KindNamed(%q) = %s", w, got)
		}
	}
	if got := KindNamed("exhausted"); got != KindNone {
		t.Errorf("KindNamed(an unknown word) = %s; want none", got)
	}
}
