// Package endpoint turns an endpoint override (AUTOHEAL_TPU_ENDPOINT,
// AUTOHEAL_COMPUTE_ENDPOINT, --endpoint: a simulator, a test server or a
// proxy) into Google API client options, the same way for every client.
package endpoint

import (
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/api/option"
)

// Options are the client options that send every call of an API to
// endpoint instead of Google's: nil for "" (the real API); else the
// endpoint with basePath appended unless it ends so already (Compute
// Engine's "/compute/v1"; "" for APIs served at the root) and the trailing
// slash the generated clients need, and for a plain http URL no
// credentials, so they never travel in clear text. what names the setting
// in the error ("tpu endpoint").
func Options(what, endpoint, basePath string) ([]option.ClientOption, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%s %q: want an http(s) URL", what, endpoint)
	}
	base := strings.TrimSuffix(endpoint, "/")
	if basePath != "" && !strings.HasSuffix(base, basePath) {
		base += basePath
	}
	opts := []option.ClientOption{option.WithEndpoint(base + "/")}
	if u.Scheme == "http" {
		opts = append(opts, option.WithoutAuthentication())
	}
	return opts, nil
}
