package ledger

import (
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// The ledger converts on every read, and a takeover converts what a
// Firestore read converted already: once must be all it takes. Today's
// phases other than saved are never changed, and no conversion ends or
// reopens a recovery.
func TestUpgradeRecoveryIsIdempotentAndKeepsTodaysPhases(t *testing.T) {
	phases := []remediate.Phase{remediate.PhaseClaimed, remediate.PhaseDeleting, remediate.PhaseDeleted, remediate.PhaseCreating,
		remediate.PhaseCreated, remediate.PhaseResetting, remediate.PhaseReset, remediate.PhaseRecovered, remediate.PhaseClosed,
		remediate.PhaseAbandoned, remediate.PhaseSaved, remediate.PhaseDone, remediate.PhaseFailed, ""}
	for _, action := range []remediate.Action{remediate.ActionRecreate, remediate.ActionReset} {
		for _, p := range phases {
			for _, sent := range []bool{false, true} {
				for _, op := range []string{"", "operations/o"} {
					for _, qr := range []string{"", "queuedResources/q"} {
						r := remediate.Recovery{Action: action, Phase: p, DeleteSent: sent, DeleteOp: op, QueuedResource: qr}
						once := upgradeRecovery(r)
						if twice := upgradeRecovery(once); twice.Phase != once.Phase || twice.DeleteSent != once.DeleteSent {
							t.Errorf("%s %s sent=%v op=%q qr=%q: once %s, twice %s", action, p, sent, op, qr, once.Phase, twice.Phase)
						}
						if once.Unfinished() != r.Unfinished() {
							t.Errorf("%s %s: conversion to %s changes whether it is finished", action, p, once.Phase)
						}
						legacyOfReset := action == remediate.ActionReset && (p == remediate.PhaseDeleting || p == remediate.PhaseDeleted || p == remediate.PhaseCreating)
						if once.Phase != p && p != remediate.PhaseSaved && p != remediate.PhaseFailed && !legacyOfReset {
							t.Errorf("%s %s: today's phase converted to %s", action, p, once.Phase)
						}
					}
				}
			}
		}
	}
}
