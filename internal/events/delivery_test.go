package events

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// decodeBefore is what the function did with a delivery before Decode:
// Unwrap, IsFollow (and FollowNonce), IsSweep, then Parse of the payload.
// It is Decode's oracle.
func decodeBefore(body []byte, opts Options) (Delivery, error) {
	payload, _, err := Unwrap(body)
	if err != nil {
		return Delivery{}, err
	}
	if IsFollow(payload) {
		return Delivery{Kind: DeliveryFollow, Nonce: FollowNonce(payload)}, nil
	}
	if IsSweep(payload) {
		return Delivery{Kind: DeliverySweep}, nil
	}
	ev, err := Parse(payload, opts)
	return Delivery{Event: ev}, err
}

func compareWithBefore(t *testing.T, body []byte, opts Options) {
	t.Helper()
	got, gerr := Decode(body, opts)
	want, werr := decodeBefore(body, opts)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("Decode error %v, before %v\ninput %q", gerr, werr, body)
	}
	if werr != nil {
		var gre, wre *RejectError
		if !errors.As(gerr, &gre) || !errors.As(werr, &wre) {
			t.Fatalf("errors are not RejectErrors: Decode %v, before %v", gerr, werr)
		}
		if diff := cmp.Diff(*wre, *gre); diff != "" {
			t.Fatalf("rejects differ (-before +Decode):\n%s\ninput %q", diff, body)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("deliveries differ (-before +Decode):\n%s\ninput %q", diff, body)
	}
}

func pushOf(payload string) string {
	return `{"message":{"data":"` + base64.StdEncoding.EncodeToString([]byte(payload)) + `","messageId":"1","attributes":{"a":"b"}},"subscription":"projects/p/subscriptions/s"}`
}

// controlSeeds are control messages and near misses, bare and wrapped.
var controlSeeds = []string{
	SweepMessage, FollowMessage, FollowKick("n-1"),
	`{"autoheal":"sweep","autoheal":"follow"}`, // the last duplicate wins
	`{"AUTOHEAL":"sweep"}`,                     // the name is exact: no sweep
	`{"autoheal":"sweep","AUTOHEAL":"follow"}`, // the exact one counts
	`{"autoh\u0065al":"sweep"}`,                // an escaped name is the same name
	`{"autoheal":"sw\u0065ep"}`,                // so is an escaped value
	`{"autoheal":null}`, `{"autoheal":["sweep"]}`, `{"autoheal":"Sweep"}`,
	`{"autoheal":"follow","nonce":5}`,   // a nonce of the wrong type is none
	`{"autoheal":"follow","NONCE":"x"}`, // encoding/json folds the nonce's name
	`{"autoheal":"follow","nonce":"x","nonce":null}`,
	`{"autoheal":"follow","nonce":"caf\u00e9"}`,
	`{"autoheal":"sweep","timestamp":5}`, // a LogEntry member of the wrong type: still a sweep
	`{"autoheal":"sweep","message":{"data":"e30="}}`,
	`{"autoheal":"sweep","specversion":5}`,
	`{"autoheal":"sweep","specversion":"1.0","data":{"autoheal":"follow"}}`,
	`{"autoheal":"sweep"` + strings.Repeat(" ", 5<<10) + `}`, // too big for a control message
	`["sweep"]`, `"sweep"`, ``, `{`, `{"autoheal":"sweep"}x`,
}

func addDeliverySeeds(f *testing.F) {
	addFixtureSeeds(f)
	for _, s := range controlSeeds {
		f.Add([]byte(s))
		f.Add([]byte(pushOf(s)))
	}
	f.Add([]byte(pushOf(pushOf(SweepMessage))))
	f.Add([]byte(`{"subscription":"s","message":{"data":"` + base64.StdEncoding.EncodeToString([]byte(SweepMessage)) + `"}}`))
	f.Add([]byte(`{"message":"not an envelope","autoheal":"sweep"}`))
	f.Add([]byte(`{"message":{"data":5}}`))
	f.Add([]byte(`{"message":{"data":"!!"}}`))
	f.Add([]byte(`{"specversion":"1.0","type":"t","data":` + pushOf(FollowKick("k")) + `}`))
}

// FuzzDecode is Decode's differential target: on any input it answers
// exactly what the four calls it replaces answered in turn (its seeds run
// with every go test, which makes it the table of tricky shapes too).
func FuzzDecode(f *testing.F) {
	addDeliverySeeds(f)
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		compareWithBefore(t, data, Options{MaxEntryBytes: 64 << 10})
		compareWithBefore(t, data, Options{MaxEntryBytes: 1 << 10, AllowedProjects: []string{"acme-ml"}, Now: now})
	})
}

// TestDecodeMatchesBeforeOnEveryFixture runs every real-shaped entry bare,
// in a push body and in a CloudEvent through Decode and its oracle.
func TestDecodeMatchesBeforeOnEveryFixture(t *testing.T) {
	for _, file := range fixtures(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{string(b), pushOf(string(b)),
			`{"specversion":"1.0","type":"google.cloud.pubsub.topic.v1.messagePublished","data":` + pushOf(string(b)) + `}`} {
			compareWithBefore(t, []byte(body), Options{})
		}
	}
}

type decodeCall struct {
	Decoder string
	Doc     string
}

// decodesOf returns every whole-document decode Decode makes of body.
func decodesOf(t *testing.T, body []byte, opts Options) (Delivery, []decodeCall, error) {
	t.Helper()
	var calls []decodeCall
	decodeHook = func(decoder string, doc []byte) { calls = append(calls, decodeCall{decoder, string(doc)}) }
	defer func() { decodeHook = nil }()
	d, err := Decode(body, opts)
	return d, calls, err
}

// TestDecodeReadsEachDocumentOnce proves "one decode per delivery": each
// document of a delivery (the envelope, the message it carries) is decoded
// once, by one decoder. A second Unwrap, an IsSweep or a Parse after the
// fact would each add a call here.
func TestDecodeReadsEachDocumentOnce(t *testing.T) {
	terminate := fixture(t, "terminate-maintenance.json")
	tests := []struct {
		name string
		body string
		want []decodeCall
	}{
		{"a bare entry: one scan", terminate, []decodeCall{{decoderScanner, terminate}}},
		{"a push body of an entry: the envelope by encoding/json, the entry by one scan", pushOf(terminate),
			[]decodeCall{{decoderJSON, pushOf(terminate)}, {decoderScanner, terminate}}},
		{"a push body of a sweep", pushOf(SweepMessage),
			[]decodeCall{{decoderJSON, pushOf(SweepMessage)}, {decoderScanner, SweepMessage}}},
		{"a push body of a follow kick", pushOf(FollowKick("n-1")),
			[]decodeCall{{decoderJSON, pushOf(FollowKick("n-1"))}, {decoderScanner, FollowKick("n-1")}}},
		{"a bare sweep", SweepMessage, []decodeCall{{decoderScanner, SweepMessage}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := decodesOf(t, []byte(tt.body), Options{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decodes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeBeforeDecodedFourTimes records what the calls Decode replaces
// cost, so the figure in its doc comment stays true: a push body of an
// entry was read by encoding/json three times and by the scanner once.
func TestDecodeBeforeDecodedFourTimes(t *testing.T) {
	body := []byte(pushOf(fixture(t, "terminate-maintenance.json")))
	var n int
	decodeHook = func(string, []byte) { n++ }
	defer func() { decodeHook = nil }()
	if _, err := decodeBefore(body, Options{}); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("the four calls decoded %d times, want 4", n)
	}
}

func TestDecode(t *testing.T) {
	terminate := fixture(t, "terminate-maintenance.json")
	tests := []struct {
		name      string
		body      string
		wantKind  DeliveryKind
		wantNonce string
		wantNode  string // of an entry
		wantCode  string // of a reject
		wantField string
		wantIn    string // in the reject's message
	}{
		{name: "a bare entry is an entry", body: terminate, wantKind: DeliveryEntry,
			wantNode: "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"},
		{name: "a push body of an entry is the entry", body: pushOf(terminate), wantKind: DeliveryEntry,
			wantNode: "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"},
		{name: "a CloudEvent of a push body is the entry", body: `{"specversion":"1.0","type":"google.cloud.pubsub.topic.v1.messagePublished","data":` + pushOf(terminate) + `}`,
			wantKind: DeliveryEntry, wantNode: "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"},
		{name: "a push body of the sweep message is a sweep", body: pushOf(SweepMessage), wantKind: DeliverySweep},
		{name: "a bare sweep message is a sweep", body: " {\n\"autoheal\" : \"sweep\" } ", wantKind: DeliverySweep},
		{name: "a follow kick is a follow with its nonce", body: pushOf(FollowKick("k-42")), wantKind: DeliveryFollow, wantNonce: "k-42"},
		{name: "a follow message without a nonce is a follow", body: pushOf(FollowMessage), wantKind: DeliveryFollow},
		{name: "a control word in another case is no control message", body: pushOf(`{"autoheal":"SWEEP"}`),
			wantCode: CodeForeignService, wantField: "protoPayload.serviceName", wantIn: "not a TPU audit log entry"},
		{name: "malformed JSON is rejected saying where", body: `{"insertId":`, wantCode: CodeMalformedJSON, wantIn: "unexpected end of JSON input"},
		{name: "an array is not an object", body: `[1]`, wantCode: CodeNotObject, wantIn: "a JSON array is not a LogEntry object"},
		{name: "an envelope without data", body: `{"message":{"attributes":{}}}`, wantCode: CodeEmptyMessage, wantField: "message.data", wantIn: "no data"},
		{name: "an envelope whose data is not base64", body: `{"message":{"data":"%%%"}}`, wantCode: CodeBadBase64, wantField: "message.data"},
		{name: "an envelope whose data is not a string", body: `{"message":{"data":5}}`, wantCode: CodeBadEnvelope, wantField: "message.data", wantIn: "not a base64 string"},
		{name: "an envelope carrying malformed JSON", body: pushOf(`{"x":`), wantCode: CodeMalformedJSON},
		{name: "a known member of the wrong type", body: `{"insertId":5}`, wantCode: CodeWrongType, wantField: "insertId", wantIn: "JSON number where a string is expected"},
		{name: "an oversized bare body", body: `{"x":"` + strings.Repeat("a", 2*DefaultMaxEntryBytes) + `"}`, wantCode: CodeTooLarge, wantIn: "over the 524288-byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.body), Options{AcceptMissingLogName: true})
			if tt.wantCode != "" {
				var re *RejectError
				if !errors.As(err, &re) {
					t.Fatalf("Decode = %+v, %v; want a reject %s", got, err, tt.wantCode)
				}
				if re.Code != tt.wantCode || re.Field != tt.wantField || !strings.Contains(re.Error(), tt.wantIn) {
					t.Errorf("reject %s field %q: %q; want %s field %q containing %q", re.Code, re.Field, re.Error(), tt.wantCode, tt.wantField, tt.wantIn)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got.Kind != tt.wantKind || got.Nonce != tt.wantNonce || got.Event.Node.Name() != tt.wantNode {
				t.Errorf("Decode = %s nonce %q node %q; want %s nonce %q node %q",
					got.Kind, got.Nonce, got.Event.Node.Name(), tt.wantKind, tt.wantNonce, tt.wantNode)
			}
		})
	}
}

// fixture is a real-shaped entry of testdata/entries as one line.
func fixture(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(string(readFixture(t, name)))
}

// BenchmarkDelivery compares Decode with the four calls it replaces on a
// push body of a terminate entry, as the deployed function receives it.
func BenchmarkDelivery(b *testing.B) {
	body, err := os.ReadFile(entriesDir + "/terminate-maintenance.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, form := range []struct {
		name string
		body []byte
	}{{"push", []byte(pushOf(string(body)))}, {"bare", body}} {
		for _, path := range []struct {
			name   string
			decode func([]byte, Options) (Delivery, error)
		}{{"before", decodeBefore}, {"Decode", Decode}} {
			b.Run(fmt.Sprintf("%s/%s", form.name, path.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := path.decode(form.body, Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
