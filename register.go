// Package autoheal is the module root that the Cloud Functions Go buildpack
// imports: its init registers the function and does nothing else — no
// network, no configuration, no log.Fatal. The Function is built on the first
// request (function.ServeHTTP), an HTTP function that reads Pub/Sub push
// bodies and CloudEvents itself.
package autoheal

import (
	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/tpu-autoheal/autoheal/function"
)

func init() {
	functions.HTTP(function.EntryPoint, function.ServeHTTP)
}
