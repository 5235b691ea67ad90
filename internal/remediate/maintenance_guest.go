package remediate

import "context"

// GuestAttribute and GuestAttributes are the same declarations as in
// resume.go (the "report" lane): at merge keep exactly one copy of each.

// GuestAttribute is one guest attribute a worker wrote (metadata server
// PUT instance/guest-attributes/<namespace>/<key>), as getGuestAttributes
// returns it. Worker is the 0-based worker id.
type GuestAttribute struct{ Worker, Namespace, Key, Value string }

// GuestAttributes reads a node's guest attributes under queryPath
// ("namespace/key" or "namespace/"), every worker's.
type GuestAttributes interface {
	GetGuestAttributes(ctx context.Context, node, queryPath string) ([]GuestAttribute, error)
}
