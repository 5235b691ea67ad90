package remediate

import (
	"context"
	"time"
)

// Kicker publishes one follow kick: a message that comes back to some
// instance, which then follows the unfinished recoveries (Follow). The
// function's issues a nonce in the ledger first and publishes to Pub/Sub
// (function/kick.go). Deps.Kicker; nil = no kicks.
type Kicker interface {
	Kick(ctx context.Context) error
}

// KickEvent is jsonPayload.event of the diagnostic lines about follow
// kicks (published, or not).
const KickEvent = "follow-kick"

// KickTimeout bounds one kick: a kick is an optimisation (the minute sweep
// follows anyway), so a slow publish must not hold the delivery.
const KickTimeout = 10 * time.Second

// Why a kick is published (the diagnostic's "why").
const (
	KickDelivery = "delivery" // a delivery left a recovery waiting, nobody following
	KickChainWhy = "chain"    // a follower's window ended with looks still due
)

// KickAfter is the kick policy after a delivery whose record is r, in one
// place: when the delivery left a recovery waiting and nobody follows
// (KickWanted claims the kick), publish one; when publishing fails, forget
// the claim (KickFailed) so the next delivery kicks again. It never fails
// its caller: the minute sweep is the backstop.
func (h *Handler) KickAfter(ctx context.Context, r Record) {
	if h.Kicker != nil && h.KickWanted(ctx, r) {
		h.kick(ctx, KickDelivery)
	}
}

// KickChain publishes one more kick for a follower that ended with looks
// still due (wanted: FollowResult.Chain, SweepResult.Chain), unless a kick
// is already pending or a follower took over (ChainWanted).
func (h *Handler) KickChain(ctx context.Context, wanted bool) {
	if wanted && h.Kicker != nil && h.ChainWanted(ctx) {
		h.kick(ctx, KickChainWhy)
	}
}

func (h *Handler) kick(ctx context.Context, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), KickTimeout)
	defer cancel()
	if err := h.Kicker.Kick(ctx); err != nil {
		h.Log.Warn("follow kick not published; the next sweep follows instead", "event", KickEvent, "why", why, "error", err.Error())
		h.KickFailed(ctx) // the next delivery may kick again at once
		return
	}
	h.Log.Info("follow kick published ("+why+")", "event", KickEvent, "why", why)
}
