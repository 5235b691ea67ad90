package tpufake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// Queued resources a caller creates (queuedResources.create) wait for
// capacity on the server's clock, as the real queue does:
//
//   - created WAITING_FOR_RESOURCES; the create's operation finishes like
//     any other (polls or WithOperationDelay("create"));
//   - the zone has capacity for it when no capacity outage covers its
//     nodes: a FailRule on "operation:nodes.create" with Status
//     RESOURCE_EXHAUSTED (or Code 429), no Times, matching the zone (Zone)
//     or a node (Name), until its Until (zero: for ever). One rule is the
//     one outage that refuses direct creates and holds queued ones back;
//   - WithQueueProvisioning(d) after it was created and capacity is there,
//     its nodes are created READY (owned by it) and it turns ACTIVE; when
//     its valid-until (queueingPolicy.validUntilDuration or validUntilTime)
//     comes first, it turns FAILED, with no nodes, and stays so until it
//     is deleted (it holds quota, as the real one does);
//   - SuspendQueuedResource makes it SUSPENDED (its nodes gone), as a
//     preemption of a spot queued resource does;
//   - queuedResources.delete (force=true deletes its nodes too; without,
//     a queued resource with nodes is refused) makes it DELETING, and its
//     operation removes it and its nodes.

// WithQueueProvisioning sets how long a created queued resource takes,
// once its zone has capacity, to turn ACTIVE (default 0: on the first
// request at or after the capacity returned). A harness knob like the
// simulated Compute Engine's: no test sets it today (deadcode says so), it
// is there for a test of a slow queue.
func WithQueueProvisioning(d time.Duration) Option {
	return func(s *Server) { s.queueProvision = d }
}

// queuedInfo is what the server keeps of a queued resource created through
// the API, beside the resource itself.
type queuedInfo struct {
	created    time.Time
	validUntil time.Time // zero: no valid-until
}

// queuedRoute adds the queued resource routes parseRoute does not know:
// POST v2/{+parent}/queuedResources and DELETE v2/{+name}.
func queuedRoute(r *http.Request, rt route) route {
	if rt.rpc != "unknown" {
		return rt
	}
	path := strings.TrimPrefix(r.URL.Path, "/v2/")
	parts := strings.Split(path, "/")
	if len(parts) < 5 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "queuedResources" {
		return rt
	}
	loc := strings.Join(parts[:4], "/")
	switch {
	case len(parts) == 5 && r.Method == http.MethodPost:
		return route{rpc: "queuedResources.create", name: loc + "/queuedResources/" + r.URL.Query().Get("queuedResourceId"), parent: loc}
	case len(parts) == 6 && r.Method == http.MethodDelete && !strings.Contains(parts[5], ":"):
		return route{rpc: "queuedResources.delete", name: path}
	}
	return rt
}

// serveQueued carries out queuedResources.create and .delete.
func (s *Server) serveQueued(rt route, r *http.Request, body []byte) (any, *apiError) {
	if rt.rpc == "queuedResources.create" {
		return s.createQueuedResource(rt.parent, r.URL.Query().Get("queuedResourceId"), body)
	}
	return s.deleteQueuedResource(rt.name, r.URL.Query().Get("force") == "true")
}

func (s *Server) createQueuedResource(parent, id string, body []byte) (*tpu.Operation, *apiError) {
	if !resourceIDRE.MatchString(id) {
		return nil, errorf("INVALID_ARGUMENT", "invalid queuedResourceId %q: must be 1-63 lower-case letters, digits and hyphens, starting with a letter", id)
	}
	if _, loc := splitLocation(parent); loc == "-" || loc == "" {
		return nil, errorf("INVALID_ARGUMENT", "invalid parent %q: want projects/P/locations/ZONE", parent)
	}
	var q *tpu.QueuedResource
	if err := json.Unmarshal(body, &q); err != nil || q == nil {
		return nil, errorf("INVALID_ARGUMENT", "invalid queued resource: %v", err)
	}
	if q.Tpu == nil || len(q.Tpu.NodeSpec) == 0 {
		return nil, errorf("INVALID_ARGUMENT", "queuedResource.tpu.nodeSpec is required")
	}
	if q.Spot != nil && q.Guaranteed != nil {
		return nil, errorf("INVALID_ARGUMENT", "queuedResource: only one of spot and guaranteed may be set")
	}
	for i, spec := range q.Tpu.NodeSpec {
		switch {
		case spec == nil || spec.Node == nil:
			return nil, errorf("INVALID_ARGUMENT", "queuedResource.tpu.nodeSpec[%d].node is required", i)
		case spec.Parent != parent:
			return nil, errorf("INVALID_ARGUMENT", "queuedResource.tpu.nodeSpec[%d].parent %q: want the queued resource's parent %q", i, spec.Parent, parent)
		case spec.MultisliceParams == nil && !resourceIDRE.MatchString(spec.NodeId):
			return nil, errorf("INVALID_ARGUMENT", "queuedResource.tpu.nodeSpec[%d].nodeId %q is invalid", i, spec.NodeId)
		case spec.Node.AcceleratorType == "" && spec.Node.AcceleratorConfig == nil:
			return nil, errorf("INVALID_ARGUMENT", "queuedResource.tpu.nodeSpec[%d].node.acceleratorType or acceleratorConfig is required", i)
		case spec.Node.RuntimeVersion == "":
			return nil, errorf("INVALID_ARGUMENT", "queuedResource.tpu.nodeSpec[%d].node.runtimeVersion is required", i)
		}
	}
	name := parent + "/queuedResources/" + id

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.qrs[name]; ok {
		return nil, errorf("ALREADY_EXISTS", "Resource '%s' already exists", name)
	}
	info := &queuedInfo{created: s.now()}
	if p := q.QueueingPolicy; p != nil {
		switch {
		case p.ValidUntilDuration != "":
			d, err := parseProtoDuration(p.ValidUntilDuration)
			if err != nil {
				return nil, errorf("INVALID_ARGUMENT", "queueingPolicy.validUntilDuration %q: %v", p.ValidUntilDuration, err)
			}
			info.validUntil = info.created.Add(d)
		case p.ValidUntilTime != "":
			t, err := time.Parse(time.RFC3339Nano, p.ValidUntilTime)
			if err != nil {
				return nil, errorf("INVALID_ARGUMENT", "queueingPolicy.validUntilTime %q: %v", p.ValidUntilTime, err)
			}
			info.validUntil = t
		}
	}
	q.Name = name
	q.CreateTime = info.created.UTC().Format(time.RFC3339Nano)
	q.State = &tpu.QueuedResourceState{State: "WAITING_FOR_RESOURCES", StateInitiator: "USER"}
	s.qrs[name] = q
	s.remember(name)
	s.touchQR(name)
	if s.queued == nil {
		s.queued = map[string]*queuedInfo{}
	}
	s.queued[name] = info
	return s.launch(s.newOperation("queuedResources.create", "create", name)), nil
}

func (s *Server) deleteQueuedResource(name string, force bool) (*tpu.Operation, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.qrs[name]
	if !ok {
		return nil, notFound(name)
	}
	var owned []string
	for nn, n := range s.nodes {
		if n.QueuedResource == name {
			owned = append(owned, nn)
		}
	}
	if len(owned) > 0 && !force {
		return nil, errorf("FAILED_PRECONDITION", "queued resource '%s' has %d nodes: delete them first, or set force", name, len(owned))
	}
	for _, nn := range owned {
		s.touch(nn)
		s.nodes[nn].State = "DELETING"
	}
	s.touchQR(name)
	q.State = &tpu.QueuedResourceState{State: "DELETING", StateInitiator: "USER"}
	return s.launch(s.newOperation("queuedResources.delete", "delete", name)), nil
}

// SuspendQueuedResource makes a queued resource SUSPENDED and removes its
// nodes, as the platform does to a spot queued resource it preempts.
func (s *Server) SuspendQueuedResource(name string) error {
	s.runDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	q, ok := s.qrs[name]
	if !ok {
		return fmt.Errorf("tpufake: no queued resource %s", name)
	}
	s.removeQRNodes(name)
	s.touchQR(name)
	q.State = &tpu.QueuedResourceState{State: "SUSPENDED", StateInitiator: "SERVICE"}
	if info := s.queued[name]; info != nil {
		info.validUntil = time.Time{}
	}
	return nil
}

// tickQueued provisions or fails the created queued resources waiting for
// capacity, in the order they were created. Called with s.mu held, from
// tick.
func (s *Server) tickQueued() {
	if len(s.queued) == 0 {
		return
	}
	now := s.now()
	for _, name := range sortedKeys(s.order, s.queued) {
		info := s.queued[name]
		q, ok := s.qrs[name]
		if !ok {
			delete(s.queued, name) // deleted
			continue
		}
		if qrState(q) != "WAITING_FOR_RESOURCES" {
			continue
		}
		_, zone := splitLocation(name)
		nodes := specNodes(q)
		at, ok := s.capacityAt(zone, nodes)
		if ok {
			at = maxTime(at, info.created).Add(s.queueProvision)
		}
		switch {
		case ok && !at.After(now) && (info.validUntil.IsZero() || !at.After(info.validUntil)):
			s.touchQR(name)
			for _, sn := range nodes {
				if _, taken := s.nodes[sn.name]; taken {
					q.State = &tpu.QueuedResourceState{State: "FAILED", StateInitiator: "SERVICE", FailedData: &tpu.FailedData{
						Error: &tpu.Status{Code: int64(rpcCodes["ALREADY_EXISTS"]), Message: fmt.Sprintf("node '%s' already exists", sn.name)}}}
					break
				}
				s.startNode(sn.name, sn.node, name)
				s.readyNode(sn.name)
			}
			if qrState(q) == "WAITING_FOR_RESOURCES" {
				q.State = &tpu.QueuedResourceState{State: "ACTIVE", StateInitiator: "SERVICE", ActiveData: &tpu.ActiveData{}}
			}
		case !info.validUntil.IsZero() && !now.Before(info.validUntil):
			s.touchQR(name)
			q.State = &tpu.QueuedResourceState{State: "FAILED", StateInitiator: "SERVICE", FailedData: &tpu.FailedData{
				Error: &tpu.Status{Code: int64(rpcCodes["DEADLINE_EXCEEDED"]), Message: fmt.Sprintf(
					"queued resource request expired at %s (valid until) before capacity was available in zone %q", info.validUntil.UTC().Format(time.RFC3339), zone)}}}
		}
	}
}

// capacityAt is when zone has capacity for nodes again: the latest end of
// the capacity outages (see the comment at the top) covering them; ok is
// false when one of them never ends. Called with s.mu held.
func (s *Server) capacityAt(zone string, nodes []specNode) (at time.Time, ok bool) {
	for _, r := range s.rules {
		if r.RPC != "operation:nodes.create" || r.Times != 0 || r.Page != PageNone {
			continue
		}
		if _, status := normalize(r.Code, r.Status); status != "RESOURCE_EXHAUSTED" {
			continue
		}
		if r.Message != "" && strings.Contains(strings.ToLower(r.Message), "quota") {
			continue // a quota, not a stockout: the queue does not wait for it
		}
		covers := r.Zone == zone || (r.Zone == "" && r.Name == "")
		for _, sn := range nodes {
			covers = covers || (r.Zone == "" && r.Name == sn.name)
		}
		if !covers {
			continue
		}
		if r.Until.IsZero() {
			return time.Time{}, false
		}
		at = maxTime(at, r.Until)
	}
	return at, true
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// parseProtoDuration reads a google.protobuf.Duration's JSON form ("3600s",
// "1.5s").
func parseProtoDuration(v string) (time.Duration, error) {
	sec, ok := strings.CutSuffix(v, "s")
	if !ok {
		return 0, fmt.Errorf("want seconds such as 3600s")
	}
	f, err := strconv.ParseFloat(sec, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("want seconds such as 3600s")
	}
	return time.Duration(f * float64(time.Second)), nil
}
