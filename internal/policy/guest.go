package policy

// GuestAttribute is one guest attribute of one worker of a node.
type GuestAttribute struct{ Worker, Namespace, Key, Value string }
