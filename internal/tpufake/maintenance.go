package tpufake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/api/option"
	tpu "google.golang.org/api/tpu/v2"
)

// Maintenance in the simulated control plane:
//
//   - nodes carry upcomingMaintenance as given (fleet file, SetNode);
//   - nodes.patch (v2, updateMask "metadata" only) replaces a node's
//     metadata at once and answers an operation;
//   - nodes.getGuestAttributes (v2) answers the guest attributes of each
//     worker, from the fleet file (a node's "guestAttributes") or
//     SetGuestAttribute;
//   - v2alpha1 nodes.performMaintenance and
//     queuedResources.performMaintenanceQueuedResource, accepted only for
//     a PENDING notice with canReschedule (else FAILED_PRECONDITION), put the
//     node in maintenance (REPAIRING, UNHEALTHY_MAINTENANCE, notice ONGOING);
//     when the operation completes (its polls, or at once with
//     WithOperationPolls(0), or EndMaintenance) the node is READY and
//     HEALTHY again with no upcomingMaintenance, or TERMINATED when
//     SetMaintenanceOutcome said so.

// GuestAttribute is one guest attribute of one worker, as a fleet file
// node's "guestAttributes" lists them.
type GuestAttribute struct {
	Worker    string `json:"worker"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Value     string `json:"value"`
}

// maintState is the Server's maintenance state. Guarded by Server.mu.
type maintState struct {
	guest   map[string][]GuestAttribute // node → attributes
	outcome map[string]string           // node → state after its maintenance ("" = READY)
	inMaint map[string]string           // node → the maintenance operation under way
	during  [2]string                   // WithMaintenanceNodeState: state and health in maintenance
}

func (m *maintState) init() {
	if m.guest == nil {
		m.guest, m.outcome, m.inMaint = map[string][]GuestAttribute{}, map[string]string{}, map[string]string{}
	}
}

// readGuestAttributes reads nodes[i]'s "guestAttributes" from its raw JSON
// (a field of the fleet file, not of the TPU API's Node).
func (f *Fleet) readGuestAttributes(i int, name string, raw json.RawMessage) error {
	var extra struct {
		GuestAttributes []GuestAttribute `json:"guestAttributes"`
	}
	if err := json.Unmarshal(raw, &extra); err != nil {
		return fmt.Errorf("fleet: nodes[%d].guestAttributes: %w", i, err)
	}
	for j, a := range extra.GuestAttributes {
		if a.Worker == "" || a.Namespace == "" || a.Key == "" {
			return fmt.Errorf("fleet: nodes[%d].guestAttributes[%d]: worker, namespace and key must be set", i, j)
		}
	}
	if len(extra.GuestAttributes) == 0 {
		return nil
	}
	if f.GuestAttributes == nil {
		f.GuestAttributes = map[string][]GuestAttribute{}
	}
	f.GuestAttributes[name] = extra.GuestAttributes
	return nil
}

// seedMaintenance takes the fleet's guest attributes. Called from New.
func (s *Server) seedMaintenance(f Fleet) {
	s.maint.init()
	for name, attrs := range f.GuestAttributes {
		s.maint.guest[name] = append([]GuestAttribute(nil), attrs...)
	}
}

// SetGuestAttribute sets (or replaces) one guest attribute of a worker of
// node, as the guest's PUT to its metadata server would.
func (s *Server) SetGuestAttribute(node string, a GuestAttribute) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maint.init()
	attrs := s.maint.guest[node]
	for i, old := range attrs {
		if old.Worker == a.Worker && old.Namespace == a.Namespace && old.Key == a.Key {
			attrs[i] = a
			return
		}
	}
	s.maint.guest[node] = append(attrs, a)
}

// SetMaintenanceOutcome says what state node is in when its maintenance
// ends: "TERMINATED" (it does not come back by itself) or "" (READY).
func (s *Server) SetMaintenanceOutcome(node, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maint.init()
	s.maint.outcome[node] = state
}

// EndMaintenance ends the node's maintenance now, as its operation
// completing does. It reports whether one was under way.
func (s *Server) EndMaintenance(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maint.init()
	opName, ok := s.maint.inMaint[node]
	if !ok {
		return false
	}
	if op := s.ops[opName]; op != nil && !op.op.Done {
		s.finish(op, nil)
		return true
	}
	s.endMaintenance(node)
	return true
}

// maintenanceRoute maps the maintenance paths (tpu-gen.go of v2 and
// v2alpha1): PATCH v2/{+name}, POST v2/{+name}:getGuestAttributes, POST
// v2alpha1/{+name}:performMaintenance and
// v2alpha1/{+name}:performMaintenanceQueuedResource. rt is parseRoute's.
func maintenanceRoute(r *http.Request, rt route) route {
	path, alpha := strings.TrimPrefix(r.URL.Path, "/v2alpha1/"), true
	if path == r.URL.Path {
		path, alpha = strings.TrimPrefix(r.URL.Path, "/v2/"), false
		if path == r.URL.Path {
			return rt
		}
	}
	parts := strings.Split(path, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "locations" {
		return rt
	}
	switch {
	case !alpha && parts[4] == "nodes" && r.Method == http.MethodPatch && !strings.Contains(parts[5], ":"):
		return route{rpc: "nodes.patch", name: path}
	case !alpha && parts[4] == "nodes" && r.Method == http.MethodPost && strings.HasSuffix(path, ":getGuestAttributes"):
		return route{rpc: "nodes.getGuestAttributes", name: strings.TrimSuffix(path, ":getGuestAttributes")}
	case alpha && parts[4] == "nodes" && r.Method == http.MethodPost && strings.HasSuffix(path, ":performMaintenance"):
		return route{rpc: "nodes.performMaintenance", name: strings.TrimSuffix(path, ":performMaintenance")}
	case alpha && parts[4] == "queuedResources" && r.Method == http.MethodPost && strings.HasSuffix(path, ":performMaintenanceQueuedResource"):
		return route{rpc: "queuedResources.performMaintenanceQueuedResource", name: strings.TrimSuffix(path, ":performMaintenanceQueuedResource")}
	}
	return rt
}

// serveMaintenance answers the maintenance RPCs.
func (s *Server) serveMaintenance(rt route, r *http.Request, body []byte) (any, *apiError) {
	switch rt.rpc {
	case "nodes.patch":
		return s.patchNode(rt.name, r.URL.Query().Get("updateMask"), body)
	case "nodes.getGuestAttributes":
		return s.getGuestAttributes(rt.name, body)
	case "nodes.performMaintenance":
		return s.performMaintenance(rt.rpc, rt.name, []string{rt.name})
	case "queuedResources.performMaintenanceQueuedResource":
		var req struct {
			NodeNames []string `json:"nodeNames"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, errorf("INVALID_ARGUMENT", "invalid JSON body: %v", err)
		}
		return s.performMaintenance(rt.rpc, rt.name, req.NodeNames)
	}
	return nil, errorf("UNIMPLEMENTED", "tpufake does not implement %s", rt.rpc)
}

func (s *Server) patchNode(name, mask string, body []byte) (*tpu.Operation, *apiError) {
	if mask == "" {
		return nil, errorf("INVALID_ARGUMENT", "updateMask is required")
	}
	for _, f := range strings.Split(mask, ",") {
		if f != "metadata" {
			return nil, errorf("INVALID_ARGUMENT", "tpufake: updateMask %q: only metadata can be patched here", f)
		}
	}
	var patch tpu.Node
	if err := json.Unmarshal(body, &patch); err != nil {
		return nil, errorf("INVALID_ARGUMENT", "invalid JSON body: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return nil, notFound(name)
	}
	op := s.newOperation("nodes.patch", "update", name)
	op.prevMetadata = n.Metadata
	s.touch(name)
	n.Metadata = patch.Metadata
	s.internMetadata(n)
	return s.launch(op), nil
}

func (s *Server) getGuestAttributes(name string, body []byte) (*tpu.GetGuestAttributesResponse, *apiError) {
	var req tpu.GetGuestAttributesRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, errorf("INVALID_ARGUMENT", "invalid JSON body: %v", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maint.init()
	n, ok := s.nodes[name]
	if !ok {
		return nil, notFound(name)
	}
	ids := req.WorkerIds
	if len(ids) == 0 {
		count := len(n.NetworkEndpoints)
		if count == 0 {
			count = 1
		}
		for w := range count {
			ids = append(ids, fmt.Sprint(w))
		}
	}
	resp := &tpu.GetGuestAttributesResponse{}
	for _, w := range ids {
		ga := &tpu.GuestAttributes{QueryPath: req.QueryPath, QueryValue: &tpu.GuestAttributesValue{}}
		for _, a := range s.maint.guest[name] {
			if a.Worker == w && queryMatches(req.QueryPath, a) {
				ga.QueryValue.Items = append(ga.QueryValue.Items, &tpu.GuestAttributesEntry{Namespace: a.Namespace, Key: a.Key, Value: a.Value})
			}
		}
		resp.GuestAttributes = append(resp.GuestAttributes, ga)
	}
	return resp, nil
}

// queryMatches: "" or "/" is everything, "ns/" or "ns" a namespace,
// "ns/key" one key.
func queryMatches(q string, a GuestAttribute) bool {
	q = strings.TrimPrefix(q, "/")
	if q == "" {
		return true
	}
	ns, key, _ := strings.Cut(q, "/")
	return ns == a.Namespace && (key == "" || key == a.Key)
}

func (s *Server) performMaintenance(rpc, target string, nodes []string) (*tpu.Operation, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maint.init()
	if rpc == "queuedResources.performMaintenanceQueuedResource" {
		if _, ok := s.qrs[target]; !ok {
			return nil, notFound(target)
		}
		if len(nodes) == 0 {
			return nil, errorf("INVALID_ARGUMENT", "nodeNames: at least one node is required")
		}
	}
	for _, name := range nodes {
		n, ok := s.nodes[name]
		if !ok {
			return nil, notFound(name)
		}
		if rpc == "queuedResources.performMaintenanceQueuedResource" && n.QueuedResource != target {
			return nil, errorf("INVALID_ARGUMENT", "node '%s' is not part of queued resource '%s'", name, target)
		}
		um := n.UpcomingMaintenance
		if um == nil || um.MaintenanceStatus != "PENDING" || !um.CanReschedule {
			return nil, errorf("FAILED_PRECONDITION", "node '%s' has no pending maintenance that can be rescheduled", name)
		}
	}
	op := s.newOperation(rpc, "performMaintenance", target)
	s.startMaintenance(op, nodes)
	return s.launch(op), nil
}

// startMaintenance puts nodes in the maintenance op carries out. Called with
// s.mu held.
func (s *Server) startMaintenance(op *operation, nodes []string) {
	s.maint.init()
	state, health := "REPAIRING", "UNHEALTHY_MAINTENANCE"
	if s.maint.during[0] != "" {
		state, health = s.maint.during[0], s.maint.during[1]
	}
	for _, name := range nodes {
		n, ok := s.nodes[name]
		if !ok {
			continue
		}
		s.touch(name)
		n.State, n.Health = state, health
		if n.UpcomingMaintenance == nil {
			n.UpcomingMaintenance = &tpu.UpcomingMaintenance{Type: "SCHEDULED", WindowStartTime: s.now().UTC().Format(time.RFC3339)}
		}
		n.UpcomingMaintenance.MaintenanceStatus = "ONGOING"
		s.maint.inMaint[name] = op.op.Name
	}
}

// WithMaintenanceNodeState sets the state and health of a node while its
// maintenance is under way (default REPAIRING, UNHEALTHY_MAINTENANCE; a
// real node may also show READY, UNHEALTHY_MAINTENANCE throughout).
func WithMaintenanceNodeState(state, health string) Option {
	return func(s *Server) { s.maint.during = [2]string{state, health} }
}

// finishMaintenance completes a maintenance operation. Called with s.mu
// held, from finish.
func (s *Server) finishMaintenance(op *operation, status *tpu.Status) {
	s.maint.init()
	for name, opName := range s.maint.inMaint {
		if opName != op.op.Name {
			continue
		}
		if status != nil {
			// The maintenance did not start: the notice is pending again.
			if n, ok := s.nodes[name]; ok && n.UpcomingMaintenance != nil {
				s.touch(name)
				n.State, n.Health = "READY", "HEALTHY"
				n.UpcomingMaintenance.MaintenanceStatus = "PENDING"
			}
			delete(s.maint.inMaint, name)
			continue
		}
		s.endMaintenance(name)
	}
}

// endMaintenance brings node out of maintenance. Called with s.mu held.
func (s *Server) endMaintenance(name string) {
	delete(s.maint.inMaint, name)
	n, ok := s.nodes[name]
	if !ok {
		return
	}
	s.touch(name)
	n.UpcomingMaintenance = nil
	n.HealthDescription = "The TPU had a maintenance event at " + s.now().UTC().Format(time.RFC3339Nano)
	if st := s.maint.outcome[name]; st != "" {
		n.State, n.Health = st, "UNHEALTHY_MAINTENANCE"
		return
	}
	n.State, n.Health = "READY", "HEALTHY"
}

// finishPatch completes a metadata patch, which took effect when it was
// asked for: nothing is left to do.
func (s *Server) finishPatch(*operation) {}

// rollBackPatch undoes a metadata patch whose operation failed cleanly.
// Called with s.mu held.
func (s *Server) rollBackPatch(op *operation) {
	if n, ok := s.nodes[op.target]; ok {
		s.touch(op.target)
		n.Metadata = op.prevMetadata
	}
}

// ClientOptions are the client options of a real Google API client (v2 or
// v2alpha1) talking to the server.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.URL() + "/"),
		option.WithoutAuthentication(),
		option.WithHTTPClient(s.srv.Client()),
	}
}
