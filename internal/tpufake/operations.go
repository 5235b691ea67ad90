package tpufake

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"
)

// operation is a long-running operation: create, delete or reset of target.
type operation struct {
	op           *tpu.Operation
	rpc          string // nodes.create, nodes.delete, queuedResources.reset
	target       string
	verb         string
	started      time.Time
	polls        int
	finishing    bool              // a poller is completing it (waiting on a rule's Delay)
	doneAt       time.Time         // WithOperationDelay: when it finishes by itself
	prevState    string            // nodes.delete: the node's state before DELETING
	nodeID       int64             // nodes.delete: the id of the node it deletes
	seq          int               // the order operations were started in
	person       string            // a person's operation (people.go): who; fail rules never apply
	prevMetadata map[string]string // nodes.patch: the metadata before
	audited      bool              // its first admin-activity entry was written (audit.go)
	silent       bool              // writes no audit entries (a person's act with NoAudit)
}

// newOperation registers an operation on target, in target's location.
// Called with s.mu held.
func (s *Server) newOperation(rpc, verb, target string) *operation {
	s.opSeq++
	project, location := splitLocation(target)
	op := &operation{
		rpc:     rpc,
		target:  target,
		verb:    verb,
		seq:     s.opSeq,
		started: s.now(),
		op: &tpu.Operation{
			Name: fmt.Sprintf("projects/%s/locations/%s/operations/operation-%d", project, location, s.opSeq),
		},
	}
	op.op.Metadata = s.metadata(op, time.Time{})
	if d, ok := s.delays[verb]; ok {
		op.doneAt = op.started.Add(d)
		s.timed[op] = struct{}{}
	}
	s.ops[op.op.Name] = op
	return op
}

// tick finishes every operation whose done-at time has come, whether polled
// or not. Called with s.mu held, first thing on every request. It looks
// only at the timed operations still running (s.timed), not every operation
// the server ever started: a long replay would otherwise pay for all its
// past recreates on every request.
func (s *Server) tick() {
	s.tickUntil(s.now())
	s.tickQueued() // queued.go
}

// tickUntil finishes the timed operations done by t, in the order of their
// done-at times (then of their start), so that a schedule replays the same
// whatever the map's order. Called with s.mu held.
func (s *Server) tickUntil(t time.Time) {
	if len(s.timed) == 0 {
		return
	}
	var due []*operation
	for op := range s.timed {
		if op.op.Done {
			delete(s.timed, op)
			continue
		}
		if !t.Before(op.doneAt) {
			due = append(due, op)
		}
	}
	slices.SortFunc(due, func(a, b *operation) int {
		if c := a.doneAt.Compare(b.doneAt); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	for _, op := range due {
		if !op.op.Done {
			s.finish(op, s.matchOp(op))
		}
	}
}

// launch returns the operation as the starting call answers it; with
// WithOperationPolls(n <= 0) it is already done. Called with s.mu held.
func (s *Server) launch(op *operation) *tpu.Operation {
	s.auditFirst(op) // audit.go
	if op.doneAt.IsZero() && s.polls <= 0 || !op.doneAt.IsZero() && !s.now().Before(op.doneAt) {
		s.finish(op, s.matchOp(op))
	}
	return clone(op.op)
}

// matchOp is the operation: rule that ends op, or nil: never one for a
// person's operation. Called with s.mu held.
func (s *Server) matchOp(op *operation) *FailRule {
	if op.person != "" {
		return nil
	}
	return s.match("operation:"+op.rpc, op.target)
}

func (s *Server) metadata(op *operation, end time.Time) googleapi.RawMessage {
	md := map[string]any{
		"@type":      "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata",
		"createTime": op.started.UTC().Format(time.RFC3339Nano),
		"target":     op.target,
		"verb":       op.verb,
		"apiVersion": "v2",
	}
	if !end.IsZero() {
		md["endTime"] = end.UTC().Format(time.RFC3339Nano)
	}
	return typed(md, "")
}

// getOperation answers operations.get; the poll that reaches the configured
// count completes the operation.
func (s *Server) getOperation(ctx context.Context, name string) (*tpu.Operation, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op, ok := s.ops[name]
	if !ok {
		return nil, notFound(name)
	}
	if op.op.Done || op.finishing || !op.doneAt.IsZero() {
		return clone(op.op), nil // a delayed operation finishes by tick alone
	}
	op.polls++
	if op.polls < s.polls {
		return clone(op.op), nil
	}
	fail := s.matchOp(op)
	if fail != nil && fail.Delay > 0 {
		op.finishing = true
		s.mu.Unlock()
		waited := s.wait(ctx, fail.Delay)
		s.mu.Lock()
		op.finishing = false
		if !waited {
			return nil, errorf("CANCELLED", "request cancelled during injected delay")
		}
	}
	s.finish(op, fail)
	return clone(op.op), nil
}

// finish completes op, failing it when fail says so: a clean failure,
// a failure after the effect took place, or one leaving the resource
// half-way (faults.go). Called with s.mu held.
func (s *Server) finish(op *operation, fail *FailRule) {
	var status *tpu.Status
	effect := EffectNone
	if fail != nil {
		effect = fail.effect()
		e := fail.err("operation:"+op.rpc, op.target)
		if e == nil && effect != EffectNone {
			e = errorf("INTERNAL", "tpufake: operation %s on %s failed after its effect", op.rpc, op.target)
		}
		if e != nil {
			msg := e.Message
			if fail.Message == "" && e.Status == "RESOURCE_EXHAUSTED" && op.rpc == "nodes.create" {
				_, zone := splitLocation(op.target)
				msg = fmt.Sprintf("There is no more capacity in the zone %q; you can try in another zone where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions)", zone)
			}
			status = &tpu.Status{Code: int64(rpcCodes[e.Status]), Message: msg}
			if _, known := rpcCodes[e.Status]; !known {
				status.Code = int64(rpcCodes["UNKNOWN"])
			}
		}
	}
	switch {
	case status == nil || effect == EffectNow:
		if !s.land(op) && status == nil {
			status = s.changedUnder(op)
		}
	case effect == EffectLater || effect == EffectStuck:
		// Half-way: the resource stays DELETING, CREATING, resetting or in
		// maintenance; EffectLater lands the effect later.
		if effect == EffectLater {
			s.deferAt(s.now().Add(fail.EffectDelay), func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.land(op)
			})
		}
	default:
		s.rollBack(op, status)
	}
	if status == nil && op.rpc == "nodes.delete" {
		op.op.Response = typed(map[string]any{}, "google.protobuf.Empty")
	}
	if !op.op.Done {
		s.retire(op)
	}
	op.op.Done = true
	delete(s.timed, op)
	op.op.Error = status
	if status == nil && op.person == "" {
		s.succeeded[op.rpc]++
	}
	if status != nil || op.rpc != "nodes.delete" {
		// Keep no resource beyond what a poll needs: a done create's
		// response would hold the node's whole spec (its startup script),
		// for as long as the server runs.
		op.op.Response = nil
		if status == nil {
			op.op.Response = typed(map[string]any{"name": op.target}, responseType[op.rpc])
		}
	}
	op.op.Metadata = s.metadata(op, s.now())
	s.auditLast(op) // audit.go
}

// land makes op's effect happen: the created node READY, the deleted node
// gone, the queued resource's nodes created again, the maintenance over. It
// reports false when the resource changed under the operation (a node no
// longer CREATING, a queued resource deleted). Called with s.mu held, when
// op finishes or, for a late effect, when it lands.
func (s *Server) land(op *operation) bool {
	switch op.rpc {
	case "nodes.create":
		n, ok := s.nodes[op.target]
		if !ok || n.State != "CREATING" {
			return false
		}
		s.readyNode(op.target)
	case "nodes.delete":
		// The node it was started on, not one created since under its name.
		if n, ok := s.nodes[op.target]; ok && n.Id == op.nodeID {
			s.removeNode(op.target)
		}
	case "queuedResources.reset":
		q, ok := s.qrs[op.target]
		if !ok {
			return false
		}
		s.removeQRNodes(op.target)
		for _, sn := range specNodes(q) {
			s.startNode(sn.name, sn.node, op.target)
			s.readyNode(sn.name)
		}
		s.touchQR(op.target)
		q.State = &tpu.QueuedResourceState{State: "ACTIVE", StateInitiator: "USER", ActiveData: &tpu.ActiveData{}}
	case "nodes.performMaintenance", "queuedResources.performMaintenanceQueuedResource":
		s.finishMaintenance(op, nil) // maintenance.go
	case "nodes.patch":
		s.finishPatch(op) // maintenance.go
	case "nodes.stop": // a person's (people.go)
		if n, ok := s.nodes[op.target]; ok && n.State == "STOPPING" {
			s.touch(op.target)
			n.State = "STOPPED"
		}
	case "queuedResources.delete": // a person's (people.go)
		if _, ok := s.qrs[op.target]; ok {
			s.removeQRNodes(op.target)
			s.touchQR(op.target)
			delete(s.qrs, op.target)
		}
	}
	return true
}

// changedUnder is the error of an operation whose resource changed under
// it (land said false).
func (s *Server) changedUnder(op *operation) *tpu.Status {
	if op.rpc == "queuedResources.reset" {
		return &tpu.Status{Code: int64(rpcCodes["ABORTED"]), Message: fmt.Sprintf("queued resource '%s' was deleted while it was being reset", op.target)}
	}
	return &tpu.Status{Code: int64(rpcCodes["ABORTED"]), Message: fmt.Sprintf("node '%s' changed while it was being created", op.target)}
}

// rollBack undoes what a cleanly failed operation started: a created node
// is removed, a deleted one back in its state before, a reset queued
// resource FAILED without its nodes, a maintenance not started. Called with
// s.mu held.
func (s *Server) rollBack(op *operation, status *tpu.Status) {
	switch op.rpc {
	case "nodes.create":
		if n, ok := s.nodes[op.target]; ok && n.State == "CREATING" {
			s.removeNode(op.target)
		}
	case "queuedResources.create": // queued.go
		if _, ok := s.qrs[op.target]; ok {
			s.touchQR(op.target)
			delete(s.qrs, op.target)
		}
	case "queuedResources.delete":
		if q, ok := s.qrs[op.target]; ok && qrState(q) == "DELETING" {
			s.touchQR(op.target)
			q.State = &tpu.QueuedResourceState{State: "FAILED", StateInitiator: "SERVICE", FailedData: &tpu.FailedData{Error: status}}
		}
	case "nodes.delete":
		if n, ok := s.nodes[op.target]; ok && n.State == "DELETING" && n.Id == op.nodeID {
			s.touch(op.target)
			n.State = op.prevState
		}
	case "queuedResources.reset":
		q, ok := s.qrs[op.target]
		if !ok {
			return
		}
		s.removeQRNodes(op.target)
		s.touchQR(op.target)
		q.State = &tpu.QueuedResourceState{State: "FAILED", StateInitiator: "SERVICE", FailedData: &tpu.FailedData{Error: status}}
	case "nodes.performMaintenance", "queuedResources.performMaintenanceQueuedResource":
		s.finishMaintenance(op, status) // maintenance.go
	case "nodes.patch":
		s.rollBackPatch(op) // maintenance.go
	}
}

// removeQRNodes deletes the nodes of queued resource qr. Called with s.mu
// held.
func (s *Server) removeQRNodes(qr string) {
	for name, n := range s.nodes {
		if n.QueuedResource == qr {
			s.removeNode(name)
		}
	}
}

// retire adds the finished op to the queue of finished operations and
// forgets the oldest ones beyond the retention (WithOperationRetention)
// that finished at least OperationMinAge ago on the server's clock, so a
// server that ran a million operations holds a bounded number, and a
// caller always sees the operation it started done, however many others
// finished meanwhile (a replayed wave finishes thousands on one tick).
// Called with s.mu held.
func (s *Server) retire(op *operation) {
	if s.opKeep <= 0 {
		return
	}
	now := s.now()
	s.finished = append(s.finished, finishedOp{name: op.op.Name, at: now})
	for len(s.finished)-s.finHead > s.opKeep {
		old := s.finished[s.finHead]
		if now.Sub(old.at) < OperationMinAge {
			break
		}
		delete(s.ops, old.name)
		delete(s.counts, countKey{"operations.get", old.name}) // its polls go with it
		s.finished[s.finHead] = finishedOp{}
		s.finHead++
	}
	if s.finHead > len(s.finished)/2 && s.finHead > 64 {
		s.finished = append(s.finished[:0], s.finished[s.finHead:]...)
		s.finHead = 0
	}
}

// finishedOp is a finished operation's name and when it finished.
type finishedOp struct {
	name string
	at   time.Time
}

// responseType is the response message of each operation.
var responseType = map[string]string{
	"nodes.create":           "google.cloud.tpu.v2.Node",
	"nodes.delete":           "google.protobuf.Empty",
	"queuedResources.reset":  "google.cloud.tpu.v2.QueuedResource",
	"queuedResources.create": "google.cloud.tpu.v2.QueuedResource",
	"queuedResources.delete": "google.protobuf.Empty",
}

// typed is v's JSON object with an "@type" (google.protobuf.Any) added.
func typed(v any, typeName string) googleapi.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tpufake: encode %T: %v", v, err))
	}
	if typeName == "" {
		return data
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		panic(fmt.Sprintf("tpufake: encode %T: %v", v, err))
	}
	m["@type"], _ = json.Marshal("type.googleapis.com/" + strings.TrimPrefix(typeName, "type.googleapis.com/"))
	data, _ = json.Marshal(m)
	return data
}
