package computefake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"
)

// DefaultPageSize is the page size of the list calls when a request sets no
// maxResults: Compute Engine's default (and its maximum).
const DefaultPageSize = 500

// DefaultRequestLog is how many requests Requests keeps by default: the log
// is a ring, so a long replay runs in constant memory.
const DefaultRequestLog = 256

// DefaultOperationRetention is how many finished operations the server keeps
// for zoneOperations.get by default (besides every one that finished less
// than OperationMinAge ago on the server's clock).
const DefaultOperationRetention = 4096

// OperationMinAge is how long, on the server's clock, a finished operation is
// kept whatever the retention.
const OperationMinAge = time.Hour

// RequestIDWindow is how long Compute Engine remembers a requestId: a call
// repeated with the same requestId within it returns the first call's
// operation and does nothing again (the documented idempotency of
// requestId: "for at least 60 minutes").
const RequestIDWindow = time.Hour

// DefaultCaller is the principal the fake writes as the user of operations
// started through the API and into their audit entries (WithCaller).
const DefaultCaller = "autoheal@autoheal-project.iam.gserviceaccount.com"

// Default durations on the server's clock (WithOperationDelay and the other
// With… options change them).
const (
	DefaultInsertTime       = 3 * time.Minute  // instances.insert: PROVISIONING → RUNNING
	DefaultDeleteTime       = time.Minute      // instances.delete
	DefaultStartTime        = 30 * time.Second // instances.start: → RUNNING
	DefaultStopTime         = time.Minute      // instances.stop: STOPPING → TERMINATED
	DefaultMetadataTime     = 2 * time.Second  // setMetadata, setLabels
	DefaultMaintenanceTime  = 20 * time.Minute // a maintenance, from its start to its end
	DefaultReportFaultyTime = 11 * time.Minute // reportHostAsFaulty: "usually takes 10-12 minutes"
	DefaultHostRepairTime   = 72 * time.Hour   // a host reported faulty: "3 to 14 days"
	DefaultRecreateTime     = 2 * time.Second  // instanceGroupManagers.recreateInstances: DONE once flagged
	DefaultRepairDelay      = 2 * time.Minute  // a MIG notices a broken instance and recreates it
	DefaultRestartDelay     = time.Minute      // automatic restart after a host error
)

// Option configures a Server.
type Option func(*Server)

// WithClock sets the server's clock (default time.Now): operation times,
// timestamps, timers and the request log all read it. Tests pass a virtual
// clock and move it by hand.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithOperationDelay sets how long the operations of method take on the
// server's clock: method is "insert", "delete", "start", "stop",
// "setMetadata", "setLabels", "performMaintenance" (the maintenance's length),
// "reportHostAsFaulty" or "recreateInstances" (the instances.* or
// instanceGroupManagers.* method without its collection). 0 makes the call
// answer an operation already DONE, its effect done.
func WithOperationDelay(method string, d time.Duration) Option {
	return func(s *Server) { s.delays[method] = max(d, 0) }
}

// WithRepairDelay, WithRestartDelay, WithHostRepairTime, WithPageSize,
// WithOperationRetention, Tick and SetMaintenanceOutcome are not called in
// this tree yet (deadcode lists them): they are the harness surface
// docs/computeengine.md documents for the Compute Engine backend's tests,
// each the twin of a tpufake knob those tests use. Remove one only with its
// line there.

// WithRepairDelay sets how long a MIG takes to notice a TERMINATED or deleted
// instance and start recreating it (default DefaultRepairDelay).
func WithRepairDelay(d time.Duration) Option { return func(s *Server) { s.repairDelay = max(d, 0) } }

// WithRestartDelay sets how long an instance with automaticRestart stays
// TERMINATED after a host error before Compute Engine starts it again
// (default DefaultRestartDelay); the start itself then takes the "start" delay.
func WithRestartDelay(d time.Duration) Option { return func(s *Server) { s.restartDelay = max(d, 0) } }

// WithHostRepairTime sets how long a host reported faulty is repaired before
// its instance runs again (default DefaultHostRepairTime).
func WithHostRepairTime(d time.Duration) Option { return func(s *Server) { s.hostRepair = max(d, 0) } }

// WithPageSize sets the list page size used when a request sets no
// maxResults (default DefaultPageSize). Small values make callers page.
func WithPageSize(n int) Option { return func(s *Server) { s.pageSize = n } }

// WithRequestLog keeps the last n requests for Requests (default
// DefaultRequestLog; bodies included). Count is exact whatever n is.
func WithRequestLog(n int) Option { return func(s *Server) { s.logCap = n } }

// WithOperationRetention keeps the last n finished operations (default
// DefaultOperationRetention) and every one younger than OperationMinAge; an
// older one answers 404, as the real API does once it forgot it. n <= 0
// keeps every operation.
func WithOperationRetention(n int) Option { return func(s *Server) { s.opKeep = n } }

// WithWaitTimeout makes zoneOperations.wait hold a request until its
// operation is DONE, the caller gives up, or d of real time has passed
// (Compute Engine's own limit is about 2 minutes). The default, 0, answers at
// once with the operation as it is, which the real API is also allowed to do
// ("might return after zero seconds"): on a virtual clock nobody would move
// while the caller waits.
func WithWaitTimeout(d time.Duration) Option { return func(s *Server) { s.waitTimeout = d } }

// WithCaller sets the principal written as the user of the operations the
// API's callers start and into their audit entries (default DefaultCaller).
func WithCaller(principal string) Option { return func(s *Server) { s.caller = principal } }

// WithListener serves on l instead of a fresh loopback port.
func WithListener(l net.Listener) Option { return func(s *Server) { s.listener = l } }

// Request is one logged request.
type Request struct {
	Method   string // "instances.get", …; "unknown" for paths the fake does not serve
	Resource string // what the call is about (see FailRule.Resource)
	HTTP     string // the HTTP method
	Path     string
	Query    string
	Body     []byte
	Time     time.Time // the server's clock
	Status   int       // the HTTP status answered; 0 for a hang or a lost answer
	Fault    string    // the fault injected, "" for none (FailRule.String)
}

// Server is the simulated Compute Engine. It is safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	listener net.Listener
	closing  chan struct{}
	now      func() time.Time

	pageSize     int
	delays       map[string]time.Duration
	repairDelay  time.Duration
	restartDelay time.Duration
	hostRepair   time.Duration
	waitTimeout  time.Duration
	caller       string

	mu        sync.Mutex
	instances map[string]*instance // by InstanceName
	migs      map[string]*mig      // by MIGName
	order     map[string]int       // first-seen sequence of every name, kept across delete+insert
	seq       int
	idSeq     uint64
	timers    timerHeap
	timerSeq  int
	clockAt   time.Time // the running timer's time (at)

	ops      map[string]*operation // by projects/P/zones/Z/operations/NAME
	opSeq    int
	opKeep   int
	finished []finishedOp
	finHead  int
	reqIDs   map[string]requestID // method|resource|requestId → the operation it started

	rules     []*rule
	chaos     *chaosState
	lags      map[string]lag // instance → the view reads see while a read lag lasts
	logCap    int
	requests  []Request
	logNext   int
	counts    map[countKey]int
	succeeded map[string]int
	audit     []LogEntry
	entrySeq  int
	effects   []Effect // effects.go
	acting    string   // the person a Person… helper acts as, "" for the API's caller

	otherWrites int // FailRule.OtherWriter writes so far, hashed into their fingerprints
}

type countKey struct{ method, resource string }

// New starts a server seeded with f (deep-copied). It panics when f is
// invalid (ReadFleet returns the same checks as errors). Close stops it.
func New(f Fleet, opts ...Option) *Server {
	s := &Server{
		closing:      make(chan struct{}),
		now:          time.Now,
		pageSize:     DefaultPageSize,
		delays:       map[string]time.Duration{},
		repairDelay:  DefaultRepairDelay,
		restartDelay: DefaultRestartDelay,
		hostRepair:   DefaultHostRepairTime,
		caller:       DefaultCaller,
		instances:    map[string]*instance{},
		migs:         map[string]*mig{},
		order:        map[string]int{},
		idSeq:        4521879902345678000,
		ops:          map[string]*operation{},
		opKeep:       DefaultOperationRetention,
		reqIDs:       map[string]requestID{},
		lags:         map[string]lag{},
		logCap:       DefaultRequestLog,
		counts:       map[countKey]int{},
		succeeded:    map[string]int{},
	}
	for method, d := range map[string]time.Duration{
		"insert": DefaultInsertTime, "delete": DefaultDeleteTime, "start": DefaultStartTime,
		"stop": DefaultStopTime, "setMetadata": DefaultMetadataTime, "setLabels": DefaultMetadataTime,
		"performMaintenance": DefaultMaintenanceTime, "reportHostAsFaulty": DefaultReportFaultyTime,
		"recreateInstances": DefaultRecreateTime,
	} {
		s.delays[method] = d
	}
	for _, o := range opts {
		o(s)
	}
	if err := s.load(f); err != nil {
		panic("computefake.New: " + err.Error())
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if s.listener != nil {
		s.srv.Listener.Close()
		s.srv.Listener = s.listener
	}
	s.srv.Start()
	return s
}

// Close stops the server; hanging requests are let go.
func (s *Server) Close() {
	close(s.closing)
	s.srv.Close()
}

// URL is the server's base URL (without /compute/v1/).
func (s *Server) URL() string { return s.srv.URL }

// Endpoint is what option.WithEndpoint needs: URL + "/compute/v1/".
func (s *Server) Endpoint() string { return s.srv.URL + "/compute/v1/" }

// ClientOptions are the options of a real compute/v1 client talking to the
// server without credentials.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Endpoint()),
		option.WithoutAuthentication(),
		option.WithHTTPClient(s.srv.Client()),
	}
}

// Service returns a real compute/v1 client talking to the server.
func (s *Server) Service(ctx context.Context) (*compute.Service, error) {
	svc, err := compute.NewService(ctx, s.ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("computefake: new service: %w", err)
	}
	return svc, nil
}

// Requests returns the last requests (see WithRequestLog), oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, len(s.requests))
	out = append(out, s.requests[s.logNext:]...)
	return append(out, s.requests[:s.logNext]...)
}

// Count reports how many requests of method on resource were received (""
// = any resource), failed ones included.
func (s *Server) Count(method, resource string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[countKey{method, resource}]
}

// Succeeded reports how many operations of method ("instances.insert", …)
// ended DONE without error.
func (s *Server) Succeeded(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.succeeded[method]
}

// Tick runs what is due on the server's clock now. Every request and helper
// does it first; a test that moved its virtual clock and looks at the fleet
// through Fleet or Instance need not call it.
func (s *Server) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
}

// logRequest adds r to the ring and the counts; it returns the ring slot so
// the answer's status can be filled in. Called with s.mu held.
func (s *Server) logRequest(r Request) int {
	s.counts[countKey{r.Method, r.Resource}]++
	s.counts[countKey{r.Method, ""}]++
	if s.logCap <= 0 {
		return -1
	}
	if len(s.requests) < s.logCap {
		s.requests = append(s.requests, r)
		return len(s.requests) - 1
	}
	i := s.logNext
	s.requests[i] = r
	s.logNext = (s.logNext + 1) % s.logCap
	return i
}

// logStatus records the answer's status in ring slot i, if the slot still
// holds the request (the ring may have moved on meanwhile).
func (s *Server) logStatus(i int, req Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= 0 && i < len(s.requests) && s.requests[i].Time.Equal(req.Time) && s.requests[i].Path == req.Path && s.requests[i].Status == 0 {
		s.requests[i].Status = status
	}
}

// remember gives name its first-seen sequence number. Called with s.mu held.
func (s *Server) remember(name string) {
	if _, ok := s.order[name]; !ok {
		s.seq++
		s.order[name] = s.seq
	}
}

// sortedKeys returns m's keys in first-seen order.
func sortedKeys[V any](order map[string]int, m map[string]V) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return order[a] - order[b] })
	return names
}

// newID is the next resource id. Called with s.mu held.
func (s *Server) newID() uint64 {
	s.idSeq++
	return s.idSeq
}

// serve is every request's entry: route, log, fault, dispatch, answer.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "badRequest", "read body: %v", err))
		return
	}
	rt := parseRoute(r, body)

	s.mu.Lock()
	s.tick()
	req := Request{Method: rt.method, Resource: rt.resource, HTTP: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Time: s.now()}
	if s.logCap > 0 {
		req.Body = body
	}
	fail := s.matchRule(rt)
	if fail != nil {
		req.Fault = fail.String()
	}
	slot := s.logRequest(req)
	if fail != nil && len(fail.OtherWriter) > 0 && rt.err == nil {
		s.otherMetadataWrite(rt.target, fail.OtherWriter)
	}
	if fail != nil && fail.Hang && fail.Applied && fail.Delay <= 0 && rt.err == nil {
		// A hang that takes effect does so on arrival, under the lock: the
		// caller gives up on its own clock, and its next call must find the
		// effect there, whatever the scheduler did meanwhile.
		s.applyLocked(r.URL.Query(), rt, body, fail)
		fail.Applied = false
	}
	s.mu.Unlock()

	status := s.answer(w, r, rt, body, fail)
	s.logStatus(slot, req, status)
}

// answer carries out the call as fail says and writes the answer; it
// returns the HTTP status written (0 when none was).
func (s *Server) answer(w http.ResponseWriter, r *http.Request, rt route, body []byte, fail *FailRule) int {
	if rt.err != nil {
		writeError(w, rt.err)
		return rt.err.Code
	}
	if fail == nil {
		return s.respond(w, s.call(r, rt, body, nil))
	}
	if !s.wait(r.Context(), fail.Delay) {
		return 0 // the caller gave up during the injected delay
	}
	switch {
	case fail.Hang:
		if fail.Applied {
			s.apply(r, rt, body, fail)
		}
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return 0
	case fail.Lost:
		s.apply(r, rt, body, fail)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close() // the answer is lost: the caller sees the connection drop
				return 0
			}
		}
		e := errorf(http.StatusBadGateway, "backendError", "computefake: answer of %s %s lost after it took effect", rt.method, rt.resource)
		writeError(w, e)
		return e.Code
	case fail.Malformed:
		if fail.Applied {
			s.apply(r, rt, body, fail)
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, `{"kind": "compute#`)
		return http.StatusOK
	}
	if e := fail.err(rt); e != nil {
		if fail.Applied {
			s.apply(r, rt, body, fail)
		}
		writeError(w, e)
		return e.Code
	}
	// A rule that only delays, lags reads, pages oddly or fails the
	// operation: the call is carried out and answered.
	return s.respond(w, s.call(r, rt, body, fail))
}

// apply carries out the call without answering it: now, or fail.AppliedAfter
// later on the server's clock.
func (s *Server) apply(r *http.Request, rt route, body []byte, fail *FailRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyLocked(r.URL.Query(), rt, body, fail)
}

// applyLocked is apply with s.mu held.
func (s *Server) applyLocked(query map[string][]string, rt route, body []byte, fail *FailRule) {
	if fail.AppliedAfter <= 0 {
		_, _ = s.dispatch(query, rt, body, fail)
		s.tick()
		return
	}
	s.after(fail.AppliedAfter, func() {
		_, _ = s.dispatch(query, rt, body, fail)
	})
}

// result is a dispatched call's outcome.
type result struct {
	resp any
	err  *apiError
}

// call dispatches the request under the lock, then waits for it when it is
// a zoneOperations.wait that must hold.
func (s *Server) call(r *http.Request, rt route, body []byte, fail *FailRule) result {
	s.mu.Lock()
	resp, e := s.dispatch(r.URL.Query(), rt, body, fail)
	s.tick() // what the call made due at once
	if op, ok := resp.(*compute.Operation); ok && e == nil {
		resp = s.refreshed(op)
	}
	s.mu.Unlock()
	if rt.method == "zoneOperations.wait" && e == nil {
		resp = s.holdWait(r.Context(), rt.resource, resp.(*compute.Operation))
	}
	return result{resp, e}
}

// respond writes res and returns the status written.
func (s *Server) respond(w http.ResponseWriter, res result) int {
	if res.err != nil {
		writeError(w, res.err)
		return res.err.Code
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(res.resp)
	return http.StatusOK
}

// wait sleeps d of real time unless ctx ends or the server closes first.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
}

// route is what a request is about.
type route struct {
	method   string    // "instances.get", …
	resource string    // see FailRule.Resource
	target   ref       // the zonal resource named by the path (instance, MIG, operation)
	project  string    // for list and aggregatedList
	zone     string    // for list
	err      *apiError // the path cannot be served
}

// mutating are the methods that change something (the ones ambiguous
// outcomes, read lag and requestId apply to).
var mutating = map[string]bool{
	"instances.insert": true, "instances.delete": true, "instances.start": true, "instances.stop": true,
	"instances.setMetadata": true, "instances.setLabels": true, "instances.performMaintenance": true,
	"instances.reportHostAsFaulty": true, "instanceGroupManagers.recreateInstances": true,
}

// listing are the methods that page.
var listing = map[string]bool{
	"instances.list": true, "instances.aggregatedList": true, "instanceGroupManagers.listManagedInstances": true,
}

// instanceVerbs are the POST /instances/I/<verb> methods served.
var instanceVerbs = map[string]bool{
	"start": true, "stop": true, "setMetadata": true, "setLabels": true,
	"performMaintenance": true, "reportHostAsFaulty": true,
}

// parseRoute maps a request to its method, per the paths of compute-gen.go
// (all under /compute/v1/).
func parseRoute(r *http.Request, body []byte) route {
	path, ok := strings.CutPrefix(r.URL.Path, "/compute/v1/")
	if !ok {
		return route{method: "unknown", resource: r.URL.Path, err: errorf(http.StatusNotFound, "notFound",
			"computefake serves Compute Engine under /compute/v1/, not %s: give the client option.WithEndpoint(URL + \"/compute/v1/\"), trailing slash included", r.URL.Path)}
	}
	p := strings.Split(path, "/")
	unknown := route{method: "unknown", resource: path, err: errorf(http.StatusNotImplemented, "notImplemented", "computefake does not implement %s %s", r.Method, r.URL.Path)}
	if len(p) < 3 || p[0] != "projects" {
		return unknown
	}
	project := p[1]
	if len(p) == 4 && p[2] == "aggregated" && p[3] == "instances" && r.Method == http.MethodGet {
		return route{method: "instances.aggregatedList", resource: "projects/" + project, project: project}
	}
	if len(p) < 5 || p[2] != "zones" {
		return unknown
	}
	zone, coll := p[3], p[4]
	zp := zonePath(project, zone)
	if len(p) == 5 && coll == "instances" {
		switch r.Method {
		case http.MethodGet:
			return route{method: "instances.list", resource: zp, project: project, zone: zone}
		case http.MethodPost:
			var in struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(body, &in) // a bad body is insert's to report
			t := ref{project: project, zone: zone, collection: "instances", name: in.Name}
			return route{method: "instances.insert", resource: t.String(), target: t, project: project, zone: zone}
		}
		return unknown
	}
	if len(p) < 6 {
		return unknown
	}
	t := ref{project: project, zone: zone, collection: coll, name: p[5]}
	rt := route{resource: t.String(), target: t, project: project, zone: zone}
	switch {
	case coll == "instances" && len(p) == 6 && r.Method == http.MethodGet:
		rt.method = "instances.get"
	case coll == "instances" && len(p) == 6 && r.Method == http.MethodDelete:
		rt.method = "instances.delete"
	case coll == "instances" && len(p) == 7 && r.Method == http.MethodGet && p[6] == "getGuestAttributes":
		rt.method = "instances.getGuestAttributes"
	case coll == "instances" && len(p) == 7 && r.Method == http.MethodPost && instanceVerbs[p[6]]:
		rt.method = "instances." + p[6]
	case coll == "operations" && len(p) == 6 && r.Method == http.MethodGet:
		rt.method = "zoneOperations.get"
	case coll == "operations" && len(p) == 7 && r.Method == http.MethodPost && p[6] == "wait":
		rt.method = "zoneOperations.wait"
	case coll == "instanceGroupManagers" && len(p) == 6 && r.Method == http.MethodGet:
		rt.method = "instanceGroupManagers.get"
	case coll == "instanceGroupManagers" && len(p) == 7 && r.Method == http.MethodPost && p[6] == "listManagedInstances":
		rt.method = "instanceGroupManagers.listManagedInstances"
	case coll == "instanceGroupManagers" && len(p) == 7 && r.Method == http.MethodPost && p[6] == "recreateInstances":
		rt.method = "instanceGroupManagers.recreateInstances"
	default:
		return unknown
	}
	return rt
}

// dispatch carries out the call. Called with s.mu held; fail is the rule
// that applies to it (operation faults, read lag, paging), nil for none.
func (s *Server) dispatch(q map[string][]string, rt route, body []byte, fail *FailRule) (any, *apiError) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if mutating[rt.method] {
		if op, e, done := s.repeatedRequest(rt, get("requestId")); done {
			return op, e
		}
	}
	var resp any
	var e *apiError
	switch rt.method {
	case "instances.get":
		resp, e = s.getInstance(rt.target)
	case "instances.list":
		resp, e = s.listInstances(rt, get("filter"), get("maxResults"), get("pageToken"), fail)
	case "instances.aggregatedList":
		resp, e = s.aggregatedList(rt, get("filter"), get("maxResults"), get("pageToken"), fail)
	case "instances.getGuestAttributes":
		resp, e = s.getGuestAttributes(rt.target, get("queryPath"), get("variableKey"))
	case "zoneOperations.get":
		resp, e = s.getOperation(rt.target)
	case "zoneOperations.wait":
		resp, e = s.getOperation(rt.target)
	case "instanceGroupManagers.get":
		resp, e = s.getMIG(rt.target)
	case "instanceGroupManagers.listManagedInstances":
		resp, e = s.listManagedInstances(rt.target, get("maxResults"), get("pageToken"), fail)
	default:
		if !mutating[rt.method] {
			return nil, errorf(http.StatusNotImplemented, "notImplemented", "computefake does not implement %s", rt.method)
		}
		var op *operation
		op, e = s.mutate(rt, q, body, fail)
		if e == nil {
			s.rememberRequest(rt, get("requestId"), op)
			resp = op.res
		}
	}
	return resp, e
}

// mutate starts the operation of a mutating call. Called with s.mu held.
func (s *Server) mutate(rt route, q map[string][]string, body []byte, fail *FailRule) (*operation, *apiError) {
	before := s.snapshot(rt.target.String())
	var op *operation
	var e *apiError
	switch rt.method {
	case "instances.insert":
		op, e = s.insertInstance(rt, q, body, fail)
	case "instances.delete":
		op, e = s.deleteInstance(rt.target, fail)
	case "instances.start":
		op, e = s.startInstance(rt.target, fail)
	case "instances.stop":
		op, e = s.stopInstance(rt.target, fail)
	case "instances.setMetadata":
		op, e = s.setMetadata(rt.target, body, fail)
	case "instances.setLabels":
		op, e = s.setLabels(rt.target, body, fail)
	case "instances.performMaintenance":
		op, e = s.performMaintenance(rt.target, fail)
	case "instances.reportHostAsFaulty":
		op, e = s.reportHostAsFaulty(rt.target, body, fail)
	case "instanceGroupManagers.recreateInstances":
		op, e = s.recreateInstances(rt.target, body, fail)
	}
	if e != nil {
		return nil, e
	}
	res := instanceResource(rt.target, op.res.TargetId)
	if rt.target.collection == "instanceGroupManagers" {
		res = migResource(rt.target, op.res.TargetId)
	}
	s.activityEntry(op, rt.target, res, s.caller)
	if fail != nil && fail.ReadLag > 0 && rt.target.collection == "instances" {
		s.startLag(rt.target.String(), before, fail.ReadLag)
	}
	return op, nil
}

// newRand is the seeded generator the chaos draws use.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
