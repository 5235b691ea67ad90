package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

func addFixtureSeeds(f *testing.F) {
	f.Helper()
	for _, file := range fixtures(f) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(SweepMessage))
	f.Add([]byte(`{"message":{"data":"e30="}}`))
	f.Add([]byte(`{"protoPayload":{"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.restart"},"resource":{"labels":{"project_id":"p","location":"z","node_id":"n"}}}`))
}

var causes = []Cause{CauseMaintenance, CausePreemption, CauseHardware, CauseUser, CauseUnknown}

// checkEvent asserts what every accepted event guarantees to remediate.
func checkEvent(t *testing.T, ev Event, opts Options) {
	t.Helper()
	switch ev.Kind {
	case KindNode:
		name := ev.Node.Name()
		if name == "" {
			t.Fatalf("accepted an event without a node: %+v", ev)
		}
		for _, part := range []string{ev.Node.Project, ev.Node.Zone, ev.Node.Node} {
			if !validID(part) {
				t.Fatalf("accepted node %q with an invalid part %q", name, part)
			}
		}
		if strings.Count(name, "/") != 5 {
			t.Fatalf("node name %q has the wrong shape", name)
		}
		if ev.Service != ServiceTPU || (ev.Method != MethodTerminate && ev.Method != MethodRestart) {
			t.Fatalf("accepted service %q method %q", ev.Service, ev.Method)
		}
		if ev.Instance != "" || ev.Maintenance != nil {
			t.Fatalf("a node event carries zone-hint fields: %+v", ev)
		}
	case KindAdminActivity:
		if ev.Service != ServiceTPU || !IsAdminMethod(ev.Method) || ev.Admin == nil || ev.Admin.Change == "" {
			t.Fatalf("accepted admin activity service %q method %q %+v", ev.Service, ev.Method, ev.Admin)
		}
		if (ev.Admin.Change == ChangeDeleteQueuedResource) != (ev.Admin.QueuedResource != "") ||
			(ev.Admin.QueuedResource != "") != (ev.Node.Node == "") || !validID(ev.Node.Project) || !validID(ev.Node.Zone) {
			t.Fatalf("admin activity about node %+v, queued resource %q", ev.Node, ev.Admin.QueuedResource)
		}
		if ev.Worker != "" || ev.Instance != "" || ev.Maintenance != nil {
			t.Fatalf("admin activity carries other kinds' fields: %+v", ev)
		}
	case KindZoneHint:
		if ev.Node.Node != "" || !validID(ev.Node.Project) || !validID(ev.Node.Zone) {
			t.Fatalf("zone hint with node %+v, want a valid project and zone and no node", ev.Node)
		}
		if ev.Service != ServiceCompute || !slices.Contains(ComputeMethods, ev.Method) {
			t.Fatalf("accepted zone hint service %q method %q", ev.Service, ev.Method)
		}
		if !strings.HasPrefix(ev.Instance, "t1v-n-") || !strings.HasSuffix(ev.Instance, "-w-"+ev.Worker) || ev.Worker == "" {
			t.Fatalf("zone hint instance %q worker %q", ev.Instance, ev.Worker)
		}
	case KindInstance:
		if ev.Node.Node != "" || ev.Worker != "" || !validID(ev.Node.Project) || !validID(ev.Node.Zone) || !validID(ev.Instance) || strings.HasPrefix(ev.Instance, "t1v-n-") {
			t.Fatalf("instance event with node %+v, worker %q, instance %q", ev.Node, ev.Worker, ev.Instance)
		}
		if ev.Service != ServiceCompute || (ev.Admin == nil) != slices.Contains(InstanceMethods, ev.Method) || (ev.Admin != nil) != slices.Contains(InstanceAdminMethods, ev.Method) {
			t.Fatalf("accepted instance event service %q method %q admin %+v", ev.Service, ev.Method, ev.Admin)
		}
	default:
		t.Fatalf("kind %q", ev.Kind)
	}
	if ev.Worker != "" && !validID(ev.Worker) {
		t.Fatalf("accepted invalid worker %q", ev.Worker)
	}
	if ev.Admin != nil && ev.Kind != KindAdminActivity && ev.Kind != KindInstance {
		t.Fatalf("a %q event carries admin activity %+v", ev.Kind, ev.Admin)
	}
	// Only the audit log of the entry's own project is read.
	logID := LogSystemEvent
	if ev.Kind == KindAdminActivity {
		logID = LogActivity
	}
	if (ev.LogName != "" || !opts.AcceptMissingLogName) && ev.LogName != AuditLogName(ev.Node.Project, logID) {
		t.Fatalf("accepted logName %q for project %q", ev.LogName, ev.Node.Project)
	}
	if ev.InsertID == "" {
		t.Fatal("accepted an event without an insertId")
	}
	if !slices.Contains(causes, ev.Cause) {
		t.Fatalf("cause %q is not one of %v", ev.Cause, causes)
	}
	if len(opts.AllowedProjects) > 0 && !slices.Contains(opts.AllowedProjects, ev.Node.Project) {
		t.Fatalf("accepted project %q outside %v", ev.Node.Project, opts.AllowedProjects)
	}
}

func checkReject(t *testing.T, err error) {
	t.Helper()
	var re *RejectError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RejectError", err, err)
	}
	if re.Code == "" || re.Reason == "" {
		t.Fatalf("reject without code or reason: %#v", re)
	}
}

func FuzzParse(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := Options{MaxEntryBytes: 64 << 10, AcceptMissingLogName: true}
		ev, err := Parse(data, opts)
		// Strict about the logName (the function) accepts what lenient
		// (replay) accepts with one, and rejects the rest as lenient does,
		// or for the missing logName alone.
		strict := Options{MaxEntryBytes: opts.MaxEntryBytes}
		sev, serr := Parse(data, strict)
		var sre *RejectError
		switch {
		case err != nil && (serr == nil || !errors.As(serr, &sre) || sre.Code != rejectCode(err)):
			t.Fatalf("lenient rejects (%v), strict says %v", err, serr)
		case err == nil && ev.LogName != "" && (serr != nil || sev.InsertID != ev.InsertID || sev.Node != ev.Node):
			t.Fatalf("strict rejects an entry with its logName that lenient accepts: %v", serr)
		case err == nil && ev.LogName == "" && (!errors.As(serr, &sre) || sre.Code != CodeMissingLogName || sre.Field != "logName"):
			t.Fatalf("strict on an entry without logName: %v, want %s on logName", serr, CodeMissingLogName)
		}
		if err != nil {
			checkReject(t, err)
			return
		}
		checkEvent(t, ev, opts)

		// The allow-list admits exactly its projects.
		allowed := Options{MaxEntryBytes: opts.MaxEntryBytes, AllowedProjects: []string{ev.Node.Project}, AcceptMissingLogName: true}
		if again, err := Parse(data, allowed); err != nil || again.Node != ev.Node || again.Kind != ev.Kind {
			t.Fatalf("allowing the event's own project: %v, node %v, want %v", err, again.Node, ev.Node)
		}
		other := Options{MaxEntryBytes: opts.MaxEntryBytes, AllowedProjects: []string{ev.Node.Project + "-other"}, AcceptMissingLogName: true}
		var re *RejectError
		if _, err := Parse(data, other); !errors.As(err, &re) || re.Code != CodeProjectNotAllowed {
			t.Fatalf("a project outside the allow-list: %v, want %s", err, CodeProjectNotAllowed)
		}

		// A bare entry and its unwrapped payload agree.
		payload, _, err := Unwrap(data)
		if err != nil {
			t.Fatalf("Unwrap failed on input Parse accepted: %v", err)
		}
		if string(payload) != string(data) {
			inner, err := Parse(payload, opts)
			if err != nil {
				t.Fatalf("Parse(Unwrap(data)) failed: %v", err)
			}
			if inner.Node != ev.Node || inner.InsertID != ev.InsertID || inner.Cause != ev.Cause || inner.Kind != ev.Kind {
				t.Fatalf("Parse(data) = %+v but Parse(Unwrap(data)) = %+v", ev, inner)
			}
		}
	})
}

func FuzzReader(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := Options{MaxEntryBytes: 4 << 10}
		checkSingleObject(t, data, opts)
		r := NewReader(strings.NewReader(string(data)), opts)
		// Every item consumes at least one byte, so there are at most
		// len(data)+1 of them before io.EOF.
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatalf("no io.EOF after %d items from %d bytes", i, len(data))
			}
			it, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("Next: %v (no read error is possible here)", err)
			}
			if it.Index != i {
				t.Fatalf("item %d has Index %d", i, it.Index)
			}
			if len(it.Data) > 2*opts.MaxEntryBytes {
				t.Fatalf("item kept %d bytes, over %d", len(it.Data), 2*opts.MaxEntryBytes)
			}
			if it.Err != nil {
				checkReject(t, it.Err)
				continue
			}
			checkEvent(t, it.Event, opts)
		}
	})
}

// checkSingleObject: one valid JSON object read as a stream is one item, and
// the same as Parse's result. (Except when a nested '{' starts a line, which
// the Reader takes for the next entry; see Reader.)
func checkSingleObject(t *testing.T, data []byte, opts Options) {
	t.Helper()
	trimmed := bytes.TrimSpace(data)
	if !json.Valid(trimmed) || trimmed[0] != '{' || bytes.Contains(trimmed, []byte("\n{")) {
		return
	}
	r := NewReader(bytes.NewReader(data), opts)
	it, err := r.Next()
	if err != nil {
		t.Fatalf("Next on a single object: %v", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("a single object gave more than one item (%v)", err)
	}
	ev, perr := Parse(data, opts)
	if (perr == nil) != (it.Err == nil) {
		t.Fatalf("Parse error %v, Reader error %v", perr, it.Err)
	}
	if perr == nil && (ev.Node != it.Event.Node || ev.InsertID != it.Event.InsertID) {
		t.Fatalf("Parse gave %+v, Reader %+v", ev, it.Event)
	}
}

// rejectCode is err's reject code, "" for another error.
func rejectCode(err error) string {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}
