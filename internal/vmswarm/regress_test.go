package vmswarm

import (
	"context"
	"fmt"
	"testing"
)

// TestVMSwarmRegressions replays seeds that once broke an invariant, each
// with the exact kinds it was found with.
func TestVMSwarmRegressions(t *testing.T) {
	for _, tc := range []struct {
		seed  uint64
		kinds string
		why   string
	}{
		{93, "crash-after", "the process died right after saving the insert's incident, before the insert: the next one read \"insert already sent for this incident\" for ever (spot-delete lost)"},
		{135, "crash-after", "the same with a start (spot-stop left TERMINATED)"},
		{199, "crash-after", "the same with an insert after a preemption with DELETE"},
		{181, "crash-after,page-skip,slice-delete", "a person deleted a VM of the 4-VM slice: the slice was taken from the zone's listing, which lacked it, and recreateInstances named the three others (the MIG made the deleted VM again)"},
		{297, "crash-after,page-skip,slice-delete", "a listing that passed over a page hid two VMs of the slice, one a person had stopped: recreateInstances of the other two"},
		{315, "crash-after,page-skip,slice-delete", "the five deliveries of spot-delete's preemption each failed to read it (transient): its evidence was kept by none, and it was never recreated"},
		{522, "crash-after,page-skip,slice-delete", "as 181"},
		{275, "crash-after", "after the crash, a read answered 404 (injected): the start saved with the incident was taken for in effect, the incident stayed \"start sent\" and spot-stop was left TERMINATED"},
	} {
		t.Run(fmt.Sprint(tc.seed), func(t *testing.T) {
			opts := options(t, tc.kinds)
			res := Run(context.Background(), tc.seed, opts)
			if len(res.Violations) > 0 {
				t.Errorf("seed %d (%s): %s\n%s\nviolations: %v%s", tc.seed, tc.kinds, tc.why, res.Plan, res.Violations, res.Trace)
			}
		})
	}
}
