package computefake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// operation is a zone operation: what a mutating call answers, DONE at
// doneAt on the server's clock, with or without error.
type operation struct {
	res    *compute.Operation
	method string // instances.insert, …
	doneAt time.Time
	fault  *opFault
	end    func(ok bool) // what the method does when the operation ends; ok is applies()
	onDone []func()      // after it ended (its last audit entry)
}

// opFault is the error an operation ends with, and whether its effect
// happened anyway.
type opFault struct {
	code       string // error.errors[].code: ZONE_RESOURCE_POOL_EXHAUSTED, …
	message    string
	details    []*compute.OperationErrorErrorsErrorDetails
	httpStatus int
	applied    bool
}

// applies reports whether the operation's effect happens: it succeeds, or it
// fails after having taken effect.
func (op *operation) applies() bool { return op.fault == nil || op.fault.applied }

// newOperation registers the operation a call of method (e.g.
// "instances.stop") starts on target; fail, when it asks for it, decides the
// error the operation ends with. The operation is RUNNING; launch ends it.
// Called with s.mu held.
func (s *Server) newOperation(method string, target ref, targetID uint64, fail *FailRule) *operation {
	s.opSeq++
	now := s.at()
	// Compute Engine's operation names: operation-<unix ms>-<13 hex>-<8 hex>-<8 hex>.
	name := fmt.Sprintf("operation-%d-%013x-%08x-%08x", now.UnixMilli(), uint64(s.opSeq)*0x9e3779b1, uint32(s.opSeq*2654435761), uint32(s.opSeq))
	zp := zonePath(target.project, target.zone)
	op := &operation{
		method: method,
		res: &compute.Operation{
			Kind:          "compute#operation",
			Id:            s.newID(),
			Name:          name,
			OperationType: verbOf(method),
			Status:        "RUNNING",
			Progress:      0,
			InsertTime:    stamp(now),
			StartTime:     stamp(now),
			SelfLink:      selfLink(zp + "/operations/" + name),
			TargetLink:    selfLink(target.String()),
			TargetId:      targetID,
			User:          s.caller,
			Zone:          zoneURL(target.project, target.zone),
		},
	}
	if fail != nil && fail.OperationError {
		op.fault = fail.opFault(target)
	}
	s.ops[name] = op
	return op
}

// verbOf is the operationType of method: its verb (instances.insert → insert).
func verbOf(method string) string { return method[strings.LastIndexByte(method, '.')+1:] }

// launch ends op after d on the server's clock (at once for d <= 0), calling
// end. Called with s.mu held.
func (s *Server) launch(op *operation, d time.Duration, end func(ok bool)) *operation {
	op.end = end
	op.doneAt = s.at().Add(d)
	if d <= 0 {
		s.finish(op)
		return op
	}
	s.after(d, func() { s.finish(op) })
	return op
}

// finish ends op: DONE, with its fault's error if it has one, and the
// method's effect when it applies. Called with s.mu held.
func (s *Server) finish(op *operation) {
	if op.res.Status == "DONE" {
		return
	}
	if op.end != nil {
		op.end(op.applies())
	}
	op.res.Status = "DONE"
	op.res.Progress = 100
	op.res.EndTime = stamp(s.at())
	if f := op.fault; f != nil {
		op.res.Error = &compute.OperationError{Errors: []*compute.OperationErrorErrors{{
			Code: f.code, Message: f.message, ErrorDetails: f.details,
		}}}
		op.res.HttpErrorStatusCode = int64(f.httpStatus)
		op.res.HttpErrorMessage = httpErrorMessage(f.httpStatus)
	} else {
		s.succeeded[op.method]++
	}
	for _, f := range op.onDone {
		f()
	}
	op.onDone = nil
	s.retire(op)
}

// httpErrorMessage is the httpErrorMessage Compute Engine writes beside
// httpErrorStatusCode: the status text in capitals ("SERVICE UNAVAILABLE").
func httpErrorMessage(code int) string {
	b := []byte(http.StatusText(code))
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// finishedOp is a finished operation's name and when it finished.
type finishedOp struct {
	name string
	at   time.Time
}

// retire queues the finished op and forgets the oldest beyond the retention
// that finished at least OperationMinAge ago. Called with s.mu held.
func (s *Server) retire(op *operation) {
	if s.opKeep <= 0 {
		return
	}
	now := s.at()
	s.finished = append(s.finished, finishedOp{name: op.res.Name, at: now})
	for len(s.finished)-s.finHead > s.opKeep {
		old := s.finished[s.finHead]
		if now.Sub(old.at) < OperationMinAge {
			break
		}
		delete(s.ops, old.name)
		s.finished[s.finHead] = finishedOp{}
		s.finHead++
	}
	if s.finHead > len(s.finished)/2 && s.finHead > 64 {
		s.finished = append(s.finished[:0], s.finished[s.finHead:]...)
		s.finHead = 0
	}
}

// getOperation answers zoneOperations.get (and wait's first look). Called
// with s.mu held.
func (s *Server) getOperation(t ref) (*compute.Operation, *apiError) {
	op, ok := s.ops[t.name]
	if !ok || op.res.Zone != zoneURL(t.project, t.zone) {
		return nil, notFound(t.String())
	}
	return clone(op.res), nil
}

// refreshed is the current state of the operation res names (a call's
// operation may have ended in the tick after it started). Called with s.mu held.
func (s *Server) refreshed(res *compute.Operation) *compute.Operation {
	if op, ok := s.ops[res.Name]; ok {
		return clone(op.res)
	}
	return res
}

// holdWait holds a zoneOperations.wait until its operation is DONE, the
// caller gives up, or the wait timeout passes (WithWaitTimeout); it checks
// the server's clock every few milliseconds of real time.
func (s *Server) holdWait(ctx context.Context, key string, op *compute.Operation) *compute.Operation {
	if s.waitTimeout <= 0 || op.Status == "DONE" {
		return op
	}
	deadline := time.NewTimer(s.waitTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return op
		case <-s.closing:
			return op
		case <-deadline.C:
			return op
		case <-poll.C:
		}
		s.mu.Lock()
		s.tick()
		op = s.refreshed(op)
		s.mu.Unlock()
		if op.Status == "DONE" {
			return op
		}
	}
}

// requestID is a remembered requestId: the operation its first call started.
type requestID struct {
	op string
	at time.Time
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// repeatedRequest answers a mutating call whose requestId was seen within
// RequestIDWindow with the first call's operation, doing nothing again; done
// is false for a new request. A requestId that is not a UUID is refused, as
// Compute Engine does. Called with s.mu held.
func (s *Server) repeatedRequest(rt route, id string) (op *compute.Operation, e *apiError, done bool) {
	if id == "" {
		return nil, nil, false
	}
	if !uuidRE.MatchString(id) || id == "00000000-0000-0000-0000-000000000000" {
		return nil, invalid("requestId", id, "The request ID must be a valid UUID with the exception that zero UUID is not supported."), true
	}
	seen, ok := s.reqIDs[rt.method+"|"+rt.resource+"|"+id]
	if !ok || s.at().Sub(seen.at) > RequestIDWindow {
		return nil, nil, false
	}
	if o, ok := s.ops[seen.op]; ok {
		return clone(o.res), nil, true
	}
	return nil, nil, false
}

// rememberRequest remembers the operation a call with a requestId started.
// Called with s.mu held.
func (s *Server) rememberRequest(rt route, id string, op *operation) {
	if id == "" || op == nil {
		return
	}
	s.reqIDs[rt.method+"|"+rt.resource+"|"+id] = requestID{op: op.res.Name, at: s.at()}
	if len(s.reqIDs) > 4*max(s.opKeep, 1024) {
		for k, v := range s.reqIDs {
			if s.at().Sub(v.at) > RequestIDWindow {
				delete(s.reqIDs, k)
			}
		}
	}
}

// clone deep-copies a resource through its JSON form, as a client would see it.
func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("computefake: clone %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("computefake: clone %T: %v", v, err))
	}
	return out
}
