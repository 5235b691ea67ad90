// Package loggingfake is an in-process fake of the Cloud Logging API
// (google.logging.v2 LoggingServiceV2) served over real gRPC, so that the
// real cloud.google.com/go/logging and logadmin clients can write to it and
// read from it in tests.
//
// It keeps entries in memory and implements WriteLogEntries and
// ListLogEntries only. It is for tests: it must never be used to serve
// anything but a loopback listener.
//
// Filter support (ListLogEntries) is deliberately small. The filter is split
// into clauses at top-level " AND " (outside quotes and parentheses); these
// clauses are evaluated:
//
//	timestamp >= "RFC3339"   (also >, <, <=, =)
//	logName = "projects/P/logs/ID"   (exact; quotes optional)
//	logName : "substring"            (substring match, as logName:"..." is used)
//	log_id("ID")                     (the log's ID, exact; "/" in it is %2F in logName)
//	insertId = "ID"
//	(A AND B)                        (a parenthesized filter, evaluated the same way)
//	A OR B OR ...                    (when every part narrows; else passed through)
//
// Every other clause (NOT, payload fields, severity, an OR with a part that
// is passed through, ...) is passed through: it does not narrow the result. Tests that need to see what the
// client asked for read Lists(). resourceNames narrow entries to logNames
// under each "projects/P". orderBy "timestamp desc" is honoured; anything
// else is ascending by timestamp, then by arrival.
package loggingfake

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	logpb "cloud.google.com/go/logging/apiv2/loggingpb"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Server is a running fake Logging API.
type Server struct {
	logpb.UnimplementedLoggingServiceV2Server

	lis  net.Listener
	srv  *grpc.Server
	now  func() time.Time
	done chan struct{}

	mu        sync.Mutex
	entries   []*logpb.LogEntry
	writes    []*logpb.WriteLogEntriesRequest
	lists     []*logpb.ListLogEntriesRequest
	failCode  codes.Code
	failTimes int // remaining failures; -1 = always
	nextID    int
}

// New starts a fake Logging API on a loopback port. Close stops it.
func New() (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loggingfake: listen: %w", err)
	}
	s := &Server{lis: lis, srv: grpc.NewServer(), now: time.Now, done: make(chan struct{})}
	logpb.RegisterLoggingServiceV2Server(s.srv, s)
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis)
	}()
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ClientOptions are the options that point a real Logging client (logging,
// logadmin, apiv2) at this server without credentials.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Close stops the server.
func (s *Server) Close() {
	s.srv.Stop()
	<-s.done
}

// FailWrites makes the next n WriteLogEntries calls fail with code (n <= 0:
// every call, until FailWrites(codes.OK, 0)).
func (s *Server) FailWrites(code codes.Code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode = code
	s.failTimes = n
	if n <= 0 {
		s.failTimes = -1
	}
	if code == codes.OK {
		s.failTimes = 0
	}
}

// Seed stores entries as if written, unchanged (they must carry logName and
// timestamp).
func (s *Server) Seed(entries ...*logpb.LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		s.entries = append(s.entries, proto.Clone(e).(*logpb.LogEntry))
	}
}

// Entries returns copies of every stored entry, in arrival order.
func (s *Server) Entries() []*logpb.LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*logpb.LogEntry, len(s.entries))
	for i, e := range s.entries {
		out[i] = proto.Clone(e).(*logpb.LogEntry)
	}
	return out
}

// EntriesOf returns copies of the stored entries whose logName is exactly
// logName, in arrival order.
func (s *Server) EntriesOf(logName string) []*logpb.LogEntry {
	var out []*logpb.LogEntry
	for _, e := range s.Entries() {
		if e.GetLogName() == logName {
			out = append(out, e)
		}
	}
	return out
}

// Writes returns copies of the WriteLogEntries requests received, failed ones
// included.
func (s *Server) Writes() []*logpb.WriteLogEntriesRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*logpb.WriteLogEntriesRequest, len(s.writes))
	for i, w := range s.writes {
		out[i] = proto.Clone(w).(*logpb.WriteLogEntriesRequest)
	}
	return out
}

// Lists returns copies of the ListLogEntries requests received.
func (s *Server) Lists() []*logpb.ListLogEntriesRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*logpb.ListLogEntriesRequest, len(s.lists))
	for i, l := range s.lists {
		out[i] = proto.Clone(l).(*logpb.ListLogEntriesRequest)
	}
	return out
}

var logNameRE = regexp.MustCompile(`^(projects|organizations|folders|billingAccounts)/[^/]+/logs/[^/]+$`)

// WriteLogEntries implements LoggingServiceV2: entries inherit the request's
// logName, resource and labels as the real API does.
func (s *Server) WriteLogEntries(_ context.Context, req *logpb.WriteLogEntriesRequest) (*logpb.WriteLogEntriesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, proto.Clone(req).(*logpb.WriteLogEntriesRequest))
	if s.failTimes != 0 {
		if s.failTimes > 0 {
			s.failTimes--
		}
		return nil, status.Error(s.failCode, "loggingfake: injected failure")
	}
	now := s.now()
	var accepted []*logpb.LogEntry
	for i, in := range req.GetEntries() {
		e := proto.Clone(in).(*logpb.LogEntry)
		if e.LogName == "" {
			e.LogName = req.GetLogName()
		}
		if !logNameRE.MatchString(e.LogName) {
			return nil, status.Errorf(codes.InvalidArgument, "entries[%d]: invalid logName %q", i, e.LogName)
		}
		if e.Resource == nil && req.GetResource() != nil {
			e.Resource = proto.Clone(req.GetResource()).(*monitoredres.MonitoredResource)
		}
		if e.Resource == nil {
			return nil, status.Errorf(codes.InvalidArgument, "entries[%d]: no resource", i)
		}
		if len(req.GetLabels()) > 0 {
			labels := map[string]string{}
			for k, v := range req.GetLabels() {
				labels[k] = v
			}
			for k, v := range e.Labels {
				labels[k] = v
			}
			e.Labels = labels
		}
		if e.Timestamp == nil {
			e.Timestamp = timestamppb.New(now)
		}
		if e.InsertId == "" {
			s.nextID++
			e.InsertId = fmt.Sprintf("fake%08d", s.nextID)
		}
		e.ReceiveTimestamp = timestamppb.New(now)
		accepted = append(accepted, e)
	}
	s.entries = append(s.entries, accepted...)
	return &logpb.WriteLogEntriesResponse{}, nil
}

// ListLogEntries implements LoggingServiceV2 with the filter subset described
// in the package comment. Page tokens are offsets.
func (s *Server) ListLogEntries(_ context.Context, req *logpb.ListLogEntriesRequest) (*logpb.ListLogEntriesResponse, error) {
	s.mu.Lock()
	s.lists = append(s.lists, proto.Clone(req).(*logpb.ListLogEntriesRequest))
	all := make([]*logpb.LogEntry, len(s.entries))
	copy(all, s.entries)
	s.mu.Unlock()

	if len(req.GetResourceNames()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "resourceNames is required")
	}
	match, err := compileFilter(req.GetFilter())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "filter: %v", err)
	}
	var got []*logpb.LogEntry
	for _, e := range all {
		if underAny(e.GetLogName(), req.GetResourceNames()) && match(e) {
			got = append(got, e)
		}
	}
	desc := strings.EqualFold(strings.Join(strings.Fields(req.GetOrderBy()), " "), "timestamp desc")
	sort.SliceStable(got, func(i, j int) bool {
		ti, tj := got[i].GetTimestamp().AsTime(), got[j].GetTimestamp().AsTime()
		if desc {
			return ti.After(tj)
		}
		return ti.Before(tj)
	})
	start := 0
	if tok := req.GetPageToken(); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(got) {
			return nil, status.Errorf(codes.InvalidArgument, "bad page token %q", tok)
		}
		start = n
	}
	size := int(req.GetPageSize())
	if size <= 0 || size > 1000 {
		size = 1000
	}
	end := min(start+size, len(got))
	resp := &logpb.ListLogEntriesResponse{}
	for _, e := range got[start:end] {
		resp.Entries = append(resp.Entries, proto.Clone(e).(*logpb.LogEntry))
	}
	if end < len(got) {
		resp.NextPageToken = strconv.Itoa(end)
	}
	return resp, nil
}

func underAny(logName string, parents []string) bool {
	for _, p := range parents {
		if strings.HasPrefix(logName, strings.TrimSuffix(p, "/")+"/logs/") {
			return true
		}
	}
	return false
}

var clauseRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*)\s*(>=|<=|!=|=|<|>|:)\s*(.+)$`)

var logIDRE = regexp.MustCompile(`^log_id\(\s*("(?:[^"\\]|\\.)*")\s*\)$`)

// compileFilter returns a predicate for the clauses it understands; see the
// package comment.
func compileFilter(filter string) (func(*logpb.LogEntry) bool, error) {
	match, err := compileAnd(filter)
	if err != nil || match != nil {
		return match, err
	}
	return func(*logpb.LogEntry) bool { return true }, nil
}

// compileAnd is the conjunction of the clauses of filter it understands,
// nil when it understands none.
func compileAnd(filter string) (func(*logpb.LogEntry) bool, error) {
	var preds []func(*logpb.LogEntry) bool
	for _, clause := range splitTop(filter, " AND ") {
		p, err := compileClause(clause)
		if err != nil {
			return nil, err
		}
		if p != nil {
			preds = append(preds, p)
		}
	}
	if len(preds) == 0 {
		return nil, nil
	}
	return func(e *logpb.LogEntry) bool {
		for _, p := range preds {
			if !p(e) {
				return false
			}
		}
		return true
	}, nil
}

// compileClause is one clause's predicate, nil when it is passed through.
func compileClause(clause string) (func(*logpb.LogEntry) bool, error) {
	if inner, ok := parenthesized(clause); ok {
		return compileAnd(inner)
	}
	if parts := splitTop(clause, " OR "); len(parts) > 1 {
		var ors []func(*logpb.LogEntry) bool
		for _, part := range parts {
			p, err := compileAnd(part)
			if err != nil || p == nil {
				return nil, err // a part that does not narrow: neither does the OR
			}
			ors = append(ors, p)
		}
		return func(e *logpb.LogEntry) bool {
			for _, p := range ors {
				if p(e) {
					return true
				}
			}
			return false
		}, nil
	}
	if m := logIDRE.FindStringSubmatch(clause); m != nil {
		suffix := "/logs/" + strings.ReplaceAll(unquote(m[1]), "/", "%2F")
		return func(e *logpb.LogEntry) bool { return strings.HasSuffix(e.GetLogName(), suffix) }, nil
	}
	m := clauseRE.FindStringSubmatch(clause)
	if m == nil {
		return nil, nil // passed through
	}
	field, op, val := m[1], m[2], unquote(strings.TrimSpace(m[3]))
	switch field {
	case "timestamp":
		t, err := time.Parse(time.RFC3339Nano, val)
		if err != nil {
			return nil, fmt.Errorf("timestamp %q: %w", val, err)
		}
		return func(e *logpb.LogEntry) bool { return compareTime(e.GetTimestamp().AsTime(), op, t) }, nil
	case "logName":
		switch op {
		case "=":
			return func(e *logpb.LogEntry) bool { return e.GetLogName() == val }, nil
		case ":":
			return func(e *logpb.LogEntry) bool { return strings.Contains(e.GetLogName(), val) }, nil
		}
	case "insertId":
		if op == "=" {
			return func(e *logpb.LogEntry) bool { return e.GetInsertId() == val }, nil
		}
	}
	return nil, nil
}

// parenthesized returns what is inside s when s is one parenthesized group.
func parenthesized(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return "", false
	}
	whole := true
	walkTop(s, func(i, depth int) bool {
		if depth == 0 && i < len(s)-1 {
			whole = false // (A) OR (B): the first group closes before the end
		}
		return whole
	})
	return s[1 : len(s)-1], whole
}

// walkTop calls visit with each index of s outside quotes, after a
// parenthesis there, and the depth of parentheses at it, while visit says
// to go on.
func walkTop(s string, visit func(i, depth int) bool) {
	depth, inQuote := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote:
			i++
			continue
		case c == '"':
			inQuote = !inQuote
			continue
		case inQuote:
			continue
		case c == '(':
			depth++
			continue
		case c == ')':
			depth--
		}
		if !visit(i, depth) {
			return
		}
	}
}

func compareTime(got time.Time, op string, want time.Time) bool {
	switch op {
	case ">=":
		return !got.Before(want)
	case ">":
		return got.After(want)
	case "<":
		return got.Before(want)
	case "<=":
		return !got.After(want)
	case "=":
		return got.Equal(want)
	}
	return true
}

// splitTop splits at sep (" AND ", " OR ") outside quotes and parentheses.
func splitTop(s, sep string) []string {
	var out []string
	start := 0
	walkTop(s, func(i, depth int) bool {
		if depth == 0 && i >= start && s[i] != ')' && strings.HasPrefix(s[i:], sep) {
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + len(sep)
		}
		return true
	})
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
		return s[1 : len(s)-1]
	}
	return s
}
