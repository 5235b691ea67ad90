package swarm

import (
	"context"
	"fmt"
	"testing"
)

// baseKinds is Enabled as it was when these seeds were found: the rows name
// their kinds in full, so enabling a kind later does not change their plans.
const baseKinds = "ambiguous-create,ambiguous-maintenance,ambiguous-patch,errors,forged,lag,ledger-abort,ledger-lost-commit,page-skip,person-pause,unaudited"

// oldPeople is the kinds the person-relabel, person-maintenance and
// person-recreate seeds of the first runs were found with.
const oldPeople = "ambiguous-create,ambiguous-maintenance,ambiguous-patch,errors,forged,lag,ledger-abort,ledger-lost-commit,page-skip,person-maintenance,person-recreate,person-relabel,unaudited"

// capKinds is every kind when stockout and queue-fail went on.
const capKinds = "ambiguous-create,ambiguous-delete,ambiguous-maintenance,ambiguous-patch,errors,forged,lag,ledger-abort,ledger-lost-commit,page-empty,page-loop,page-repeat,page-skip,person-delete,person-maintenance,person-pause,person-recreate,person-relabel,person-stop,queue-fail,stockout,unaudited"

// TestSwarmRegressions replays seeds that once broke an invariant, each
// with the exact kinds it was found with.
func TestSwarmRegressions(t *testing.T) {
	for _, tc := range []struct {
		seed  uint64
		kinds string
		why   string
	}{
		{54, baseKinds + ",person-stop", "a person stops the node right after our delete was accepted: STOPPED closed the recovery, the delete landed, the node was lost"},
		{85, baseKinds + ",person-relabel", "a person opts the node out right after our delete: closed on the labels while the delete ran; node lost"},
		{885, oldPeople, "a person's relabel during our delete (node lost)"},
		{910, oldPeople, "a person's relabel during our delete (node lost)"},
		{562, oldPeople, "a person's maintenance over our delete: READY read once closed the recovery; node lost"},
		{658, oldPeople, "a person's maintenance over our delete (node lost)"},
		{677, oldPeople, "a person's maintenance over our delete (node lost)"},
		{1021, "ambiguous-create,ambiguous-maintenance,ambiguous-patch,errors,forged,lag,ledger-abort,ledger-lost-commit,page-skip,person-pause,person-recreate,unaudited",
			"a person recreates the node between our read and our delete; our delete removes their node and the recovery closed without naming them"},
		{802, "ambiguous-create,ambiguous-delete,ambiguous-maintenance,ambiguous-patch,errors,forged,lag,ledger-abort,ledger-lost-commit,page-empty,page-loop,page-repeat,page-skip,person-delete,person-maintenance,person-pause,person-recreate,person-relabel,person-stop,unaudited",
			"our create READY while its zone was paused, then a person's unaudited delete: NOT FOUND in phase creating after the resume made the node a second time"},
		{2197, "ambiguous-create,ambiguous-delete,ambiguous-maintenance,ambiguous-patch,errors,forged,lag,ledger-abort,ledger-lost-commit,page-empty,page-loop,page-repeat,page-skip,person-delete,person-maintenance,person-pause,person-recreate,person-relabel,person-stop,unaudited",
			"a person deletes and recreates the node while our delete is refused: the recovery closed \"our delete did not happen\" without naming the person's delete and create"},
		{109, capKinds, "our create's operation ended in the stockout but the node was made all the same: queued beside it, then abandoned with the node READY"},
		{5, capKinds, "a person opts the node out while our create runs, then the create ends in a stockout: the recovery closed on the opt-out and the node, gone, was lost"},
		{1656, capKinds, "a person recreates, our labels copied, the node our ACTIVE queued resource made: the check took their node for our direct create's beside the queue"},
		{2879, capKinds, "a create whose answer was lost while capacity was short: its ALREADY_EXISTS read the node CREATING without our label (a person relabelled it) and closed the recovery as someone else's; the node then went with its stockout"},
	} {
		t.Run(fmt.Sprint(tc.seed), func(t *testing.T) {
			kinds, err := ParseKinds(tc.kinds)
			if err != nil {
				t.Fatal(err)
			}
			res := Run(context.Background(), tc.seed, Options{Config: loadConfig(t), Kinds: kinds})
			if len(res.Violations) > 0 {
				t.Errorf("seed %d (%s): %s\n%s\nviolations: %v%s", tc.seed, tc.kinds, tc.why, res.Plan, res.Violations, res.Trace)
			}
		})
	}
}
