package function

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// buildTimeout bounds building the Function on the first event.
const buildTimeout = time.Minute

var (
	entryMu  sync.Mutex
	entryFn  *Function
	entryCtx = context.Background()
)

// ServeHTTP is the deployed entry point (registered as EntryPoint by the
// root package, an HTTP function). On its first call it loads Config from
// the process environment and builds the Function; later calls reuse it.
//
// A configuration error is logged at severity ERROR and returned, so Pub/Sub
// retries the event, and the next event tries to build again. A bad deploy
// will not fix itself, but acknowledging would silently drop every TPU event
// until someone noticed; retried events wait in the subscription (then the
// dead-letter topic) and are handled once the configuration is fixed, while
// the function's error rate and the start-up alert page the operator.
func ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, err := entryFunction()
	if err != nil {
		logStartupError(err)
		http.Error(w, "tpu-autoheal cannot start: "+err.Error(), http.StatusInternalServerError)
		return
	}
	f.ServeHTTP(w, r)
}

func entryFunction() (*Function, error) {
	entryMu.Lock()
	defer entryMu.Unlock()
	if entryFn != nil {
		return entryFn, nil
	}
	cfg, err := LoadConfig()
	if err != nil {
		return nil, err
	}
	// Building reads the startup script (maybe from Cloud Storage) while
	// holding entryMu: bound it, so a hung read cannot block the instance.
	ctx, cancel := context.WithTimeout(entryCtx, buildTimeout)
	defer cancel()
	f, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	entryFn = f
	return f, nil
}

// logStartupError writes one structured ERROR line that Cloud Logging
// reads as an ERROR entry with jsonPayload.event "startup-error".
func logStartupError(err error) {
	diag.Error(fmt.Sprintf("tpu-autoheal cannot start: %v (fix the function's AUTOHEAL_* environment; the event will be retried)", err),
		"event", StartupErrorEvent)
}
