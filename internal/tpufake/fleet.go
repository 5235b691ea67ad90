package tpufake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/fleetjson"
)

// Fleet is the simulated control plane's state, in the fleet file format: TPU
// v2 Node and QueuedResource resources exactly as the REST API returns them,
// each `name` being the full resource name.
type Fleet struct {
	Nodes           []*tpu.Node           `json:"nodes"`
	QueuedResources []*tpu.QueuedResource `json:"queuedResources,omitempty"`
	// GuestAttributes are the guest attributes of each node (by name), from
	// a fleet file node's "guestAttributes" (maintenance.go). Not written back.
	GuestAttributes map[string][]GuestAttribute `json:"-"`
}

var (
	nodeNameRE     = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/nodes/[^/]+$`)
	qrNameRE       = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/queuedResources/[^/]+$`)
	locationNameRE = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+$`)
	resourceIDRE   = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// ReadFleet reads a fleet file: a JSON array of nodes, or an object
// {"nodes":[...],"queuedResources":[...]} (which may also hold computefake's
// "instances" and "instanceGroupManagers", ignored here). A single node object (what
// `gcloud compute tpus tpu-vm describe --format=json` prints) is accepted as a
// fleet of one, and several such objects one after another (describe's
// outputs concatenated) as a fleet of them. Errors name the offending element and field, e.g.
// `fleet: nodes[2].name: ...`. Fields this client version does not know are
// ignored, as the generated client ignores them.
func ReadFleet(r io.Reader) (Fleet, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Fleet{}, fmt.Errorf("fleet: read: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Fleet{}, errors.New("fleet: empty input: want a JSON array of nodes or an object {\"nodes\": [...]}")
	}
	var rawNodes, rawQRs []json.RawMessage
	values, err := fleetjson.SplitValues(data)
	if err != nil {
		return Fleet{}, err
	}
	if len(values) > 1 {
		// Concatenated `gcloud compute tpus tpu-vm describe --format=json`
		// outputs (for n in ...; do gcloud ... describe $n; done > fleet.json).
		for i, v := range values {
			var keys map[string]json.RawMessage
			if v[0] != '{' || json.Unmarshal(v, &keys) != nil {
				return Fleet{}, fmt.Errorf("fleet: value %d of %d: concatenated values must each be a node object (as tpu-vm describe --format=json prints it), got %q…", i+1, len(values), fleetjson.FirstBytes(v))
			}
			if _, ok := keys["name"]; !ok {
				return Fleet{}, fmt.Errorf("fleet: value %d of %d: a node object needs its \"name\" (concatenated values must each be a node)", i+1, len(values))
			}
		}
		rawNodes = values
		data = nil
	}
	switch {
	case data == nil:
	case data[0] == '[':
		if err := json.Unmarshal(data, &rawNodes); err != nil {
			return Fleet{}, fleetjson.Error("", data, err)
		}
	case data[0] == '{':
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(data, &keys); err != nil {
			return Fleet{}, fleetjson.Error("", data, err)
		}
		_, hasNodes := keys["nodes"]
		_, hasQRs := keys["queuedResources"]
		if !hasNodes && !hasQRs {
			if _, ok := keys["name"]; !ok {
				return Fleet{}, errors.New(`fleet: object has neither "nodes" nor "queuedResources" (nor a node's "name")`)
			}
			rawNodes = []json.RawMessage{data}
			break
		}
		for k := range keys {
			// instances and instanceGroupManagers are computefake's: one
			// combined file seeds both simulators.
			if k != "nodes" && k != "queuedResources" && k != "instances" && k != "instanceGroupManagers" {
				return Fleet{}, fmt.Errorf("fleet: unknown top-level field %q (want \"nodes\" and \"queuedResources\")", k)
			}
		}
		if err := json.Unmarshal(keys["nodes"], &rawNodes); hasNodes && err != nil {
			return Fleet{}, fleetjson.Error("nodes", data, err)
		}
		if err := json.Unmarshal(keys["queuedResources"], &rawQRs); hasQRs && err != nil {
			return Fleet{}, fleetjson.Error("queuedResources", data, err)
		}
	default:
		return Fleet{}, fmt.Errorf("fleet: want a JSON array or object, got %q…", fleetjson.FirstBytes(data))
	}

	var f Fleet
	f.Nodes = make([]*tpu.Node, 0, len(rawNodes))
	for i, raw := range rawNodes {
		var n *tpu.Node
		if err := json.Unmarshal(raw, &n); err != nil {
			return Fleet{}, fleetjson.Error(fmt.Sprintf("nodes[%d]", i), raw, err)
		}
		f.Nodes = append(f.Nodes, n)
		if n != nil {
			if err := f.readGuestAttributes(i, n.Name, raw); err != nil { // maintenance.go
				return Fleet{}, err
			}
		}
	}
	if f.QueuedResources, err = fleetjson.Resources[tpu.QueuedResource]("queuedResources", rawQRs); err != nil {
		return Fleet{}, err
	}
	if err := f.validate(); err != nil {
		return Fleet{}, err
	}
	return f, nil
}

// ReadFleetFile reads the fleet file at path (see ReadFleet).
func ReadFleetFile(path string) (Fleet, error) { return fleetjson.ReadFile(path, ReadFleet) }

// Write writes f in the fleet file format, indented: a JSON array of nodes
// when there are no queued resources, else the object form.
func (f Fleet) Write(w io.Writer) error {
	var v any = f
	if len(f.QueuedResources) == 0 {
		nodes := f.Nodes
		if nodes == nil {
			nodes = []*tpu.Node{}
		}
		v = nodes
	} else if f.Nodes == nil {
		f.Nodes = []*tpu.Node{}
		v = f
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("fleet: encode: %w", err)
	}
	data = append(data, '\n')
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("fleet: write: %w", err)
	}
	return nil
}

// validate checks what the fake relies on: full, unique resource names and
// queued resources whose node specs can be turned into nodes.
func (f Fleet) validate() error {
	seen := map[string]int{}
	for i, n := range f.Nodes {
		at := fmt.Sprintf("nodes[%d]", i)
		if n == nil {
			return fmt.Errorf("fleet: %s: null node", at)
		}
		if err := checkName(at+".name", n.Name, nodeNameRE, "projects/P/locations/Z/nodes/N"); err != nil {
			return err
		}
		if j, dup := seen[n.Name]; dup {
			return fmt.Errorf("fleet: %s.name: %q is a duplicate of nodes[%d]", at, n.Name, j)
		}
		seen[n.Name] = i
		if n.QueuedResource != "" && !qrNameRE.MatchString(n.QueuedResource) {
			return fmt.Errorf("fleet: %s.queuedResource: %q is not a full resource name (want projects/P/locations/Z/queuedResources/Q)", at, n.QueuedResource)
		}
	}
	seenQR := map[string]int{}
	for i, q := range f.QueuedResources {
		at := fmt.Sprintf("queuedResources[%d]", i)
		if q == nil {
			return fmt.Errorf("fleet: %s: null queued resource", at)
		}
		if err := checkName(at+".name", q.Name, qrNameRE, "projects/P/locations/Z/queuedResources/Q"); err != nil {
			return err
		}
		if j, dup := seenQR[q.Name]; dup {
			return fmt.Errorf("fleet: %s.name: %q is a duplicate of queuedResources[%d]", at, q.Name, j)
		}
		seenQR[q.Name] = i
		if q.Tpu == nil || len(q.Tpu.NodeSpec) == 0 {
			return fmt.Errorf("fleet: %s.tpu.nodeSpec: missing (a queued resource needs the spec of its nodes)", at)
		}
		for j, spec := range q.Tpu.NodeSpec {
			sat := fmt.Sprintf("%s.tpu.nodeSpec[%d]", at, j)
			if spec == nil {
				return fmt.Errorf("fleet: %s: null node spec", sat)
			}
			if !locationNameRE.MatchString(spec.Parent) {
				return fmt.Errorf("fleet: %s.parent: %q is not a location (want projects/P/locations/Z)", sat, spec.Parent)
			}
			if spec.Node == nil {
				return fmt.Errorf("fleet: %s.node: missing", sat)
			}
			switch {
			case spec.MultisliceParams != nil:
				if spec.MultisliceParams.NodeCount < 1 {
					return fmt.Errorf("fleet: %s.multisliceParams.nodeCount: %d, want at least 1", sat, spec.MultisliceParams.NodeCount)
				}
				if prefix := spec.MultisliceParams.NodeIdPrefix; prefix == "" && spec.NodeId == "" {
					return fmt.Errorf("fleet: %s.multisliceParams.nodeIdPrefix: missing (and no nodeId)", sat)
				}
			case !resourceIDRE.MatchString(spec.NodeId):
				return fmt.Errorf("fleet: %s.nodeId: %q is not a valid node id", sat, spec.NodeId)
			}
		}
	}
	return nil
}

func checkName(at, name string, re *regexp.Regexp, want string) error {
	if name == "" {
		return fmt.Errorf("fleet: %s: missing (want the full resource name %s)", at, want)
	}
	if !re.MatchString(name) {
		return fmt.Errorf("fleet: %s: %q is not a full resource name (want %s)", at, name, want)
	}
	id := name[strings.LastIndex(name, "/")+1:]
	if !resourceIDRE.MatchString(id) {
		return fmt.Errorf("fleet: %s: %q: id %q must be lower-case letters, digits and hyphens, starting with a letter", at, name, id)
	}
	return nil
}
