package seal_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/seal"
)

var (
	node     = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
	specJSON = []byte(`{"acceleratorType":"v4-128","metadata":{"startup-script":"#!/bin/bash\nresume"},"serviceAccount":{"email":"train@acme-ml.iam.gserviceaccount.com"}}`)
	msg      = seal.SpecMessage(node, 3, specJSON)
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func mustLocal(t *testing.T, current string, keys map[string][]byte) *seal.LocalKeys {
	t.Helper()
	l, err := seal.NewLocalKeys(current, keys)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// wantNotVerified checks err is a verdict, with the reason, and not
// mistakable for a transient failure.
func wantNotVerified(t *testing.T, err error, reason string) {
	t.Helper()
	var v *seal.VerifyError
	switch {
	case err == nil:
		t.Fatalf("verified; want %q", reason)
	case !errors.Is(err, seal.ErrNotVerified) || !errors.As(err, &v):
		t.Fatalf("err = %v (%T); want a *VerifyError", err, err)
	case errors.Is(err, seal.ErrTransient):
		t.Fatalf("err = %v is also transient", err)
	case !strings.HasPrefix(v.Reason, reason):
		t.Fatalf("reason %q; want %q", v.Reason, reason)
	}
}

func TestLocalKeysVerifyTheirOwnSealAndNothingChanged(t *testing.T) {
	ctx := context.Background()
	l := mustLocal(t, "local/1", map[string][]byte{"local/1": key(1)})
	s, err := l.Seal(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyVersion != "local/1" || len(s.MAC) != 32 {
		t.Fatalf("seal = %+v; want key version local/1 and a 32-byte MAC", s)
	}
	if err := l.Verify(ctx, msg, s); err != nil {
		t.Fatalf("Verify of its own seal: %v", err)
	}

	changedSpec := seal.SpecMessage(node, 3, bytes.Replace(specJSON, []byte("train@"), []byte("attacker@"), 1))
	flipped := seal.Seal{KeyVersion: s.KeyVersion, MAC: append([]byte(nil), s.MAC...)}
	flipped.MAC[0] ^= 1
	for _, tc := range []struct {
		name   string
		msg    []byte
		seal   seal.Seal
		reason string
	}{
		{"changed service account", changedSpec, s, seal.ReasonMismatch},
		{"spec of another node", seal.SpecMessage(node+"-2", 3, specJSON), s, seal.ReasonMismatch},
		{"spec of an older recovery", seal.SpecMessage(node, 2, specJSON), s, seal.ReasonMismatch},
		{"changed MAC", msg, flipped, seal.ReasonMismatch},
		{"truncated MAC", msg, seal.Seal{KeyVersion: s.KeyVersion, MAC: s.MAC[:16]}, seal.ReasonMismatch},
		{"unknown key version", msg, seal.Seal{KeyVersion: "local/9", MAC: s.MAC}, seal.ReasonUnknownVersion},
		{"no seal", msg, seal.Seal{}, seal.ReasonNoSeal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantNotVerified(t, l.Verify(ctx, tc.msg, tc.seal), tc.reason)
		})
	}
}

// TestLocalKeysRotate: a seal of the previous version still verifies once
// sealing moved to a new one; a key set without it does not.
func TestLocalKeysRotate(t *testing.T) {
	ctx := context.Background()
	old := mustLocal(t, "local/1", map[string][]byte{"local/1": key(1)})
	s, _ := old.Seal(ctx, msg)
	rotated := mustLocal(t, "local/2", map[string][]byte{"local/1": key(1), "local/2": key(2)})
	if err := rotated.Verify(ctx, msg, s); err != nil {
		t.Errorf("rotated keys reject the old version's seal: %v", err)
	}
	s2, _ := rotated.Seal(ctx, msg)
	if s2.KeyVersion != "local/2" {
		t.Errorf("rotated keys seal with %q; want local/2", s2.KeyVersion)
	}
	wantNotVerified(t, mustLocal(t, "local/2", map[string][]byte{"local/2": key(2)}).Verify(ctx, msg, s), seal.ReasonUnknownVersion)
	// The same name with another secret: not the same key.
	wantNotVerified(t, mustLocal(t, "local/1", map[string][]byte{"local/1": key(7)}).Verify(ctx, msg, s), seal.ReasonMismatch)
}

func TestRandomLocalKeysAreThisProcessOnly(t *testing.T) {
	ctx := context.Background()
	a, b := seal.RandomLocalKeys(), seal.RandomLocalKeys()
	s, _ := a.Seal(ctx, msg)
	if err := a.Verify(ctx, msg, s); err != nil {
		t.Fatalf("own seal: %v", err)
	}
	wantNotVerified(t, b.Verify(ctx, msg, s), seal.ReasonMismatch)
}

func TestNewLocalKeysRefusesBadKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current string
		keys    map[string][]byte
		want    string
	}{
		{"current missing", "local/2", map[string][]byte{"local/1": key(1)}, `current key version "local/2" is not among the 1 keys`},
		{"short key", "local/1", map[string][]byte{"local/1": key(1)[:31]}, `"local/1" has a 31-byte key, want at least 32`},
		{"empty name", "", map[string][]byte{"": key(1)}, "a key version name is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := seal.NewLocalKeys(tc.current, tc.keys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want %q", err, tc.want)
			}
		})
	}
}

// TestSpecMessageKeepsFieldsApart: moving bytes between the node and the
// spec, or changing the generation, changes the message.
func TestSpecMessageKeepsFieldsApart(t *testing.T) {
	msgs := map[string][]byte{
		"a|bc|1": seal.SpecMessage("a", 1, []byte("bc")),
		"ab|c|1": seal.SpecMessage("ab", 1, []byte("c")),
		"a|bc|2": seal.SpecMessage("a", 2, []byte("bc")),
		"|abc|1": seal.SpecMessage("", 1, []byte("abc")),
	}
	seen := map[string]string{}
	for name, m := range msgs {
		if other, ok := seen[string(m)]; ok {
			t.Errorf("%s and %s give the same message", name, other)
		}
		seen[string(m)] = name
	}
}
