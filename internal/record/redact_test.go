package record_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const (
	sshKeys = "alice:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHunter2SecretKeyMaterial alice@example"
	script  = "#!/bin/bash\nexport WANDB_API_KEY=wb-0123456789abcdef\nsudo -u alice /home/alice/start_training.sh\n"
)

func secretNode() *tpu.Node {
	return &tpu.Node{
		Name:            "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128",
		AcceleratorType: "v4-128",
		Metadata:        map[string]string{"ssh-keys": sshKeys, "startup-script": script, "autoheal-train-cmd": "python train.py --token=tok-secret-42"},
	}
}

// TestNoMetadataValueReachesARecord writes a record carrying a spec with
// ssh-keys, a startup script and a training command through both recorders
// that render records (stdout and the payload Cloud Logging gets): no value,
// nor any line of one, appears; each key does, with its length.
func TestNoMetadataValueReachesARecord(t *testing.T) {
	n := secretNode()
	r := remediate.Record{Time: time.Date(2026, 11, 20, 3, 44, 40, 0, time.UTC), Node: n.Name,
		Action: remediate.ActionRecreate, Reason: "TERMINATED (maintenance): recreate", Spec: n}

	var out bytes.Buffer
	if err := record.NewStdout(&out).Record(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	payload, err := record.Payload(r)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := payload["spec"].(map[string]any)
	meta, _ := spec["metadata"].(map[string]any)
	for _, rendered := range []string{out.String(), toJSON(t, payload)} {
		for _, secret := range []string{sshKeys, "Hunter2SecretKeyMaterial", "wb-0123456789abcdef", "start_training.sh", "tok-secret-42"} {
			if strings.Contains(rendered, secret) {
				t.Errorf("record contains %q:\n%s", secret, rendered)
			}
		}
	}
	for k, v := range map[string]string{"ssh-keys": sshKeys, "startup-script": script} {
		got, _ := meta[k].(string)
		if !strings.HasPrefix(got, "redacted: ") || !strings.Contains(got, " bytes, hmac:") {
			t.Errorf("metadata %s = %q, want a redaction", k, got)
		}
		if want := len(v); !strings.Contains(got, ": "+itoa(want)+" bytes") {
			t.Errorf("metadata %s = %q, want the length %d", k, got, want)
		}
	}
	if n.Metadata["ssh-keys"] != sshKeys {
		t.Error("RedactSpec changed the node it was given")
	}
}

// TestRedactValueTellsEqualValuesApart: within one process the same value
// gives the same redaction, another value of the same length another one.
func TestRedactValueTellsEqualValuesApart(t *testing.T) {
	a, b, c := record.RedactValue("secret-1"), record.RedactValue("secret-1"), record.RedactValue("secret-2")
	if a != b || a == c {
		t.Errorf("RedactValue: %q, %q, %q; want the first two equal, the third different", a, b, c)
	}
	if !regexp.MustCompile(`^redacted: 8 bytes, hmac:[0-9a-f]{12}$`).MatchString(a) {
		t.Errorf("RedactValue = %q, want \"redacted: 8 bytes, hmac:<12 hex digits>\"", a)
	}
}

// TestRedactionIsNoUnkeyedDigest: the digest a record shows is not a hash
// anyone can compute from a guess: not a prefix of the value's SHA-256 (what
// records showed before), nor of its HMAC under an empty key.
func TestRedactionIsNoUnkeyedDigest(t *testing.T) {
	for _, v := range []string{"", "hunter2", sshKeys, script} {
		got := record.RedactValue(v)
		sum := sha256.Sum256([]byte(v))
		empty := hmac.New(sha256.New, nil)
		empty.Write([]byte(v))
		for name, d := range map[string][]byte{"sha256": sum[:], "hmac with an empty key": empty.Sum(nil)} {
			if strings.HasSuffix(got, hex.EncodeToString(d[:6])) {
				t.Errorf("RedactValue(%d bytes) = %q: shows the %s of the value", len(v), got, name)
			}
		}
	}
}

// TestRedactionKeyIsPerProcess runs this test binary again: the other
// process redacts the same value to another digest, since its key was
// drawn afresh and is nowhere else.
func TestRedactionKeyIsPerProcess(t *testing.T) {
	if os.Getenv("REDACT_PRINT") != "" {
		fmt.Print(record.RedactValue(os.Getenv("REDACT_PRINT")))
		return
	}
	const v = "alice:ssh-ed25519 AAAA"
	other := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRedactionKeyIsPerProcess$")
		cmd.Env = append(os.Environ(), "REDACT_PRINT="+v)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child process: %v", err)
		}
		line, _, _ := strings.Cut(string(out), "\n")
		if !strings.HasPrefix(line, "redacted: ") {
			t.Fatalf("child printed %q, want a redaction", out)
		}
		return line
	}
	first, second, here := other(), other(), record.RedactValue(v)
	if first == second || first == here || second == here {
		t.Errorf("three processes redacted one value to %q, %q, %q: want three digests", first, second, here)
	}
	if want := fmt.Sprintf("redacted: %d bytes, ", len(v)); !strings.HasPrefix(first, want) {
		t.Errorf("child redaction %q, want it to start %q", first, want)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestPayloadCarriesNodeSizeAndOutcome: the report and the metrics read
// acceleratorType, chips and outcome from every record that has them.
func TestPayloadCarriesNodeSizeAndOutcome(t *testing.T) {
	p, err := record.Payload(remediate.Record{Action: remediate.ActionRecreate, AcceleratorType: "v4-128", Chips: 64, Outcome: remediate.OutcomeRecovered, TimeToRecover: 270 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p["acceleratorType"] != "v4-128" || p["chips"] != float64(64) || p["outcome"] != "recovered" || p["timeToRecoverSeconds"] != float64(270) {
		t.Errorf("payload = %v, want acceleratorType v4-128, chips 64, outcome recovered", p)
	}
}

// TestJobAndStockoutChoiceAreShown: the job name and the stockout fallback
// a node asks for are read back from records (autoheal report --format
// goodput groups by job): their values are kept, every other one redacted.
func TestJobAndStockoutChoiceAreShown(t *testing.T) {
	n := secretNode()
	n.Metadata["autoheal-job"] = "llama-pretrain"
	n.Metadata["autoheal-stockout"] = "zones:us-central2-a,us-central2-c"
	got := record.RedactSpec(n).Metadata
	if got["autoheal-job"] != "llama-pretrain" || got["autoheal-stockout"] != "zones:us-central2-a,us-central2-c" {
		t.Errorf("metadata %v, want autoheal-job and autoheal-stockout shown", got)
	}
	if !strings.HasPrefix(got["ssh-keys"], "redacted: ") {
		t.Errorf("ssh-keys = %q, want redacted", got["ssh-keys"])
	}
}
