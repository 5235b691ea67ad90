package failure_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/failure"
)

func TestKindOfReadsTheAdaptersKind(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want failure.Kind
	}{
		{"nil is none", nil, failure.None},
		{"a wrapped kind is found", fmt.Errorf("create n: %w", &failure.Error{Kind: failure.Stockout, Err: errors.New("no capacity")}), failure.Stockout},
		{"the outermost kind wins", &failure.Error{Kind: failure.Quota, Err: &failure.Error{Kind: failure.Transient, Err: errors.New("x")}}, failure.Quota},
		{"an unclassified error is transient", errors.New("unexpected EOF"), failure.Transient},
	} {
		if got := failure.KindOf(tt.err); got != tt.want {
			t.Errorf("%s: KindOf = %s, want %s", tt.name, got, tt.want)
		}
	}
	e := &failure.Error{Kind: failure.NotFound, Err: errors.New("node n not found")}
	if e.Error() != "node n not found" || !errors.Is(fmt.Errorf("get: %w", e), e.Err) {
		t.Errorf("Error does not keep the API's error: %q", e.Error())
	}
	if !failure.IsNotFound(e) || failure.IsTransient(e) || failure.IsAlreadyExists(e) || failure.IsExhausted(e) {
		t.Error("Is* disagree with the kind")
	}
	if !failure.IsExhausted(&failure.Error{Kind: failure.Quota, Err: e}) || !failure.IsExhausted(&failure.Error{Kind: failure.Stockout, Err: e}) {
		t.Error("a quota and a stockout are exhausted")
	}
}

func TestKindWords(t *testing.T) {
	// Records and LastError carry these words: they are the kinds' names.
	for k, want := range map[failure.Kind]string{failure.None: "none", failure.NotFound: "not found", failure.AlreadyExists: "already exists",
		failure.Stockout: "stockout", failure.Transient: "transient", failure.Permanent: "permanent", failure.Quota: "quota", failure.Kind(42): "kind(42)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d) = %q, want %q", int(k), got, want)
		}
	}
}

func TestQuotaScope(t *testing.T) {
	for _, tt := range []struct {
		kind      failure.Kind
		msg, want string
	}{
		{failure.Quota, "Quota 'TPUV4_CHIPS' exceeded. Limit: 64.0 in region us-central2.", "region"},
		{failure.Quota, "Quota 'TPUV4_PODSLICE_LITE' exceeded. Limit: 16.0 in zone us-west4-a.", "zone"},
		{failure.Quota, "Quota exceeded.", ""},
		{failure.Stockout, "There is no more capacity", "zone"},
	} {
		if got := failure.QuotaScope(tt.kind, tt.msg); got != tt.want {
			t.Errorf("QuotaScope(%s, %q) = %q, want %q", tt.kind, tt.msg, got, tt.want)
		}
	}
}
