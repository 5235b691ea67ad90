package remediate

import "github.com/tpu-autoheal/autoheal/internal/policy"

// OurEntry exposes policy.OurEntry to the package's external tests.
var OurEntry = policy.OurEntry

// The policy's failure weights, under the names the package's tests use.
const (
	transientWeight = policy.TransientWeight
	permanentWeight = policy.PermanentWeight
)

var failureLimit = policy.FailureLimit
