package seal

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// KMSClient is the part of the Cloud KMS client that KMS calls;
// *kms.KeyManagementClient (cloud.google.com/go/kms/apiv1) is one.
type KMSClient interface {
	MacSign(ctx context.Context, req *kmspb.MacSignRequest, opts ...gax.CallOption) (*kmspb.MacSignResponse, error)
	MacVerify(ctx context.Context, req *kmspb.MacVerifyRequest, opts ...gax.CallOption) (*kmspb.MacVerifyResponse, error)
}

// DefaultKMSTimeout bounds one MacSign or MacVerify call when NewKMS is
// given no timeout.
const DefaultKMSTimeout = 10 * time.Second

// maxMACBytes is the longest MAC a Cloud KMS MAC key makes (HMAC-SHA512).
// A longer one in a seal was not made by KMS, and sending it would only
// earn an INVALID_ARGUMENT, which is no verdict.
const maxMACBytes = 64

// keyVersionName is a CryptoKeyVersion's resource name; its first group is
// the CryptoKey's.
var keyVersionName = regexp.MustCompile(`^(projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+)/cryptoKeyVersions/[1-9][0-9]*$`)

// KMS is a Sealer backed by a Cloud KMS key of purpose MAC. It seals with
// one key version (MacSign takes a version: MAC keys have no primary) and
// verifies seals of any version of that same key, so the key can be
// rotated (a new version, then the function configured with it) while
// seals made with older versions still verify. A seal naming a version of
// any other key does not verify, without asking KMS: anyone can make valid
// MACs with a key of their own.
//
// Each call is made once, with no client-side retry (the client library
// would otherwise retry UNAVAILABLE for up to a minute), bounded by the
// timeout; CRC32C checksums of the data and the MAC go both ways and every
// integrity field of the answer is checked.
type KMS struct {
	client  KMSClient
	version string
	key     string
	timeout time.Duration
}

var _ Sealer = (*KMS)(nil)

// NewKMS returns a KMS sealing with keyVersion
// (projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N);
// timeout bounds each call (0: DefaultKMSTimeout).
func NewKMS(client KMSClient, keyVersion string, timeout time.Duration) (*KMS, error) {
	if client == nil {
		return nil, errors.New("seal: no KMS client")
	}
	m := keyVersionName.FindStringSubmatch(keyVersion)
	if m == nil {
		return nil, fmt.Errorf("seal: key version %q: want projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N", keyVersion)
	}
	if timeout < 0 {
		return nil, fmt.Errorf("seal: KMS timeout %s is negative", timeout)
	}
	if timeout == 0 {
		timeout = DefaultKMSTimeout
	}
	return &KMS{client: client, version: keyVersion, key: m[1], timeout: timeout}, nil
}

// Key is the CryptoKey whose versions verify.
func (k *KMS) Key() string { return k.key }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) *wrapperspb.Int64Value {
	return wrapperspb.Int64(int64(crc32.Checksum(b, castagnoli)))
}

// noRetry replaces the client's default retry of UNAVAILABLE and
// DEADLINE_EXCEEDED: a retry here would hold a delivery for up to a
// minute; the caller retries instead.
var noRetry = gax.WithRetry(nil)

// Seal MACs msg's digest with the configured key version (MacSign).
func (k *KMS) Seal(ctx context.Context, msg []byte) (Seal, error) {
	data := digest(msg)
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	resp, err := k.client.MacSign(ctx, &kmspb.MacSignRequest{Name: k.version, Data: data, DataCrc32C: crc32c(data)}, noRetry) // rest: cloudkms.projects.locations.keyRings.cryptoKeys.cryptoKeyVersions.macSign
	if err != nil {
		return Seal{}, k.transient("seal", k.version, err)
	}
	switch {
	case resp.GetName() != k.version:
		return Seal{}, k.garbled("seal", k.version, fmt.Sprintf("answer names key version %q", resp.GetName()))
	case !resp.GetVerifiedDataCrc32C():
		return Seal{}, k.garbled("seal", k.version, "KMS did not confirm the data's CRC32C")
	case resp.GetMacCrc32C() == nil || resp.GetMacCrc32C().GetValue() != crc32c(resp.GetMac()).GetValue():
		return Seal{}, k.garbled("seal", k.version, "the MAC's CRC32C does not match")
	case len(resp.GetMac()) == 0 || len(resp.GetMac()) > maxMACBytes:
		return Seal{}, k.garbled("seal", k.version, fmt.Sprintf("a MAC of %d bytes", len(resp.GetMac())))
	}
	return Seal{KeyVersion: resp.GetName(), MAC: resp.GetMac()}, nil
}

// Verify checks s over msg (MacVerify), if s names a version of this key.
func (k *KMS) Verify(ctx context.Context, msg []byte, s Seal) error {
	if s.IsZero() {
		return &VerifyError{Reason: ReasonNoSeal}
	}
	if m := keyVersionName.FindStringSubmatch(s.KeyVersion); m == nil || m[1] != k.key {
		return &VerifyError{KeyVersion: s.KeyVersion, Reason: ReasonForeignKey}
	}
	if len(s.MAC) == 0 || len(s.MAC) > maxMACBytes {
		return &VerifyError{KeyVersion: s.KeyVersion, Reason: fmt.Sprintf("%s (%d bytes)", ReasonMalformedMAC, len(s.MAC))}
	}
	data := digest(msg)
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	resp, err := k.client.MacVerify(ctx, &kmspb.MacVerifyRequest{Name: s.KeyVersion, Data: data, DataCrc32C: crc32c(data), Mac: s.MAC, MacCrc32C: crc32c(s.MAC)}, noRetry) // rest: cloudkms.projects.locations.keyRings.cryptoKeys.cryptoKeyVersions.macVerify
	if err != nil {
		if status.Code(err) == codes.NotFound {
			// The key exists (its versions seal), this version of it
			// does not: no seal of it was ever made.
			return &VerifyError{KeyVersion: s.KeyVersion, Reason: ReasonUnknownVersion}
		}
		return k.transient("verify", s.KeyVersion, err)
	}
	switch {
	case resp.GetName() != s.KeyVersion:
		return k.garbled("verify", s.KeyVersion, fmt.Sprintf("answer names key version %q", resp.GetName()))
	case !resp.GetVerifiedDataCrc32C():
		return k.garbled("verify", s.KeyVersion, "KMS did not confirm the data's CRC32C")
	case !resp.GetVerifiedMacCrc32C():
		return k.garbled("verify", s.KeyVersion, "KMS did not confirm the MAC's CRC32C")
	case resp.GetVerifiedSuccessIntegrity() != resp.GetSuccess():
		return k.garbled("verify", s.KeyVersion, "the answer's success and its integrity field disagree")
	case !resp.GetSuccess():
		return &VerifyError{KeyVersion: s.KeyVersion, Reason: ReasonMismatch}
	}
	return nil
}

// transient wraps a failed call: every KMS error is no verdict.
func (k *KMS) transient(op, version string, err error) error {
	code := status.Code(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return &TransientError{Op: op, KeyVersion: version, Code: code, Err: fmt.Errorf("cloud kms: %w", err)}
}

// garbled is an answer that failed its integrity checks: KMS's advice is
// to discard it and retry.
func (k *KMS) garbled(op, version, what string) error {
	return &TransientError{Op: op, KeyVersion: version, Code: codes.DataLoss, Err: errors.New("cloud kms answer failed its integrity check: " + strings.TrimSpace(what))}
}
