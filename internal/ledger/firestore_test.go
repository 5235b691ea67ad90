package ledger

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// The conditional writes list fields by name; DataTo reads them by struct
// tag. A field missing from either side would silently lose data.
func TestWrittenFieldsMatchStoredStruct(t *testing.T) {
	for _, tc := range []struct {
		name   string
		doc    any
		fields map[string]any
	}{
		{"recovery", recoveryDoc{}, recoveryDoc{}.fields()},
		{"project", projectDoc{}, projectDoc{}.fields()},
		{"breaker", breakerDoc{}, breakerFields(breakerState{})},
		{"pause", pauseDoc{}, pauseDoc{}.fields()},
		{"pauses", pausesDoc{}, pauseSet{}.fields()},
		{"deferral", deferralDoc{}, deferralDoc{}.fields()},
		{"hold", holdDoc{}, holdDoc{}.fields()},
	} {
		var want, got []string
		rt := reflect.TypeOf(tc.doc)
		for i := 0; i < rt.NumField(); i++ {
			want = append(want, strings.Split(rt.Field(i).Tag.Get("firestore"), ",")[0])
		}
		for k := range tc.fields {
			got = append(got, k)
		}
		sort.Strings(want)
		sort.Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s fields (-struct tags +written):\n%s", tc.name, diff)
		}
	}
}

func TestDocIDIsSafeAndInjective(t *testing.T) {
	ids := []string{
		"projects/p/locations/us-central2-b/nodes/n",
		"projects~p~locations~us-central2-b~nodes~n",
		"/leading-slash", "a//b", "trailing/", "__reserved__", ".", "..", "", "插入",
		"abc123insertid", strings.Repeat("x", 2000),
	}
	seen := map[string]string{}
	for _, id := range ids {
		got := docID(id)
		if got == "" || strings.Contains(got, "/") || len(got) > 1500 || got == "." || got == ".." || strings.HasPrefix(got, "__") {
			t.Errorf("docID(%q) = %q; not a valid Firestore document id", id, got)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("docID(%q) = docID(%q) = %q", id, prev, got)
		}
		seen[got] = id
	}
	if got, want := docID("projects/p/locations/z/nodes/n"), "projects~p~locations~z~nodes~n"; got != want {
		t.Errorf("docID of a node name = %q; want the readable %q", got, want)
	}
}

// A recovery's stockout count survives the Firestore document: its next
// stockout waits the next, longer back-off window after a takeover too.
func TestStockoutsSurviveTheDocument(t *testing.T) {
	doc, err := toDoc(nodeLedger{Latest: &remediate.Recovery{Node: "projects/p/locations/z/nodes/n", Stockouts: 3, Failures: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if doc.fields()["stockouts"] != 3 {
		t.Errorf("written stockouts = %v, want 3", doc.fields()["stockouts"])
	}
	got, err := doc.recovery()
	if err != nil {
		t.Fatal(err)
	}
	if got.Stockouts != 3 || got.Failures != 2 {
		t.Errorf("read back stockouts %d, failures %d; want 3, 2", got.Stockouts, got.Failures)
	}
}

// The identities that sent a recovery's calls survive the Firestore
// document: a process that takes the recovery over knows them as its own.
func TestActorsSurviveTheDocument(t *testing.T) {
	doc, err := toDoc(nodeLedger{Latest: &remediate.Recovery{Node: "projects/p/locations/z/nodes/n", Actors: []string{"operator@acme.example"}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := doc.recovery()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Actors) != 1 || got.Actors[0] != "operator@acme.example" {
		t.Errorf("read back actors %q, want [operator@acme.example]", got.Actors)
	}
}

// A reset's operation is ResetOp, on the way in and out; a document saved
// before the field, with a reset's operation in createOp, reads as ResetOp
// (a recreate's createOp stays its create's).
func TestResetOperationReadsFromOldDocuments(t *testing.T) {
	const op = "projects/p/locations/z/operations/op-7"
	const node = "projects/p/locations/z/nodes/n"
	doc, err := toDoc(nodeLedger{Latest: &remediate.Recovery{Node: node, Action: remediate.ActionReset, Phase: remediate.PhaseResetting, ResetOp: op}})
	if err != nil {
		t.Fatal(err)
	}
	if doc.fields()["resetOp"] != op || doc.fields()["createOp"] != "" {
		t.Errorf("written resetOp %v, createOp %v; want %s and none", doc.fields()["resetOp"], doc.fields()["createOp"], op)
	}
	for _, tc := range []struct {
		name                  string
		doc                   recoveryDoc
		wantReset, wantCreate string
	}{
		{"a reset saved with resetOp", recoveryDoc{Node: node, Action: "reset", Phase: "resetting", ResetOp: op}, op, ""},
		{"a reset saved before resetOp, its operation in createOp", recoveryDoc{Node: node, Action: "reset", Phase: "resetting", CreateOp: op}, op, ""},
		{"a reset saved before Step as creating", recoveryDoc{Node: node, Action: "reset", Phase: "creating", CreateOp: op}, op, ""},
		{"a recreate's create operation stays", recoveryDoc{Node: node, Action: "recreate", Phase: "creating", CreateOp: op}, "", op},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.doc.recovery()
			if err != nil {
				t.Fatal(err)
			}
			if got.ResetOp != tc.wantReset || got.CreateOp != tc.wantCreate {
				t.Errorf("read ResetOp %q, CreateOp %q; want %q, %q", got.ResetOp, got.CreateOp, tc.wantReset, tc.wantCreate)
			}
		})
	}
}

// The last failure's kind is kept by its word; a document saved before
// lastKind has it read from lastError's words, and one saved with it is
// never read from the words.
func TestLastKindReadsFromOldDocuments(t *testing.T) {
	const node = "projects/p/locations/z/nodes/n"
	doc, err := toDoc(nodeLedger{Latest: &remediate.Recovery{Node: node, Phase: remediate.PhaseDeleted, LastError: "create (quota): Quota exceeded", LastKind: remediate.KindQuota}})
	if err != nil {
		t.Fatal(err)
	}
	if doc.fields()["lastKind"] != "quota" {
		t.Errorf("written lastKind %v; want quota", doc.fields()["lastKind"])
	}
	for _, tc := range []struct {
		name string
		doc  recoveryDoc
		want remediate.Kind
	}{
		{"saved with lastKind", recoveryDoc{Node: node, LastError: "create (quota): Quota exceeded", LastKind: "quota"}, remediate.KindQuota},
		{"saved with lastKind none, words quoting a stockout", recoveryDoc{Node: node, LastError: "closed: was create (stockout): x", LastKind: "none"}, remediate.KindNone},
		{"saved before lastKind, a stockout", recoveryDoc{Node: node, LastError: "create (stockout): There is no more capacity in the zone"}, remediate.KindStockout},
		{"saved before stockouts and quotas were told apart", recoveryDoc{Node: node, LastError: "create (exhausted): stockout"}, remediate.KindStockout},
		{"saved before lastKind, a permanent failure", recoveryDoc{Node: node, LastError: "create (permanent): denied"}, remediate.KindPermanent},
		{"saved before lastKind, no failure", recoveryDoc{Node: node}, remediate.KindNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.doc.recovery()
			if err != nil {
				t.Fatal(err)
			}
			if got.LastKind != tc.want {
				t.Errorf("read LastKind %s; want %s", got.LastKind, tc.want)
			}
		})
	}
}
