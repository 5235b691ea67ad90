// Package legacyfake is a simulated Cloud TPU v1 control plane for tests: an
// in-process gRPC server on a loopback listener implementing the
// google.cloud.tpu.v1.Tpu node calls and google.longrunning.Operations
// GetOperation, so the real cloud.google.com/go/tpu/apiv1 client talks to it
// unchanged. It keeps legacy nodes and operations in memory (an operation is
// done on its first GetOperation), answers NOT_FOUND and ALREADY_EXISTS like
// the real API, can be told to fail (FailRule) and counts requests.
//
// It implements only nodes get/list/create/delete and operations get. It
// must never listen beyond loopback, and nothing outside tests may use it.
package legacyfake

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"cloud.google.com/go/tpu/apiv1/tpupb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// RPC names used by FailRule, Count and Requests.
const (
	RPCGet          = "nodes.get"
	RPCList         = "nodes.list"
	RPCCreate       = "nodes.create"
	RPCDelete       = "nodes.delete"
	RPCGetOperation = "operations.get"
	// RPCCreateResult fails the create operation's result (a stockout
	// after the create was accepted) instead of the call.
	RPCCreateResult = "operation:nodes.create"
)

// FailRule makes matching requests fail with a gRPC status.
type FailRule struct {
	RPC     string     // one of the RPC* names
	Name    string     // resource name (node, or parent for list); "" = any
	Code    codes.Code // e.g. codes.Unavailable, codes.ResourceExhausted
	Message string
	Times   int // how many requests fail; 0 = all
}

// Request is one logged request.
type Request struct {
	RPC  string
	Name string // node name (create: parent/nodes/nodeId), parent for list, operation name
}

type operation struct {
	op     *longrunningpb.Operation
	onDone func() *status.Status // runs under the lock on the first poll
}

// Server is the fake v1 API. Close it when done.
type Server struct {
	lis net.Listener
	srv *grpc.Server

	mu      sync.Mutex
	nodes   map[string]*tpupb.Node
	ops     map[string]*operation
	seq     int
	reqs    []Request
	creates []*tpupb.CreateNodeRequest
	rules   []*FailRule
	now     func() time.Time
}

// New starts a server holding nodes (their names must be full resource
// names, projects/P/locations/Z/nodes/N).
func New(nodes ...*tpupb.Node) *Server {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("legacyfake: listen: %v", err))
	}
	s := &Server{lis: lis, srv: grpc.NewServer(), nodes: map[string]*tpupb.Node{}, ops: map[string]*operation{}, now: time.Now}
	for _, n := range nodes {
		s.SetNode(n)
	}
	tpupb.RegisterTpuServer(s.srv, tpuServer{s: s})
	longrunningpb.RegisterOperationsServer(s.srv, opsServer{s: s})
	go func() { _ = s.srv.Serve(lis) }()
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Stop() }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ClientOptions are the options that point the real apiv1 client at the
// server: its endpoint, no credentials, a plaintext connection.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// SetNode puts a copy of n in the fleet (ApiVersion V1 when unset).
func (s *Server) SetNode(n *tpupb.Node) {
	c := proto.Clone(n).(*tpupb.Node)
	if c.ApiVersion == tpupb.Node_API_VERSION_UNSPECIFIED {
		c.ApiVersion = tpupb.Node_V1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[c.Name] = c
}

// Node returns a copy of the named node, nil if there is none.
func (s *Server) Node(name string) *tpupb.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[name]; ok {
		return proto.Clone(n).(*tpupb.Node)
	}
	return nil
}

// Creates returns copies of the create requests received, in order.
func (s *Server) Creates() []*tpupb.CreateNodeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*tpupb.CreateNodeRequest, 0, len(s.creates))
	for _, c := range s.creates {
		out = append(out, proto.Clone(c).(*tpupb.CreateNodeRequest))
	}
	return out
}

// Fail adds a failure rule; rules are matched in the order added.
func (s *Server) Fail(r FailRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &r)
}

// Requests returns the requests received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Count is how many requests of rpc on name were received ("" = any name).
func (s *Server) Count(rpc, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if r.RPC == rpc && (name == "" || r.Name == name) {
			n++
		}
	}
	return n
}

// begin logs a request and returns the error of a matching rule. Callers
// hold s.mu.
func (s *Server) begin(rpc, name string) error {
	s.reqs = append(s.reqs, Request{RPC: rpc, Name: name})
	return s.failure(rpc, name)
}

func (s *Server) failure(rpc, name string) error {
	for i, r := range s.rules {
		if r.RPC != rpc || (r.Name != "" && r.Name != name) {
			continue
		}
		if r.Times > 0 {
			r.Times--
			if r.Times == 0 {
				s.rules = slices.Delete(s.rules, i, i+1)
			}
		}
		return status.Error(r.Code, r.Message)
	}
	return nil
}

func (s *Server) newOp(location, verb, target string, onDone func() *status.Status) *longrunningpb.Operation {
	s.seq++
	name := fmt.Sprintf("%s/operations/operation-%d-%s", location, s.seq, verb)
	md, _ := anypb.New(&tpupb.OperationMetadata{CreateTime: timestamppb.New(s.now()), Target: target, Verb: verb, ApiVersion: "v1"})
	op := &longrunningpb.Operation{Name: name, Metadata: md}
	s.ops[name] = &operation{op: op, onDone: onDone}
	return proto.Clone(op).(*longrunningpb.Operation)
}

type tpuServer struct {
	tpupb.UnimplementedTpuServer
	s *Server
}

func (t tpuServer) GetNode(_ context.Context, req *tpupb.GetNodeRequest) (*tpupb.Node, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(RPCGet, req.GetName()); err != nil {
		return nil, err
	}
	n, ok := s.nodes[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Resource '%s' was not found", req.GetName())
	}
	return proto.Clone(n).(*tpupb.Node), nil
}

// ListNodes lists the nodes under parent (location "-" = every location) by
// name; the page token is the index of the next node.
func (t tpuServer) ListNodes(_ context.Context, req *tpupb.ListNodesRequest) (*tpupb.ListNodesResponse, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(RPCList, req.GetParent()); err != nil {
		return nil, err
	}
	project, location, ok := splitParent(req.GetParent())
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "parent %q: want projects/P/locations/L", req.GetParent())
	}
	var names []string
	for name := range s.nodes {
		p, l, _ := splitParent(name[:max(0, strings.Index(name, "/nodes/"))])
		if p == project && (location == "-" || l == location) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	start := 0
	if tok := req.GetPageToken(); tok != "" {
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i > len(names) {
			return nil, status.Errorf(codes.InvalidArgument, "page token %q", tok)
		}
		start = i
	}
	size := int(req.GetPageSize())
	if size <= 0 {
		size = 50
	}
	end := min(start+size, len(names))
	resp := &tpupb.ListNodesResponse{}
	for _, name := range names[start:end] {
		resp.Nodes = append(resp.Nodes, proto.Clone(s.nodes[name]).(*tpupb.Node))
	}
	if end < len(names) {
		resp.NextPageToken = strconv.Itoa(end)
	}
	return resp, nil
}

func splitParent(parent string) (project, location string, ok bool) {
	p := strings.Split(parent, "/")
	if len(p) != 4 || p[0] != "projects" || p[2] != "locations" || p[1] == "" || p[3] == "" {
		return "", "", false
	}
	return p[1], p[3], true
}

// CreateNode adds the node in CREATING; it is READY and HEALTHY when its
// operation is first polled.
func (t tpuServer) CreateNode(_ context.Context, req *tpupb.CreateNodeRequest) (*longrunningpb.Operation, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	name := req.GetParent() + "/nodes/" + req.GetNodeId()
	if err := s.begin(RPCCreate, name); err != nil {
		return nil, err
	}
	if _, _, ok := splitParent(req.GetParent()); !ok || req.GetNodeId() == "" || req.GetNode() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "create %q: want parent projects/P/locations/L, a node id and a node", name)
	}
	if _, ok := s.nodes[name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "Resource '%s' already exists", name)
	}
	s.creates = append(s.creates, proto.Clone(req).(*tpupb.CreateNodeRequest))
	n := proto.Clone(req.GetNode()).(*tpupb.Node)
	n.Name = name
	n.State = tpupb.Node_CREATING
	n.Health = tpupb.Node_HEALTH_UNSPECIFIED
	n.ApiVersion = tpupb.Node_V1
	n.CreateTime = timestamppb.New(s.now())
	s.nodes[name] = n
	return s.newOp(req.GetParent(), "create", name, func() *status.Status {
		if err := s.failure(RPCCreateResult, name); err != nil {
			delete(s.nodes, name)
			return status.Convert(err)
		}
		if cur, ok := s.nodes[name]; ok && cur == n {
			n.State = tpupb.Node_READY
			n.Health = tpupb.Node_HEALTHY
			n.NetworkEndpoints = []*tpupb.NetworkEndpoint{{IpAddress: "10.240.0.2", Port: 8470}}
		}
		return nil
	}), nil
}

// DeleteNode marks the node DELETING; it is gone when its operation is
// first polled.
func (t tpuServer) DeleteNode(_ context.Context, req *tpupb.DeleteNodeRequest) (*longrunningpb.Operation, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	name := req.GetName()
	if err := s.begin(RPCDelete, name); err != nil {
		return nil, err
	}
	n, ok := s.nodes[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Resource '%s' was not found", name)
	}
	n.State = tpupb.Node_DELETING
	return s.newOp(name[:max(0, strings.Index(name, "/nodes/"))], "delete", name, func() *status.Status {
		if s.nodes[name] == n {
			delete(s.nodes, name)
		}
		return nil
	}), nil
}

type opsServer struct {
	longrunningpb.UnimplementedOperationsServer
	s *Server
}

func (o opsServer) GetOperation(_ context.Context, req *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(RPCGetOperation, req.GetName()); err != nil {
		return nil, err
	}
	op, ok := s.ops[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Operation '%s' was not found", req.GetName())
	}
	if !op.op.Done {
		op.op.Done = true
		if st := op.onDone(); st != nil {
			op.op.Result = &longrunningpb.Operation_Error{Error: st.Proto()}
		}
	}
	return proto.Clone(op.op).(*longrunningpb.Operation), nil
}
