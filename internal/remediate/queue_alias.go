package remediate

import (
	"time"

	"github.com/tpu-autoheal/autoheal/internal/policy"
)

// The queue fallback's names (internal/policy/queue.go), kept here as the
// rest of the policy's are (policy_alias.go).

// QueueState is a queued recovery's queue.
type QueueState = policy.QueueState

// Phases and effects of the queue fallback, and its defaults.
const (
	PhaseQueueCreating = policy.PhaseQueueCreating
	PhaseQueued        = policy.PhaseQueued
	PhaseQueueDeleting = policy.PhaseQueueDeleting
	EffectCreateQR     = policy.EffectCreateQR
	EffectDeleteQR     = policy.EffectDeleteQR
	DefaultMaxRequeues = policy.DefaultMaxRequeues
	QueueLookAgain     = policy.QueueLookAgain
)

// RecoveryCap is how long rec may be under way before it is abandoned.
func RecoveryCap(rec Recovery) time.Duration { return policy.RecoveryCap(rec) }
