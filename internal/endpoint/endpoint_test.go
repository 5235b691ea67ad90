package endpoint_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	compute "google.golang.org/api/compute/v1"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/endpoint"
)

// recorder is a server that answers 404 to everything and remembers the
// paths and Authorization headers it was sent.
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	auth  []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths, r.auth = append(r.paths, req.URL.Path), append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
		http.Error(w, `{"error":{"code":404,"message":"no","status":"NOT_FOUND"}}`, http.StatusNotFound)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) last() (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paths[len(r.paths)-1], r.auth[len(r.auth)-1]
}

// TestOptionsSendCallsToTheEndpoint: the generated clients built with
// Options call the endpoint, with or without a trailing slash, at the
// API's path, with no credentials over plain http.
func TestOptionsSendCallsToTheEndpoint(t *testing.T) {
	ctx := context.Background()
	srv := newRecorder(t)
	for _, ep := range []string{srv.URL, srv.URL + "/"} {
		opts, err := endpoint.Options("tpu endpoint", ep, "")
		if err != nil {
			t.Fatal(err)
		}
		svc, err := tpu.NewService(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = svc.Projects.Locations.Nodes.Get("projects/p/locations/z/nodes/n").Do()
		if path, auth := srv.last(); path != "/v2/projects/p/locations/z/nodes/n" || auth != "" {
			t.Errorf("tpu via %q: path %q, Authorization %q; want /v2/projects/p/locations/z/nodes/n and none", ep, path, auth)
		}
	}
	for _, ep := range []string{srv.URL, srv.URL + "/", srv.URL + "/compute/v1", srv.URL + "/compute/v1/"} {
		opts, err := endpoint.Options("compute endpoint", ep, "/compute/v1")
		if err != nil {
			t.Fatal(err)
		}
		svc, err := compute.NewService(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = svc.Instances.Get("p", "z", "i").Do()
		if path, _ := srv.last(); path != "/compute/v1/projects/p/zones/z/instances/i" {
			t.Errorf("compute via %q: path %q, want /compute/v1/projects/p/zones/z/instances/i", ep, path)
		}
	}
}

func TestOptionsRefuseWhatIsNoHTTPURL(t *testing.T) {
	if opts, err := endpoint.Options("tpu endpoint", "", ""); opts != nil || err != nil {
		t.Errorf(`Options("") = %v, %v; want nil, nil (the real API)`, opts, err)
	}
	for _, ep := range []string{"localhost:8080", "ftp://h/", "http://", "://x"} {
		if _, err := endpoint.Options("tpu endpoint", ep, ""); err == nil || err.Error() != `tpu endpoint "`+ep+`": want an http(s) URL` {
			t.Errorf("Options(%q) error = %v, want it refused by name", ep, err)
		}
	}
	if opts, err := endpoint.Options("tpu endpoint", "https://tpu.example.test", ""); err != nil || len(opts) != 1 {
		t.Errorf("https: %d options, %v; want the endpoint alone (credentials kept)", len(opts), err)
	}
}
