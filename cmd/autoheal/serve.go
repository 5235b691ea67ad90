package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/tpu-autoheal/autoheal" // registers the function exactly as deployed
	"github.com/tpu-autoheal/autoheal/function"
)

const serveHelp = `Usage: autoheal serve [--port N] [--host H]

Serves the Cloud Function locally with exactly the deployed code and
configuration: the root package's registration, the Functions Framework, and
config from the AUTOHEAL_* environment variables (AUTOHEAL_PROJECT and
AUTOHEAL_PROJECTS are required; AUTOHEAL_TPU_ENDPOINT, AUTOHEAL_RECORD_TO=stdout
and FIRESTORE_EMULATOR_HOST point it at fakes and emulators).

Point a Pub/Sub push subscription at http://HOST:PORT/projects/P/topics/T
(the path names the topic, as the Functions Framework expects), or POST a
CloudEvent. SIGINT or SIGTERM stops accepting requests and waits up to
--drain for those in flight.

` + exitCodesHelp + `
Flags:
`

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", serveHelp, stderr)
	port := fs.Int("port", defaultPort(), "`port` to listen on ($PORT when set)")
	host := fs.String("host", "127.0.0.1", "`address` to listen on (\"\" for every interface)")
	var drain time.Duration
	durationVar(fs, &drain, "drain", 30*time.Second, "on SIGINT/SIGTERM, wait this `long` for requests in flight")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve takes no arguments (got %q)", fs.Args())
	}
	if *port < 0 || *port > 65535 {
		return usagef("--port %d: out of range", *port)
	}
	// Validate the configuration up front, as the deployed function does at
	// its first request: a bad variable stops start-up with its name.
	if _, err := function.LoadConfig(); err != nil {
		return usagef("serve: %v", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return usagef("--port %d: %v", *port, err)
	}

	// funcframework.StartHostPort serves forever with no way to stop it, so it
	// listens on a private loopback port and a server we can shut down
	// gracefully forwards to it: requests still go through the Functions
	// Framework exactly as deployed.
	inner, err := startFramework(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	proxy := httputil.NewSingleHostReverseProxy(inner)
	// A fresh loopback connection per request: a kept-alive one the
	// framework's server has just closed (after a body it did not read to
	// the end, say) fails the next POST forwarded on it, and a POST is not
	// retried, so its client got a proxy error instead of the function's
	// answer (1 post in a few thousand, under load).
	proxy.Transport = &http.Transport{DisableKeepAlives: true}
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() != nil {
			return // the client gave up (as Pub/Sub does past its ack deadline): nobody to answer
		}
		// Never the default 200 (an acknowledgement) for a request the
		// function may not have seen: 502, and Pub/Sub delivers it again.
		fmt.Fprintf(stderr, "autoheal serve: forward %s: %v\n", r.URL.Path, err)
		w.WriteHeader(http.StatusBadGateway)
	}
	srv := &http.Server{Handler: wholeBodies(proxy), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "autoheal serve: function %s listening on http://%s\n", function.EntryPoint, ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(stderr, "autoheal serve: shutting down, waiting up to %v for requests in flight\n", drain)
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// startFramework starts the Functions Framework on a free loopback port and
// waits until it accepts connections.
func startFramework(ctx context.Context) (*url.URL, error) {
	// The framework serves only FUNCTION_TARGET at "/", as on Cloud Run.
	if err := os.Setenv("FUNCTION_TARGET", function.EntryPoint); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serve: pick a port for the Functions Framework: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	_, p, _ := net.SplitHostPort(addr)
	failed := make(chan error, 1)
	go func() { failed <- funcframework.StartHostPort("127.0.0.1", p) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return &url.URL{Scheme: "http", Host: addr}, nil
		}
		select {
		case err := <-failed:
			return nil, fmt.Errorf("serve: Functions Framework: %w", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("serve: Functions Framework did not listen on %s within 10s", addr)
		}
	}
}

func defaultPort() int {
	if p, err := strconv.Atoi(os.Getenv("PORT")); err == nil {
		return p
	}
	return 8080
}

// wholeBodies reads a request's body (up to one byte over the function's
// limit, function.MaxBodyBytes) before forwarding it, as Cloud Run's front
// end does: the function answers an oversized body (204, a reject record)
// without reading the rest, and a body still being forwarded to it then
// failed mid-write, and the client got a proxy error instead of the
// function's answer. A client that gives up mid-body has nobody to answer.
func wholeBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(io.LimitReader(r.Body, function.MaxBodyBytes+1))
			if err != nil {
				if r.Context().Err() == nil {
					http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
				}
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			r.TransferEncoding = nil
		}
		next.ServeHTTP(w, r)
	})
}
