package function_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// fakeKicker counts the follow kicks the function publishes.
type fakeKicker struct {
	mu     sync.Mutex
	n      int
	nonces []string
	fail   error
}

var _ function.Kicker = (*fakeKicker)(nil)

func (k *fakeKicker) Kick(_ context.Context, nonce string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail != nil {
		return k.fail
	}
	k.n++
	k.nonces = append(k.nonces, nonce)
	return nil
}

// last is the follow message of the last kick published.
func (k *fakeKicker) last() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return []byte(events.FollowKick(k.nonces[len(k.nonces)-1]))
}

func (k *fakeKicker) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

// failingLedger is the memory ledger whose reads of unfinished recoveries
// and of the follower lease fail, as an unreachable Firestore would.
type failingLedger struct{ *ledger.Memory }

func (failingLedger) Unfinished(context.Context) ([]remediate.Recovery, error) {
	return nil, errors.New("firestore: unavailable")
}

func (failingLedger) TakeFollower(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, errors.New("firestore: unavailable")
}

// kickFunction builds the function over the fixture fleet with kicker k and
// store s; clock nil means the wall clock (follow runs really follow).
func kickFunction(t *testing.T, k function.Kicker, s function.Ledger, clock func() time.Time, env map[string]string, fakeOpts ...tpufake.Option) (*function.Function, *tpufake.Server, *sliceRecorder, *syncBuffer) {
	t.Helper()
	fleet, err := tpufake.ReadFleet(bytes.NewReader(readTestdata(t, "fleet.json")))
	if err != nil {
		t.Fatal(err)
	}
	fake := tpufake.New(fleet, fakeOpts...)
	t.Cleanup(fake.Close)
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e := minimalEnv()
	e["AUTOHEAL_PROJECTS"] = "acme-ml"
	e["AUTOHEAL_ZONES"] = "us-central2-b"
	for key, v := range env {
		e[key] = v
	}
	cfg, err := load(t, e)
	if err != nil {
		t.Fatal(err)
	}
	recs, diag := &sliceRecorder{}, &syncBuffer{}
	opts := []function.Option{function.WithDiagnostics(diag), function.WithTPU(tpuapi.New(svc)), function.WithStore(s),
		function.WithRecorder(recs), function.WithKicker(k)}
	if clock != nil {
		opts = append(opts, function.WithClock(clock))
	}
	fn, err := function.New(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { fn.Close() })
	return fn, fake, recs, diag
}

// healthyEntry is the fixture's terminate entry, about the fleet's READY
// and HEALTHY node instead (another insertId).
func healthyEntry(t *testing.T) []byte {
	s := strings.ReplaceAll(string(readTestdata(t, "terminate-maintenance.json")), "us-central2-b/nodes/llm-v4-128", "europe-west4-a/nodes/v3-8-exp")
	return []byte(strings.ReplaceAll(s, "1x7kq2ed4a9f", "healthy-1"))
}

func TestDeliveryKicksAFollower(t *testing.T) {
	at := func() time.Time { return eventTime.Add(time.Minute) }
	terminate := func(t *testing.T) []byte { return readTestdata(t, "terminate-maintenance.json") }
	for _, tc := range []struct {
		name       string
		deliveries func(t *testing.T) [][]byte
		held       bool // a follower holds the lease
		env        map[string]string
		want       int
	}{
		{"a delivery that starts a recovery publishes one kick", func(t *testing.T) [][]byte { return [][]byte{terminate(t)} }, false, nil, 1},
		{"the same entry delivered again publishes no second kick", func(t *testing.T) [][]byte { return [][]byte{terminate(t), terminate(t)} }, false, nil, 1},
		{"a healthy node's entry publishes none", func(t *testing.T) [][]byte { return [][]byte{healthyEntry(t)} }, false, nil, 0},
		{"no kick while a follower holds the lease", func(t *testing.T) [][]byte { return [][]byte{terminate(t)} }, true, nil, 0},
		{"no kick when following is off", func(t *testing.T) [][]byte { return [][]byte{terminate(t)} }, false, map[string]string{"AUTOHEAL_SWEEP_FOLLOW": "0s"}, 0},
		{"no kick in dry run", func(t *testing.T) [][]byte { return [][]byte{terminate(t)} }, false, map[string]string{"AUTOHEAL_DRY_RUN": "true"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := ledger.NewMemory()
			if tc.held {
				if ok, err := store.TakeFollower(context.Background(), "follower", at(), at().Add(time.Minute)); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			k := &fakeKicker{}
			fn, _, recs, _ := kickFunction(t, k, store, at, tc.env)
			for _, d := range tc.deliveries(t) {
				if err := fn.HandleMessage(context.Background(), pushBody(d)); err != nil {
					t.Fatalf("HandleMessage: %v", err)
				}
			}
			if got := k.count(); got != tc.want {
				t.Errorf("kicks = %d, want %d (records: %v)", got, tc.want, actions(recs.records()))
			}
			for _, r := range recs.records() {
				if r.Action == remediate.ActionReject {
					t.Errorf("a delivery was rejected (%s): the case tests nothing", r.Reason)
				}
			}
		})
	}
}

func TestFailedKickIsLoggedAndTheDeliverySucceeds(t *testing.T) {
	k := &fakeKicker{fail: errors.New("pubsub: permission denied")}
	fn, fake, _, diag := kickFunction(t, k, ledger.NewMemory(), func() time.Time { return eventTime.Add(time.Minute) }, nil)
	if err := fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatalf("HandleMessage with a failing kick: %v; want the delivery done", err)
	}
	if fake.Count("nodes.delete", node) != 1 {
		t.Errorf("deletes of %s = %d, want 1", node, fake.Count("nodes.delete", node))
	}
	if !strings.Contains(diag.String(), "follow kick not published") || !strings.Contains(diag.String(), "permission denied") {
		t.Errorf("diagnostics do not say the kick failed:\n%s", diag.String())
	}
}

// A follow message is answered 2xx whatever happens (never redelivered into
// the dead-letter topic), and it is a follow, not a log entry to reject.
func TestFollowMessageIsAlwaysAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mem      *ledger.Memory
		failing  bool
		noNonce  bool
		wantDiag string
	}{
		{"the ledger fails", ledger.NewMemory(), true, false, "follow failed"},
		{"nothing to follow", ledger.NewMemory(), false, false, ""},
		{"no nonce: not acted on", ledger.NewMemory(), false, true, "follow message acknowledged, not acted on: it carries no nonce"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var store function.Ledger = tc.mem
			if tc.failing {
				store = failingLedger{tc.mem}
			}
			fn, _, recs, diag := kickFunction(t, &fakeKicker{}, store, nil, map[string]string{"AUTOHEAL_SWEEP_FOLLOW": "2s"})
			msg := events.FollowMessage
			if !tc.noNonce {
				n := ledger.NewNonce()
				if err := tc.mem.IssueNonce(context.Background(), n, time.Now().Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
				msg = events.FollowKick(n)
			}
			w := httptest.NewRecorder()
			fn.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(pushBody([]byte(msg)))))
			if w.Code/100 != 2 {
				t.Errorf("follow message answered %d %s, want 2xx", w.Code, w.Body.String())
			}
			if got := recs.records(); len(got) != 0 {
				t.Errorf("records %v: a follow message is not a log entry (rejected?)", actions(got))
			}
			if tc.wantDiag != "" && !strings.Contains(diag.String(), tc.wantDiag) {
				t.Errorf("diagnostics do not contain %q:\n%s", tc.wantDiag, diag.String())
			}
		})
	}
}

// The kick's whole path in one process: the delivery issues the delete and
// kicks; the follow message it stands for finishes the recreate, on the
// wall clock, with no sweep.
func TestFollowMessageFinishesTheRecoveryTheDeliveryStarted(t *testing.T) {
	k := &fakeKicker{}
	fn, fake, _, _ := kickFunction(t, k, ledger.NewMemory(), nil, map[string]string{
		"AUTOHEAL_MAX_EVENT_AGE": "87600h", // the fixture is from 2026-11-20
		"AUTOHEAL_LOOK_AGAIN":    "50ms",
		"AUTOHEAL_SWEEP_FOLLOW":  "20s",
	}, tpufake.WithOperationDelay("delete", 100*time.Millisecond), tpufake.WithOperationDelay("create", 100*time.Millisecond))
	if err := fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	if k.count() != 1 {
		t.Fatalf("kicks after the delivery = %d, want 1", k.count())
	}
	if err := fn.HandleMessage(context.Background(), pushBody(k.last())); err != nil {
		t.Fatal(err)
	}
	var state string
	for _, n := range fake.Fleet().Nodes {
		if n.Name == node {
			state = n.State
		}
	}
	if state != "READY" || fake.Count("nodes.create", node) != 1 {
		t.Errorf("after the follow message: %s is %s with %d creates, want READY after exactly one", node, state, fake.Count("nodes.create", node))
	}
	if k.count() != 1 {
		t.Errorf("kicks = %d, want 1: a follower that finished everything does not chain", k.count())
	}
}

// publisherServer is Pub/Sub's Publisher service in process, speaking the
// real gRPC protocol: it keeps what was published.
type publisherServer struct {
	pubsubpb.UnimplementedPublisherServer
	mu   sync.Mutex
	msgs []string // "topic data"
}

func (p *publisherServer) Publish(_ context.Context, req *pubsubpb.PublishRequest) (*pubsubpb.PublishResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, m := range req.Messages {
		p.msgs = append(p.msgs, req.Topic+" "+string(m.Data))
		ids = append(ids, fmt.Sprint(len(p.msgs)))
	}
	return &pubsubpb.PublishResponse{MessageIds: ids}, nil
}

func (p *publisherServer) published() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}

// The real publisher (AUTOHEAL_KICK_TOPIC) against an in-process Publisher
// service: the delivery's kick arrives on the topic as exactly the follow
// message; a healthy delivery publishes nothing.
func TestKickTopicReceivesTheFollowMessage(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pubSrv := &publisherServer{}
	gs := grpc.NewServer()
	pubsubpb.RegisterPublisherServer(gs, pubSrv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	const topic = "projects/acme-ops/topics/tpu-autoheal"
	ctx := context.Background()

	fleet, err := tpufake.ReadFleet(bytes.NewReader(readTestdata(t, "fleet.json")))
	if err != nil {
		t.Fatal(err)
	}
	fake := tpufake.New(fleet)
	t.Cleanup(fake.Close)
	svc, err := fake.Service(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := minimalEnv()
	e["AUTOHEAL_PROJECTS"] = "acme-ml"
	e["AUTOHEAL_KICK_TOPIC"] = topic
	cfg, err := load(t, e)
	if err != nil {
		t.Fatal(err)
	}
	diag, recs := &syncBuffer{}, &sliceRecorder{}
	fn, err := function.New(ctx, cfg, function.WithDiagnostics(diag), function.WithTPU(tpuapi.New(svc)), function.WithStore(ledger.NewMemory()),
		function.WithRecorder(recs), function.WithClock(func() time.Time { return eventTime.Add(time.Minute) }),
		function.WithPubSubOptions(option.WithEndpoint(lis.Addr().String()), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	if err := fn.HandleMessage(ctx, pushBody(healthyEntry(t))); err != nil {
		t.Fatal(err)
	}
	if got := pubSrv.published(); len(got) != 0 {
		t.Fatalf("published %v after a healthy delivery, want nothing", got)
	}
	if err := fn.HandleMessage(ctx, pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	got := pubSrv.published()
	if len(got) != 1 || !strings.HasPrefix(got[0], topic+" ") {
		t.Fatalf("messages on the topic: %q, want one on %s\ndiagnostics:\n%s\nrecords: %+v", got, topic, diag.String(), recs.records())
	}
	payload := []byte(strings.TrimPrefix(got[0], topic+" "))
	if n := events.FollowNonce(payload); !events.IsFollow(payload) || len(n) != 32 {
		t.Errorf("published %s; want the follow message with a 32-digit nonce", payload)
	}
}

// Killed mutation: a failed kick publish leaving its pending mark. The
// mark keeps every other delivery from kicking for KickPending; after a
// publish that failed nothing is pending, so the next delivery that leaves
// a recovery waiting must be free to kick at once.
func TestFailedKickClearsThePendingMark(t *testing.T) {
	at := func() time.Time { return eventTime.Add(time.Minute) }
	store := ledger.NewMemory()
	k := &fakeKicker{fail: errors.New("pubsub: unavailable")}
	fn, _, _, diag := kickFunction(t, k, store, at, nil)
	if err := fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatalf("HandleMessage: %v", err)
	}
	if !strings.Contains(diag.String(), "follow kick not published") {
		t.Fatalf("the kick did not fail: the case tests nothing\n%s", diag.String())
	}
	// Within KickPending of the failed kick, the next kick is claimable.
	ok, err := store.ClaimKick(context.Background(), at(), remediate.KickPending)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Error("after a failed kick, ClaimKick = false: its pending mark was left, so no delivery kicks for KickPending")
	}
}
