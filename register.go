// Package autoheal is the module root that the Cloud Functions Go buildpack
// imports: its init registers the function and does nothing else — no
// network, no configuration, no log.Fatal. The Function is built on the first
// event (function.Handle).
package autoheal

import (
	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/tpu-autoheal/autoheal/function"
)

func init() {
	functions.CloudEvent(function.EntryPoint, function.Handle)
}
