// Package tpufake is a simulated Cloud TPU v2 control plane for tests and
// `autoheal replay --fleet`: an httptest server speaking the TPU v2 REST
// protocol, so the real google.golang.org/api/tpu/v2 client talks to it
// unchanged. It keeps a fleet of nodes and queued resources in memory, runs
// create, delete and reset as long-running operations that complete after a
// set number of operations.get polls, injects failures (FailRule), and logs
// every request.
//
// It imagines what the real cloud does that a caller cannot see: a call
// that fails and takes effect anyway, now, later or after the caller's
// deadline, an answer lost after the call took effect, an operation ending
// in error after its effect or half-way (faults.go); reads that lag writes
// (lag.go); page tokens that repeat, skip or loop (paging.go); people
// deleting, recreating, relabelling, stopping or maintaining nodes between
// two of the caller's steps, with or without their admin-activity audit
// entries (people.go, audit.go); and fault schedules drawn from a seed that
// replay exactly (chaos.go). Every fault is named by method, resource and
// nth call, and runs on the server's clock (WithClock).
//
// It implements only what tpu-autoheal calls: nodes get/list/create/delete,
// operations get, queuedResources get, reset, create and delete (queued
// resources wait for capacity: queued.go). Anything else is answered
// UNIMPLEMENTED. It must never reach the network beyond its own loopback
// listener, and nothing outside tests and replay may depend on it.
package tpufake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/option"
	tpu "google.golang.org/api/tpu/v2"
)

// DefaultPageSize is the page size of nodes.list when the request sets none.
const DefaultPageSize = 50

// maxPageSize caps a requested page size, as the real API does.
const maxPageSize = 1000

// Option configures a Server.
type Option func(*Server)

// WithOperationPolls makes a long-running operation done on its n-th
// operations.get (default 1: done on the first poll). n <= 0 makes
// operations done as soon as they are started.
func WithOperationPolls(n int) Option { return func(s *Server) { s.polls = n } }

// WithOperationDelay makes the long-running operations of verb ("create",
// "delete" or "reset") finish d after they started, on the server's clock,
// whether anyone polls them or not: a node being deleted is gone once d has
// passed, also for a caller that crashed and never looked. It replaces
// WithOperationPolls for that verb.
func WithOperationDelay(verb string, d time.Duration) Option {
	return func(s *Server) { s.delays[verb] = d }
}

// WithRequestLog keeps the last n requests for Requests (default
// DefaultRequestLog; bodies included). Count is exact whatever n is.
func WithRequestLog(n int) Option { return func(s *Server) { s.logCap = n } }

// DefaultRequestLog is how many requests Requests keeps by default: the log
// is a ring, so a long replay runs in constant memory.
const DefaultRequestLog = 256

// WithOperationRetention keeps the last n finished operations for
// operations.get (default DefaultOperationRetention), and every operation
// that finished less than OperationMinAge ago; an older one answers
// NOT_FOUND, as the real API does once it has forgotten an operation, and
// Count forgets its polls. n <= 0 keeps every operation. Running operations
// are always kept.
func WithOperationRetention(n int) Option { return func(s *Server) { s.opKeep = n } }

// DefaultOperationRetention is how many finished operations a server keeps
// by default: enough for any caller to see the operations it started done
// (a recovery polls its operation within minutes, a handful of operations
// later), few enough that a long replay runs in constant memory.
const DefaultOperationRetention = 4096

// OperationMinAge is how long, on the server's clock, a finished operation
// is kept whatever the retention: a recovery polls its operation within
// minutes, and a wave can finish thousands of operations at once.
const OperationMinAge = time.Hour

// WithClock sets the clock used for createTime fields, operation metadata,
// operation delays and the request log (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithPageSize sets the nodes.list page size used when a request sets none
// (default DefaultPageSize). Small values make callers exercise paging.
func WithPageSize(n int) Option { return func(s *Server) { s.pageSize = n } }

// FailRule makes matching requests fail (or be slow).
type FailRule struct {
	// RPC is "nodes.get", "nodes.list", "nodes.create", "nodes.delete",
	// "operations.get", "queuedResources.get", "queuedResources.reset", or
	// "operation:nodes.create", "operation:nodes.delete",
	// "operation:queuedResources.reset" to make the long-running
	// operation's result fail instead of the request.
	RPC string
	// Name is the resource the request is about ("" = any): the node for
	// nodes.get/create/delete and their operations (the new node's full name
	// for create), the parent for nodes.list, the operation for
	// operations.get, the queued resource for queuedResources.*.
	Name string
	// Code is the HTTP status (503, 429, 404, 409, ...); Status the
	// google.rpc code name ("UNAVAILABLE", "RESOURCE_EXHAUSTED", ...).
	// Either may be left out and is derived from the other. A rule with
	// neither and a Delay only slows requests down.
	Code   int
	Status string
	// Message is the error message ("" = a default naming the rule).
	Message string
	// Zone narrows the rule to resources of one zone (a zone out of
	// capacity: RPC "operation:nodes.create", Status "RESOURCE_EXHAUSTED").
	Zone string
	// Until ends the rule at that time on the server's clock (zero =
	// never): a capacity outage of ten minutes.
	Until time.Time
	// Of narrows an operations.get rule to the operations of one RPC
	// ("nodes.delete", "nodes.create", "queuedResources.reset"; "" = any).
	Of string
	// Times is how many matching requests the rule applies to (0 = all).
	Times int
	// Delay is waited before answering (or before the operation completes).
	Delay time.Duration
	// Lost carries the call out, then answers with the rule's error (500
	// INTERNAL when it gives none): the answer lost after the call took effect.
	Lost bool
	// Hang holds the request until the caller gives up (its deadline) or
	// the server closes; with Lost, the call is carried out first.
	Hang bool
	// Malformed carries the call out, then answers 200 with a body that is
	// not the resource's JSON.
	Malformed bool

	// The ambiguous outcomes, read lag, paging anomalies and people acting
	// (faults.go, lag.go, paging.go, people.go).

	// Nth makes the rule pass over the first Nth-1 requests it matches and
	// apply from the nth on (0 or 1: from the first); Times counts from
	// there. For an operation: rule, the nth operation of that RPC (and
	// Name) to finish.
	Nth int
	// Effect is what the failed call does anyway (default EffectNone; Lost
	// and Malformed mean EffectNow). EffectDelay is how long after the
	// request, on the server's clock, an EffectLater call takes effect.
	Effect      Effect
	EffectDelay time.Duration
	// Drop closes the connection without an answer, after the Effect: the
	// answer lost on the way back.
	Drop bool
	// Stale makes a read (nodes.get, nodes.list, queuedResources.get)
	// answer the state as it was Stale ago on the server's clock: NOT_FOUND
	// for a node created since, the old state of one changed since. Alone
	// on a rule, it fails nothing.
	Stale time.Duration
	// Page makes a nodes.list answer's paging go wrong (paging.go). A page
	// rule is matched only by the answers it applies to and fails nothing.
	Page PageFault
	// Person acts right after the request is carried out, or failed: a
	// person between two of the caller's steps. Act.Target "" means the
	// request's node (or queued resource). Alone on a rule, it fails
	// nothing.
	Person *Act
}

// Request is one logged request.
type Request struct {
	RPC    string // as in FailRule.RPC; "unknown" for paths the fake does not serve
	Name   string // as in FailRule.Name
	Method string
	Path   string
	Body   []byte
	Time   time.Time
}

// Server is the simulated control plane. It is safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	listener net.Listener // nil: a fresh loopback port
	closing  chan struct{}
	polls    int
	pageSize int
	now      func() time.Time

	mu        sync.Mutex
	nodes     map[string]*tpu.Node
	qrs       map[string]*tpu.QueuedResource
	order     map[string]int // first-seen sequence of every name, kept across delete+create
	seq       int
	ops       map[string]*operation
	timed     map[*operation]struct{} // running operations with a done-at time (WithOperationDelay)
	opKeep    int                     // finished operations kept (WithOperationRetention)
	finished  []finishedOp            // finished operations, oldest first, from finHead
	finHead   int                     // finished[:finHead] are forgotten
	opSeq     int
	idSeq     int64
	rules     []*rule
	delays    map[string]time.Duration // verb → operation duration (WithOperationDelay)
	logCap    int
	requests  []Request // ring of the last logCap requests
	logNext   int
	counts    map[countKey]int
	succeeded map[string]int // operations that finished without error, by RPC
	// interned holds one copy of each large metadata value of the stored
	// nodes (internMetadata); rebuilt when it reaches internPurgeAt.
	interned      map[string]string
	internPurgeAt int
	maint         maintState // maintenance.go

	pend        []pending // deferred effects and acts (faults.go)
	pendSeq     int
	readLag     time.Duration     // WithReadLag (lag.go)
	historyKeep time.Duration     // how long past states are kept; 0: none
	nodeHist    history[tpu.Node] // past states of nodes
	qrHist      history[tpu.QueuedResource]
	audit       auditLog // admin-activity entries (audit.go)
	busy        inFlight // requests being served (WaitIdle)

	queued         map[string]*queuedInfo // queued resources created through the API (queued.go)
	queueProvision time.Duration          // WithQueueProvisioning
}

type countKey struct{ rpc, name string }

type rule struct {
	FailRule
	seen int // requests matched, whether or not the rule applied (Nth)
	used int // requests the rule applied to (Times)
}

// New starts a server seeded with f (deep-copied). It panics when f is
// invalid (ReadFleet returns the same checks as errors). Close stops it.
func New(f Fleet, opts ...Option) *Server {
	if err := f.validate(); err != nil {
		panic("tpufake.New: " + err.Error())
	}
	s := &Server{
		closing:   make(chan struct{}),
		polls:     1,
		pageSize:  DefaultPageSize,
		now:       time.Now,
		nodes:     map[string]*tpu.Node{},
		qrs:       map[string]*tpu.QueuedResource{},
		order:     map[string]int{},
		ops:       map[string]*operation{},
		timed:     map[*operation]struct{}{},
		idSeq:     7000000000000000000,
		delays:    map[string]time.Duration{},
		logCap:    DefaultRequestLog,
		opKeep:    DefaultOperationRetention,
		counts:    map[countKey]int{},
		succeeded: map[string]int{},
		interned:  map[string]string{},
		audit:     auditLog{cap: DefaultAuditLog},
	}
	for _, o := range opts {
		o(s)
	}
	for _, n := range f.Nodes {
		s.putNode(clone(n))
	}
	for _, q := range f.QueuedResources {
		q = clone(q)
		s.qrs[q.Name] = q
		s.remember(q.Name)
	}
	s.seedMaintenance(f) // maintenance.go
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if s.listener != nil {
		s.srv.Listener.Close()
		s.srv.Listener = s.listener
	}
	s.srv.Start()
	return s
}

// WithListener serves on l instead of a fresh loopback port: `autoheal
// simulate` uses it to serve the fleet on a fixed address for other processes.
func WithListener(l net.Listener) Option {
	return func(s *Server) { s.listener = l }
}

// Close stops the server; requests waiting on a Delay are cut short.
func (s *Server) Close() {
	close(s.closing)
	s.srv.Close()
}

// URL is the server's base URL, for option.WithEndpoint.
func (s *Server) URL() string { return s.srv.URL }

// Service returns a real TPU v2 client talking to the server.
func (s *Server) Service(ctx context.Context) (*tpu.Service, error) {
	svc, err := tpu.NewService(ctx,
		option.WithEndpoint(s.URL()+"/"),
		option.WithoutAuthentication(),
		option.WithHTTPClient(s.srv.Client()),
	)
	if err != nil {
		return nil, fmt.Errorf("tpufake: new service: %w", err)
	}
	return svc, nil
}

// Fleet returns a deep copy of the current state, nodes and queued resources
// in the order they were first seen.
func (s *Server) Fleet() Fleet {
	s.runDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	f := Fleet{Nodes: []*tpu.Node{}}
	for _, name := range sortedKeys(s.order, s.nodes) {
		f.Nodes = append(f.Nodes, clone(s.nodes[name]))
	}
	for _, name := range sortedKeys(s.order, s.qrs) {
		f.QueuedResources = append(f.QueuedResources, clone(s.qrs[name]))
	}
	return f
}

// Fail adds a failure rule. Rules are tried in the order added; the first
// that matches a request applies.
func (s *Server) Fail(r FailRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepHistory(r.Stale)
	s.rules = append(s.rules, &rule{FailRule: r})
}

// Requests returns the last requests (see WithRequestLog), oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, len(s.requests))
	out = append(out, s.requests[s.logNext:]...)
	return append(out, s.requests[:s.logNext]...)
}

// logRequest adds r to the ring and the counts. Called with s.mu held.
func (s *Server) logRequest(r Request) {
	s.counts[countKey{r.RPC, r.Name}]++
	s.counts[countKey{r.RPC, ""}]++
	if s.logCap <= 0 {
		return
	}
	if len(s.requests) < s.logCap {
		s.requests = append(s.requests, r)
		return
	}
	s.requests[s.logNext] = r
	s.logNext = (s.logNext + 1) % s.logCap
}

// Succeeded reports how many operations of rpc ("nodes.create",
// "nodes.delete", "queuedResources.reset") finished without error.
func (s *Server) Succeeded(rpc string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.succeeded[rpc]
}

// Count reports how many requests of rpc on name were received ("" = any
// name), failed ones included. The polls of one operation are counted while
// the server keeps the operation (WithOperationRetention).
func (s *Server) Count(rpc, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[countKey{rpc, name}]
}

// SetNode puts a copy of n into the fleet, replacing any node of that name.
// It panics on a node without a full resource name.
func (s *Server) SetNode(n *tpu.Node) {
	if n == nil || !nodeNameRE.MatchString(n.Name) {
		panic(fmt.Sprintf("tpufake.SetNode: want a node with a full resource name, got %+v", n))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putNode(clone(n))
}

// DeleteNodeNow removes the node at once, without an operation.
func (s *Server) DeleteNodeNow(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeNode(name)
}

// removeNode deletes node name from the fleet. Called with s.mu held.
func (s *Server) removeNode(name string) {
	if _, ok := s.nodes[name]; !ok {
		return
	}
	s.touch(name)
	delete(s.nodes, name)
}

func (s *Server) putNode(n *tpu.Node) {
	s.touch(n.Name)
	s.internMetadata(n)
	s.nodes[n.Name] = n
	s.remember(n.Name)
}

// internMetadata makes n's large metadata values share one copy with every
// other stored node's equal value: a fleet whose nodes were all recreated
// with the same startup script (about 37 KB) would otherwise hold one copy
// per node. Strings are immutable, so sharing is invisible to callers, who
// get deep copies anyway. Called with s.mu held.
func (s *Server) internMetadata(n *tpu.Node) {
	for k, v := range n.Metadata {
		if len(v) < internMin {
			continue
		}
		if c, ok := s.interned[v]; ok {
			n.Metadata[k] = c
			continue
		}
		if len(s.interned) >= max(s.internPurgeAt, internMinPurge) {
			s.purgeInterned() // n is not stored yet: v is added after
		}
		s.interned[v] = v
	}
}

// purgeInterned rebuilds the intern table from the stored nodes, dropping
// the values no node holds any more. It runs when the table has doubled
// since the last rebuild, so it costs O(1) amortized per interned value and
// the table holds at most twice the distinct live values. Called with s.mu
// held.
func (s *Server) purgeInterned() {
	s.interned = map[string]string{}
	for _, n := range s.nodes {
		for _, v := range n.Metadata {
			if len(v) >= internMin {
				s.interned[v] = v
			}
		}
	}
	s.internPurgeAt = 2 * len(s.interned)
}

const (
	// internMin is the size from which a metadata value is interned;
	// smaller ones cost about what their table entry would.
	internMin = 256
	// internMinPurge is the table size below which it is never rebuilt.
	internMinPurge = 64
)

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

// route is what a request is about.
type route struct {
	rpc    string
	name   string    // the resource (see FailRule.Name)
	parent string    // nodes.list and nodes.create
	asOf   time.Time // a read: the fleet as it was then (lag.go); zero: now
}

// parseRoute maps a request to its RPC, per the paths in tpu-gen.go:
// v2/{+parent}/nodes, v2/{+name} (node or operation or queued resource) and
// v2/{+name}:reset.
func parseRoute(r *http.Request) route {
	path := strings.TrimPrefix(r.URL.Path, "/v2/")
	if path == r.URL.Path {
		return route{rpc: "unknown"}
	}
	parts := strings.Split(path, "/")
	if len(parts) < 5 || parts[0] != "projects" || parts[2] != "locations" {
		return route{rpc: "unknown"}
	}
	loc := strings.Join(parts[:4], "/")
	switch {
	case len(parts) == 5 && parts[4] == "nodes":
		switch r.Method {
		case http.MethodGet:
			return route{rpc: "nodes.list", name: loc, parent: loc}
		case http.MethodPost:
			id := r.URL.Query().Get("nodeId")
			return route{rpc: "nodes.create", name: loc + "/nodes/" + id, parent: loc}
		}
	case len(parts) == 6 && parts[4] == "nodes" && !strings.Contains(parts[5], ":"):
		switch r.Method {
		case http.MethodGet:
			return route{rpc: "nodes.get", name: path}
		case http.MethodDelete:
			return route{rpc: "nodes.delete", name: path}
		}
	case len(parts) == 6 && parts[4] == "operations" && r.Method == http.MethodGet:
		return route{rpc: "operations.get", name: path}
	case len(parts) == 6 && parts[4] == "queuedResources":
		if r.Method == http.MethodGet && !strings.Contains(parts[5], ":") {
			return route{rpc: "queuedResources.get", name: path}
		}
		if r.Method == http.MethodPost && strings.HasSuffix(parts[5], ":reset") {
			return route{rpc: "queuedResources.reset", name: strings.TrimSuffix(path, ":reset")}
		}
	}
	return route{rpc: "unknown", name: path}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.busy.enter()
	defer s.busy.leave()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, errorf("INVALID_ARGUMENT", "read body: %v", err))
		return
	}
	rt := queuedRoute(r, maintenanceRoute(r, parseRoute(r))) // maintenance.go, queued.go
	s.runDue()                                               // faults.go: effects and acts whose time has come

	s.mu.Lock()
	s.tick()
	req := Request{RPC: rt.rpc, Name: rt.name, Method: r.Method, Path: r.URL.Path, Time: s.now()}
	if s.logCap > 0 {
		req.Body = body
	}
	s.logRequest(req)
	of := ""
	if op := s.ops[rt.name]; rt.rpc == "operations.get" && op != nil {
		of = op.rpc
	}
	fail := s.matchOf(rt.rpc, rt.name, of)
	rt.asOf = s.readTime(rt.rpc, fail) // lag.go
	s.mu.Unlock()

	if fail == nil {
		s.answer(w, r, rt, body)
		return
	}
	if !s.wait(r.Context(), fail.Delay) {
		writeError(w, errorf("CANCELLED", "request cancelled during injected delay"))
		return
	}
	effect := fail.effect()
	var resp any
	var e *apiError
	carried := false
	switch effect {
	case EffectNow:
		resp, e = s.dispatch(r, rt, body) // carried out; the answer is lost or garbled
		carried = true
	case EffectLater:
		s.deferCall(fail.EffectDelay, r, rt, body)
	}
	ruleErr := fail.err(rt.rpc, rt.name)
	if ruleErr == nil && effect != EffectNone && effect != EffectAfterDeadline {
		ruleErr = errorf("INTERNAL", "tpufake: answer of %s %s lost after it took effect", rt.rpc, rt.name)
	}
	plain := ruleErr == nil && !fail.Hang && !fail.Drop && !fail.Malformed
	if plain && !carried {
		// A delay, a stale read or a person: the call is served as usual.
		resp, e = s.dispatch(r, rt, body)
	}
	s.personAfter(fail.Person, rt) // people.go
	switch {
	case fail.Drop:
		drop(w)
	case fail.Hang:
		select {
		case <-r.Context().Done():
			if effect == EffectAfterDeadline {
				_, _ = s.dispatch(r.Clone(context.Background()), rt, body)
			}
		case <-s.closing:
		}
	case fail.Malformed:
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, `{"name": "projects/`)
	case ruleErr != nil:
		writeError(w, ruleErr)
	default:
		writeAnswer(w, resp, e)
	}
}

// answer serves a request no rule matched.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, rt route, body []byte) {
	resp, e := s.dispatch(r, rt, body)
	writeAnswer(w, resp, e)
}

func writeAnswer(w http.ResponseWriter, resp any, e *apiError) {
	if e != nil {
		writeError(w, e)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if err := json.NewEncoder(w).Encode(resp); err != nil {
		// The client went away; nothing else to tell it.
		return
	}
}

// dispatch carries out the request's RPC. The maint helper's routes are
// added here and in parseRoute.
func (s *Server) dispatch(r *http.Request, rt route, body []byte) (resp any, e *apiError) {
	switch rt.rpc {
	case "nodes.get":
		resp, e = s.getNode(rt.name, rt.asOf)
	case "nodes.list":
		resp, e = s.listNodes(rt.parent, r.URL.Query().Get("pageSize"), r.URL.Query().Get("pageToken"), rt.asOf)
	case "nodes.create":
		resp, e = s.createNode(rt.parent, r.URL.Query().Get("nodeId"), body)
	case "nodes.delete":
		resp, e = s.deleteNode(rt.name)
	case "operations.get":
		resp, e = s.getOperation(r.Context(), rt.name)
	case "queuedResources.get":
		resp, e = s.getQueuedResource(rt.name, rt.asOf)
	case "queuedResources.reset":
		resp, e = s.resetQueuedResource(rt.name)
	case "queuedResources.create", "queuedResources.delete":
		resp, e = s.serveQueued(rt, r, body) // queued.go
	case "nodes.patch", "nodes.getGuestAttributes", "nodes.performMaintenance", "queuedResources.performMaintenanceQueuedResource":
		resp, e = s.serveMaintenance(rt, r, body) // maintenance.go
	default:
		e = errorf("UNIMPLEMENTED", "tpufake does not implement %s %s", r.Method, r.URL.Path)
	}
	return resp, e
}

// match returns the first rule matching rpc and name, counting its use, or
// nil. Called with s.mu held.
func (s *Server) match(rpc, name string) *FailRule { return s.matchOf(rpc, name, "") }

// matchOf is match for an operations.get of an operation of RPC of. Page
// rules are matched by listNodes alone (matchPage).
func (s *Server) matchOf(rpc, name, of string) *FailRule {
	for i, r := range s.rules {
		if r.Page != PageNone || r.RPC != rpc || (r.Name != "" && r.Name != name) || (r.Of != "" && r.Of != of) {
			continue
		}
		if (r.Zone != "" && !inZone(name, r.Zone)) || (!r.Until.IsZero() && !s.now().Before(r.Until)) {
			continue
		}
		if !r.take(i, s) {
			continue
		}
		f := r.FailRule
		return &f
	}
	return nil
}

// take counts a request (or operation) rule i matches and reports whether
// the rule applies to it (see Nth); a rule used Times times is removed.
// Called with s.mu held; the caller stops iterating s.rules when it applies.
func (r *rule) take(i int, s *Server) bool {
	r.seen++
	if r.seen < r.Nth {
		return false
	}
	r.used++
	if r.Times > 0 && r.used >= r.Times {
		s.rules = slices.Delete(s.rules, i, i+1)
	}
	return true
}

// err is the error the rule answers with, nil for a delay-only rule.
func (f *FailRule) err(rpc, name string) *apiError {
	if f.Code == 0 && f.Status == "" {
		return nil
	}
	code, status := normalize(f.Code, f.Status)
	msg := f.Message
	if msg == "" {
		msg = fmt.Sprintf("tpufake: injected %s on %s %s", status, rpc, name)
	}
	return &apiError{Code: code, Status: status, Message: msg}
}

// wait sleeps d unless ctx ends or the server closes first.
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

func (s *Server) getNode(name string, asOf time.Time) (*tpu.Node, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodeAt(name, asOf)
	if n == nil {
		return nil, notFound(name)
	}
	return clone(n), nil
}

func (s *Server) listNodes(parent, pageSize, token string, asOf time.Time) (*tpu.ListNodesResponse, *apiError) {
	size := s.pageSize
	if pageSize != "" {
		n, err := strconv.Atoi(pageSize)
		if err != nil || n < 0 {
			return nil, errorf("INVALID_ARGUMENT", "invalid page size %q", pageSize)
		}
		if n > 0 {
			size = n
		}
	}
	size = min(max(size, 1), maxPageSize)
	after := 0
	if token != "" {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(raw), "after:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(raw), "after:") {
			return nil, errorf("INVALID_ARGUMENT", "invalid page token %q", token)
		}
		after = n
	}
	project, location := splitLocation(parent)

	s.mu.Lock()
	defer s.mu.Unlock()
	// This page's nodes, the next page's, and whether one comes after
	// (which a skipped page needs to know).
	var names []string
	for _, name := range s.nodeNamesAt(asOf) {
		if s.order[name] <= after {
			continue
		}
		p, l := splitLocation(name)
		if p != project || (location != "-" && l != location) || s.nodeAt(name, asOf) == nil {
			continue
		}
		names = append(names, name)
		if len(names) > 2*size {
			break
		}
	}
	page := names[:min(size, len(names))]
	resp := &tpu.ListNodesResponse{}
	for _, name := range page {
		resp.Nodes = append(resp.Nodes, clone(s.nodeAt(name, asOf)))
	}
	last := len(names) <= size
	if !last {
		resp.NextPageToken = pageToken(s.order[page[len(page)-1]])
	}
	if fault := s.matchPage(parent, last); fault != PageNone { // paging.go
		skipTo := 0
		if len(names) > 2*size {
			skipTo = s.order[names[2*size-1]]
		}
		applyPage(resp, fault, token, skipTo)
	}
	return resp, nil
}

// splitLocation returns P and Z of projects/P/locations/Z[/...].
func splitLocation(name string) (project, location string) {
	parts := strings.SplitN(name, "/", 5)
	if len(parts) < 4 {
		return "", ""
	}
	return parts[1], parts[3]
}

func (s *Server) createNode(parent, nodeID string, body []byte) (*tpu.Operation, *apiError) {
	if nodeID == "" {
		return nil, errorf("INVALID_ARGUMENT", "nodeId is required")
	}
	if !resourceIDRE.MatchString(nodeID) {
		return nil, errorf("INVALID_ARGUMENT", "invalid nodeId %q: must be 1-63 lower-case letters, digits and hyphens, starting with a letter", nodeID)
	}
	if _, loc := splitLocation(parent); loc == "-" || loc == "" {
		return nil, errorf("INVALID_ARGUMENT", "invalid parent %q: want projects/P/locations/ZONE", parent)
	}
	var n *tpu.Node
	if err := json.Unmarshal(body, &n); err != nil || n == nil {
		return nil, errorf("INVALID_ARGUMENT", "invalid node: %v", err)
	}
	if n.AcceleratorType == "" && n.AcceleratorConfig == nil {
		return nil, errorf("INVALID_ARGUMENT", "node.acceleratorType or node.acceleratorConfig is required")
	}
	if n.RuntimeVersion == "" {
		return nil, errorf("INVALID_ARGUMENT", "node.runtimeVersion is required")
	}
	name := parent + "/nodes/" + nodeID

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nodes[name]; ok {
		return nil, errorf("ALREADY_EXISTS", "Resource '%s' already exists", name)
	}
	s.startNode(name, n, "")
	return s.launch(s.newOperation("nodes.create", "create", name)), nil
}

// startNode puts n under name in state CREATING with fresh output-only
// fields. Called with s.mu held.
func (s *Server) startNode(name string, n *tpu.Node, queuedResource string) {
	n = clone(n)
	n.Name = name
	n.State = "CREATING"
	n.Health = ""
	n.HealthDescription = ""
	n.Symptoms = nil
	n.NetworkEndpoints = nil
	n.UpcomingMaintenance = nil
	n.CreateTime = s.now().UTC().Format(time.RFC3339Nano)
	n.ApiVersion = "V2"
	n.QueuedResource = queuedResource
	s.idSeq++
	n.Id = s.idSeq
	s.putNode(n)
}

// readyNode finishes a create: READY, HEALTHY, with network endpoints, one
// per worker. Called with s.mu held.
func (s *Server) readyNode(name string) *tpu.Node {
	n, ok := s.nodes[name]
	if !ok {
		return nil
	}
	s.touch(name)
	n.State = "READY"
	n.Health = "HEALTHY"
	n.NetworkEndpoints = nil
	for w := range workers(n) {
		n.NetworkEndpoints = append(n.NetworkEndpoints, &tpu.NetworkEndpoint{
			IpAddress: fmt.Sprintf("10.%d.%d.%d", 128+(n.Id%64), (n.Id/64)%256, w+2),
			Port:      8470,
		})
	}
	return n
}

// workers approximates a node's host count from its accelerator type:
// "vN-C" has C TensorCores (v2-v4, v5p) or chips (v5litepod, v6e), eight of
// which share a host.
func workers(n *tpu.Node) int {
	t := n.AcceleratorType
	if n.AcceleratorConfig != nil && t == "" {
		return 1
	}
	i := strings.LastIndexByte(t, '-')
	c, err := strconv.Atoi(t[i+1:])
	if i < 0 || err != nil || c <= 8 {
		return 1
	}
	return min(c/8, 250)
}

func (s *Server) deleteNode(name string) (*tpu.Operation, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return nil, notFound(name)
	}
	op := s.newOperation("nodes.delete", "delete", name)
	op.prevState, op.nodeID = n.State, n.Id
	s.touch(name)
	n.State = "DELETING"
	return s.launch(op), nil
}

func (s *Server) getQueuedResource(name string, asOf time.Time) (*tpu.QueuedResource, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.qrAt(name, asOf)
	if q == nil {
		return nil, notFound(name)
	}
	return clone(q), nil
}

// resettable are the queued resource states reset is accepted in.
var resettable = map[string]bool{"ACTIVE": true, "SUSPENDING": true, "SUSPENDED": true, "FAILED": true}

func (s *Server) resetQueuedResource(name string) (*tpu.Operation, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.qrs[name]
	if !ok {
		return nil, notFound(name)
	}
	state := qrState(q)
	if !resettable[state] {
		return nil, errorf("FAILED_PRECONDITION", "queued resource '%s' is %s; only ACTIVE, SUSPENDING, SUSPENDED or FAILED queued resources can be reset", name, state)
	}
	for nn, n := range s.nodes {
		if n.QueuedResource == name {
			s.touch(nn)
			n.State = "DELETING"
		}
	}
	s.touchQR(name)
	q.State = &tpu.QueuedResourceState{State: "WAITING_FOR_RESOURCES", StateInitiator: "USER"}
	return s.launch(s.newOperation("queuedResources.reset", "reset", name)), nil
}

func qrState(q *tpu.QueuedResource) string {
	if q.State == nil || q.State.State == "" {
		return "STATE_UNSPECIFIED"
	}
	return q.State.State
}

// specNode is a node a queued resource's spec asks for.
type specNode struct {
	name string
	node *tpu.Node
}

// specNodes lists the nodes a queued resource's spec asks for, in spec
// order; a multislice spec asks for NodeCount nodes named prefix-0, prefix-1...
func specNodes(q *tpu.QueuedResource) []specNode {
	var out []specNode
	if q.Tpu == nil {
		return out
	}
	for _, spec := range q.Tpu.NodeSpec {
		if spec == nil || spec.Node == nil {
			continue
		}
		if m := spec.MultisliceParams; m != nil {
			prefix := m.NodeIdPrefix
			if prefix == "" {
				prefix = spec.NodeId
			}
			for i := range m.NodeCount {
				n := clone(spec.Node)
				n.MultisliceNode = true
				out = append(out, specNode{fmt.Sprintf("%s/nodes/%s-%d", spec.Parent, prefix, i), n})
			}
			continue
		}
		out = append(out, specNode{spec.Parent + "/nodes/" + spec.NodeId, clone(spec.Node)})
	}
	return out
}

// clone deep-copies a resource through its JSON form, as a client would see it.
func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tpufake: clone %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("tpufake: clone %T: %v", v, err))
	}
	return out
}

// inZone reports whether the resource name (projects/P/locations/Z/...) is
// in zone.
func inZone(name, zone string) bool {
	return strings.Contains(name+"/", "/locations/"+zone+"/")
}
