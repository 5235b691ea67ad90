package function

// Control messages that are ours (#19): anyone who may publish to the
// events topic can send sweep and follow messages, and each sweep lists
// every project × zone, spending TPU API quota. A sweep message is acted on
// only when the ledger's sweep gate admits it (AUTOHEAL_SWEEP_MIN_INTERVAL);
// a follow message only when it carries a nonce the function issued and
// nobody took yet. Every other one is acknowledged (a redelivery would be
// refused the same way), counted and logged, never acted on.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
)

// ControlStore is the ledger's part in telling our control messages from a
// flood; ledger.Memory and ledger.Firestore implement it.
type ControlStore interface {
	BeginSweep(ctx context.Context, id string, now time.Time, minInterval time.Duration) (ledger.SweepAdmission, error)
	EndSweep(ctx context.Context, id string, now time.Time) error
	IssueNonce(ctx context.Context, nonce string, expires time.Time) error
	TakeNonce(ctx context.Context, nonce string, now time.Time) (bool, error)
}

var (
	_ ControlStore = (*ledger.Memory)(nil)
	_ ControlStore = (*ledger.Firestore)(nil)
)

// NonceTTL is how long a follow kick's nonce waits for its message: a
// kick is delivered within seconds, or never (the sweep follows instead).
const NonceTTL = 10 * time.Minute

// IgnoredEvent is jsonPayload.event of the diagnostic line about a control
// message acknowledged and not acted on (its kind: sweep or follow).
const IgnoredEvent = "control-ignored"

// controlCounts counts the control messages not acted on.
type controlCounts struct{ sweeps, follows atomic.Int64 }

// Ignored returns how many sweep and follow messages this instance
// acknowledged without acting on them.
func (f *Function) Ignored() (sweeps, follows int64) {
	return f.ignored.sweeps.Load(), f.ignored.follows.Load()
}

func (f *Function) ignore(kind, why string) {
	c := &f.ignored.sweeps
	if kind == "follow" {
		c = &f.ignored.follows
	}
	n := c.Add(1)
	f.diag.Warn(fmt.Sprintf("%s message acknowledged, not acted on: %s", kind, why), "event", IgnoredEvent, "kind", kind, "why", why, "ignored", n)
}

// messageID is the Pub/Sub message id of a delivery (a push body, or a
// CloudEvent's id), "" when it has none.
func messageID(data []byte) string {
	var probe struct {
		Message struct {
			ID  string `json:"messageId"`
			ID2 string `json:"message_id"`
		} `json:"message"`
		ID   string          `json:"id"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(data, &probe) != nil {
		return ""
	}
	switch {
	case probe.Message.ID != "":
		return probe.Message.ID
	case probe.Message.ID2 != "":
		return probe.Message.ID2
	case len(probe.Data) > 0 && probe.Data[0] == '{':
		if id := messageID(probe.Data); id != "" {
			return id
		}
	}
	return probe.ID
}

// beginSweep says whether the sweep message data is acted on. With no
// gate (AUTOHEAL_SWEEP_MIN_INTERVAL 0, or a ledger without one) every sweep
// is. A ledger failure is returned: the sweep is retried.
func (f *Function) beginSweep(ctx context.Context, data []byte) (id string, act bool, err error) {
	if f.control == nil || f.cfg.SweepMinInterval <= 0 {
		return "", true, nil
	}
	id = messageID(data)
	a, err := f.control.BeginSweep(ctx, id, f.now(), f.cfg.SweepMinInterval)
	if err != nil {
		return id, false, err
	}
	if !a.Act {
		f.ignore("sweep", a.Why)
	}
	return id, a.Act, nil
}

// endSweep records that sweep id completed; a failure only leaves the gate
// measuring from an older sweep, and is logged.
func (f *Function) endSweep(ctx context.Context, id string) {
	if f.control == nil || f.cfg.SweepMinInterval <= 0 {
		return
	}
	if err := f.control.EndSweep(ctx, id, f.now()); err != nil {
		f.diag.Warn("sweep gate not updated", "event", SweepEvent, "error", err.Error())
	}
}

// issueNonce keeps a fresh nonce for the next kick ("" and an error when
// the ledger could not keep it: then no kick is published, since its
// message would be refused).
func (f *Function) issueNonce(ctx context.Context) (string, error) {
	if f.control == nil {
		return "", nil
	}
	n := ledger.NewNonce()
	if err := f.control.IssueNonce(ctx, n, f.now().Add(NonceTTL)); err != nil {
		return "", err
	}
	return n, nil
}

// followAdmitted says whether the nonce of a follow message (events.Delivery)
// is one the function issued and nobody took yet (taking it).
func (f *Function) followAdmitted(ctx context.Context, nonce string) bool {
	if f.control == nil {
		return true
	}
	ok, err := f.control.TakeNonce(ctx, nonce, f.now())
	switch {
	case err != nil:
		f.ignore("follow", "its nonce could not be checked ("+err.Error()+"); the next sweep follows instead")
		return false
	case !ok && nonce == "":
		f.ignore("follow", "it carries no nonce")
		return false
	case !ok:
		f.ignore("follow", "its nonce is unknown, expired or used")
		return false
	}
	return true
}
