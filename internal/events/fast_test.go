package events

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// compareWithReference checks that whenever the fast path answers, it
// answers exactly what the reference (encoding/json) path does: the same
// accept/reject, the same Event, the same reject code, field and reason.
func compareWithReference(t *testing.T, data []byte, opts Options) (fastAnswered bool) {
	t.Helper()
	fev, ferr, ok := parseFast(data, opts)
	if !ok {
		return false
	}
	rev, rerr := parseReference(data, opts)
	if (ferr == nil) != (rerr == nil) {
		t.Fatalf("fast path error %v, reference error %v\ninput %q", ferr, rerr, data)
	}
	if rerr != nil {
		var fre, rre *RejectError
		if !errors.As(ferr, &fre) || !errors.As(rerr, &rre) {
			t.Fatalf("errors are not RejectErrors: fast %v, reference %v", ferr, rerr)
		}
		if diff := cmp.Diff(*rre, *fre); diff != "" {
			t.Fatalf("rejects differ (-reference +fast):\n%s\ninput %q", diff, data)
		}
		return true
	}
	if diff := cmp.Diff(rev, fev); diff != "" {
		t.Fatalf("events differ (-reference +fast):\n%s\ninput %q", diff, data)
	}
	return true
}

// FuzzFastParse is the differential fuzz target of the fast path.
func FuzzFastParse(f *testing.F) {
	addFixtureSeeds(f)
	for _, s := range []string{
		`{"insertId":null,"protoPayload":{"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":"projects/p/locations/z/nodes/n"}}`,
		`{"INSERTID":"x","ProtoPayload":{"SERVICENAME":"tpu.googleapis.com","methodname":"tpu.nodes.restart","resourceName":"projects/p/locations/z/nodes/n"},"resource":{"labels":{"a":null},"labels":{"b":"c"}}}`,
		`{"protoPayload":{"serviceName":"tpu.googleapis.com"},"protoPayload":{"methodName":"tpu.nodes.terminate","resourceName":"projects/p/locations/z/nodes/n","metadata":{"terminateReason":{"a":[1,2.5e3,true,false,null]}}}}`,
		`{"protoPayload":{"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":"projects/p/locations/z/nodes/n","metadata":{"terminateReason":"caf\u00e9 \"maint\" \xff"}}}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		compareWithReference(t, data, Options{MaxEntryBytes: 64 << 10})
		compareWithReference(t, data, Options{MaxEntryBytes: 64 << 10, AllowedProjects: []string{"acme-ml"}, Now: now})
		compareWithReference(t, data, Options{MaxEntryBytes: 64 << 10, AcceptMissingLogName: true})
		if len(data) < 512 {
			if got, want := Classify(string(data), ""), classifyWords(string(data)); got != want {
				t.Fatalf("Classify(%q) = %s, the word rules say %s", data, got, want)
			}
		}
	})
}

// TestFastPathTakesThePlainEntries proves the fast path is the one that runs
// for the plain entries of the fixtures (it would be easy to fall back on
// everything and be correct but slow), and that it agrees with the reference
// on every fixture.
func TestFastPathTakesThePlainEntries(t *testing.T) {
	plain := []string{"terminate-maintenance.json", "terminate-worker.json", "restart.json", "foreign-method.json",
		"labels-only-node.json", "node-mismatch.json", "compute-preempted.json", "compute-upcoming-maintenance.json"}
	for _, f := range fixtures(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		answered := compareWithReference(t, data, fixtureOpts)
		name := filepath.Base(f)
		for _, p := range plain {
			if p == name && !answered {
				t.Errorf("%s: the fast path fell back to encoding/json", name)
			}
		}
		if strings.HasPrefix(name, "pubsub-push") && answered {
			t.Errorf("%s: the fast path answered for an envelope", name)
		}
	}
}

func TestParseUTCIsTimeParse(t *testing.T) {
	for _, s := range []string{
		"2026-11-20T03:44:36.265703305Z", "2026-11-20T03:44:36Z", "2026-11-20T03:44:36.5Z", "2024-02-29T23:59:59.999999999Z",
		"2025-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z", "2026-11-20T24:00:00Z",
		"2026-11-20T03:60:00Z", "2026-11-20T03:44:60Z", "2026-11-20T03:44:36.Z", "2026-11-20T03:44:36.1234567890Z",
		"2026-11-20t03:44:36Z", "2026-11-20T03:44:36z", "2026-11-20T03:44:36+00:00", "0000-01-01T00:00:00Z", "2026-11-20T03:44:3xZ",
		"2026-11-20T03:44:36.-1Z", "2026-1-20T03:44:36Z",
	} {
		want, werr := time.Parse(time.RFC3339Nano, s)
		got, ok := parseUTC(s)
		if !ok {
			continue // left to time.Parse
		}
		if werr != nil {
			t.Errorf("parseUTC(%q) accepted what time.Parse rejects: %v", s, werr)
			continue
		}
		if !got.Equal(want) || got.Location() != want.Location() {
			t.Errorf("parseUTC(%q) = %v, time.Parse = %v", s, got, want)
		}
	}
	// Every third day of years 1 to 9999 (and every digit count of a fraction)
	// against time.Parse, from the times time.Format writes.
	for day := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC); day.Year() < 10000; day = day.AddDate(0, 0, 3) {
		at := day.Add(time.Duration(day.YearDay()) * 4567891 * time.Microsecond)
		at = at.Add(time.Duration(day.Day()*day.YearDay()%1000000000) * time.Nanosecond).Truncate(time.Duration(pow10[day.Day()%10]))
		s := at.Format(time.RFC3339Nano)
		got, ok := parseUTC(s)
		if want, _ := time.Parse(time.RFC3339Nano, s); !ok || got != want {
			t.Fatalf("parseUTC(%q) = %v, %v; time.Parse = %v", s, got, ok, want)
		}
	}
	if _, ok := parseUTC("2026-11-20T03:44:36.265703305Z"); !ok {
		t.Error("parseUTC left Cloud Logging's own form to time.Parse")
	}
}

// TestStrEndStopsAtFirstSpecialByte checks the SWAR scan against a byte at
// a time: every byte value at every position of a word, after every kind
// of byte before it (a wrapping byte before another must not hide it).
func TestStrEndStopsAtFirstSpecialByte(t *testing.T) {
	want := func(b []byte, i int) int {
		for i < len(b) && strClass[b[i]] == 0 {
			i++
		}
		return i
	}
	fillers := []byte{'a', ' ', '!', '#', '[', ']', '~', 0x7f}
	for _, fill := range fillers {
		for pos := 0; pos < 16; pos++ {
			for c := 0; c < 256; c++ {
				for _, before := range []int{-1, 0x00, 0x1f, '"', '\\', 0x80, 0xff} {
					b := []byte(strings.Repeat(string(fill), 20))
					b[pos] = byte(c)
					if before >= 0 && pos > 0 {
						b[pos-1] = byte(before)
					}
					for start := 0; start <= pos; start += 3 {
						if got, w := strEnd(b, start), want(b, start); got != w {
							t.Fatalf("strEnd(%q, %d) = %d, want %d", b, start, got, w)
						}
					}
				}
			}
		}
	}
}
