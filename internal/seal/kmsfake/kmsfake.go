// Package kmsfake is an in-process Cloud KMS that speaks KMS's gRPC
// protocol, for tests of code that uses the real client
// (cloud.google.com/go/kms/apiv1). It serves MacSign and MacVerify over
// HMAC-SHA256 key versions it holds, checks and returns the CRC32C
// integrity fields as Cloud KMS does, and can be made to fail, hang or
// garble its next answers. Every other method is unimplemented.
//
// It listens on a loopback port only, and is never a model of KMS's
// access control: every caller may use every key.
package kmsfake

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"net"
	"sync"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Methods, as Fault and Calls name them.
const (
	MacSign   = "MacSign"
	MacVerify = "MacVerify"
)

// maxData is Cloud KMS's limit on MacSign and MacVerify data.
const maxData = 64 * 1024

// Fault is what the next call of a method does instead of answering.
type Fault struct {
	// Code, when not OK, is the status the call fails with.
	Code codes.Code
	// Hang makes the call wait until its context ends (the client's
	// deadline), then fail with the context's error.
	Hang bool
	// Garble, when set, changes the answer before it is sent (a
	// *kmspb.MacSignResponse or *kmspb.MacVerifyResponse).
	Garble func(resp any)
}

type keyVersion struct {
	secret  []byte
	enabled bool
}

// Server is the fake. Close it when done.
type Server struct {
	lis net.Listener
	srv *grpc.Server

	mu       sync.Mutex
	versions map[string]*keyVersion
	faults   map[string][]Fault
	calls    []string
}

// New starts a server with no key versions.
func New() *Server {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("kmsfake: listen: %v", err))
	}
	s := &Server{lis: lis, srv: grpc.NewServer(), versions: map[string]*keyVersion{}, faults: map[string][]Fault{}}
	kmspb.RegisterKeyManagementServiceServer(s.srv, kmsServer{s: s})
	go func() { _ = s.srv.Serve(lis) }()
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Stop() }

// ClientOptions point the real client at the server: its address, no
// credentials, a plaintext connection.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.lis.Addr().String()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// AddVersion adds an enabled HMAC-SHA256 key version with this secret,
// under its full resource name.
func (s *Server) AddVersion(name string, secret []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions[name] = &keyVersion{secret: append([]byte(nil), secret...), enabled: true}
}

// DisableVersion makes a version refuse use (FAILED_PRECONDITION), as a
// disabled or destroyed version does.
func (s *Server) DisableVersion(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.versions[name]; ok {
		v.enabled = false
	}
}

// Inject queues f for the next call of method (MacSign or MacVerify);
// faults are used in the order injected, one per call.
func (s *Server) Inject(method string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], f)
}

// Calls lists the calls received, by method, in order.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// begin records a call and returns its fault, if one was queued (else
// the zero Fault, which does nothing).
func (s *Server) begin(method string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method)
	q := s.faults[method]
	if len(q) == 0 {
		return Fault{}
	}
	s.faults[method] = q[1:]
	return q[0]
}

// fail applies f's failure, if it has one.
func fail(ctx context.Context, f Fault) error {
	if f.Hang {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if f.Code != codes.OK {
		return status.Errorf(f.Code, "kmsfake: injected %s", f.Code)
	}
	return nil
}

// secret returns an enabled version's secret, or the status KMS answers.
func (s *Server) secret(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.versions[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "CryptoKeyVersion %s not found.", name)
	}
	if !v.enabled {
		return nil, status.Errorf(codes.FailedPrecondition, "%s is not enabled, current state is: DISABLED.", name)
	}
	return v.secret, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) int64 { return int64(crc32.Checksum(b, castagnoli)) }

// checkCRC is KMS's check of a checksum the client sent.
func checkCRC(field string, b []byte, sent *wrapperspb.Int64Value) error {
	if sent != nil && sent.GetValue() != crc(b) {
		return status.Errorf(codes.InvalidArgument, "The checksum in field %s did not match the data in field %s.", field+"_crc32c", field)
	}
	return nil
}

func mac(secret, data []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(data)
	return m.Sum(nil)
}

type kmsServer struct {
	kmspb.UnimplementedKeyManagementServiceServer
	s *Server
}

// start is what MacSign and MacVerify do first: record the call, apply
// a queued fault's failure, find the version's secret and check the
// data's size and checksum.
func (k kmsServer) start(ctx context.Context, method, name string, data []byte, dataCRC *wrapperspb.Int64Value) (Fault, []byte, error) {
	f := k.s.begin(method)
	if err := fail(ctx, f); err != nil {
		return f, nil, err
	}
	secret, err := k.s.secret(name)
	if err != nil {
		return f, nil, err
	}
	if len(data) > maxData {
		return f, nil, status.Errorf(codes.InvalidArgument, "data is %d bytes, at most %d", len(data), maxData)
	}
	return f, secret, checkCRC("data", data, dataCRC)
}

func (k kmsServer) MacSign(ctx context.Context, req *kmspb.MacSignRequest) (*kmspb.MacSignResponse, error) {
	f, secret, err := k.start(ctx, MacSign, req.GetName(), req.GetData(), req.GetDataCrc32C())
	if err != nil {
		return nil, err
	}
	tag := mac(secret, req.GetData())
	resp := &kmspb.MacSignResponse{Name: req.GetName(), Mac: tag, MacCrc32C: wrapperspb.Int64(crc(tag)),
		VerifiedDataCrc32C: req.GetDataCrc32C() != nil, ProtectionLevel: kmspb.ProtectionLevel_SOFTWARE}
	if f.Garble != nil {
		f.Garble(resp)
	}
	return resp, nil
}

func (k kmsServer) MacVerify(ctx context.Context, req *kmspb.MacVerifyRequest) (*kmspb.MacVerifyResponse, error) {
	f, secret, err := k.start(ctx, MacVerify, req.GetName(), req.GetData(), req.GetDataCrc32C())
	if err != nil {
		return nil, err
	}
	if err := checkCRC("mac", req.GetMac(), req.GetMacCrc32C()); err != nil {
		return nil, err
	}
	ok := hmac.Equal(req.GetMac(), mac(secret, req.GetData()))
	resp := &kmspb.MacVerifyResponse{Name: req.GetName(), Success: ok, VerifiedSuccessIntegrity: ok,
		VerifiedDataCrc32C: req.GetDataCrc32C() != nil, VerifiedMacCrc32C: req.GetMacCrc32C() != nil,
		ProtectionLevel: kmspb.ProtectionLevel_SOFTWARE}
	if f.Garble != nil {
		f.Garble(resp)
	}
	return resp, nil
}
