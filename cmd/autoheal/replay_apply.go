package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	kms "cloud.google.com/go/kms/apiv1"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// replayHolder is who holds the claims of replay's recoveries, in every run:
// a second run over the same ledger resumes what the first left.
const replayHolder = "autoheal-replay"

// applyFlags are replay's flags for --apply against a real (or
// --tpu-endpoint) API: how long to follow the recoveries on the wall clock,
// which ledger keeps them, and whom they act as.
type applyFlags struct {
	wait      time.Duration
	lookAgain time.Duration
	ledger    ledgerFlags
	// actor is the identity the recoveries act as (--actor; default the
	// credentials' account when it can be found); it becomes the engine's
	// Config.Actor, which tells the run's own audit entries from a person's.
	actor string
	// macKey is the Cloud KMS key version that seals the specs of a run
	// over the function's ledger (--mac-key: its AUTOHEAL_MAC_KEY), so that
	// a spec the function sealed verifies here and one this run sealed
	// verifies in the function or the next run.
	macKey string
}

func addApplyFlags(fs *flag.FlagSet) *applyFlags {
	a := &applyFlags{}
	durationVar(fs, &a.wait, "wait", 0, "with --apply against a real API: follow the recoveries the run started on the wall clock for at most this `long`, then stop and say how to finish (default: until each ends, at the latest when its own cap abandons it)")
	durationVar(fs, &a.lookAgain, "look-again", 0, "how `soon` an operation in progress is looked at again (AUTOHEAL_LOOK_AGAIN of the function; default 5s with --apply against a real API, as the function, else 30s)")
	fs.StringVar(&a.ledger.project, "ledger-project", "", "with --apply: keep the recoveries in the Firestore ledger of this `project` (as the function does) instead of in memory, so that a second run resumes what the first left")
	fs.StringVar(&a.macKey, "mac-key", "", "with --ledger-project: the Cloud KMS `key version` that seals saved specs, the function's AUTOHEAL_MAC_KEY (terraform output mac_key_version); required there, since a spec sealed with another key never verifies")
	fs.StringVar(&a.ledger.database, "ledger-database", "tpu-autoheal", "Firestore `database` of --ledger-project (AUTOHEAL_FIRESTORE_DATABASE of the function)")
	fs.StringVar(&a.actor, "actor", "", "the `identity` the recoveries act as, to tell their own audit entries from a person's (default: the credentials' account, when it can be found)")
	return a
}

// check validates the flags against the target's, before any input is read.
func (a *applyFlags) check(fs *flag.FlagSet, t *targetFlags, clock string) error {
	if a.wait < 0 {
		return usagef("--wait %s: must not be negative", a.wait)
	}
	if a.lookAgain < 0 {
		return usagef("--look-again %s: must not be negative", a.lookAgain)
	}
	if flagGiven(fs, "ledger-database") && a.ledger.project == "" {
		return usagef("--ledger-database needs --ledger-project")
	}
	if a.macKey != "" && a.ledger.project == "" {
		return usagef("--mac-key needs --ledger-project (a run in memory seals with a key of its own)")
	}
	if a.ledger.project == "" {
		return nil
	}
	if a.ledger.database == "" {
		return usagef("--ledger-database must not be empty")
	}
	if t.fleet != "" || t.embedded != nil {
		return usagef("--ledger-project applies to --apply against a real API (or --tpu-endpoint), not to the simulated --fleet")
	}
	if !t.apply {
		return usagef("--ledger-project needs --apply: a read-only replay must not write the deployed ledger (its event marks would make the function skip those entries)")
	}
	if clock == "event" {
		return usagef("--ledger-project needs --clock wall: the deployed ledger is on the wall clock")
	}
	if a.macKey == "" {
		return usagef("--ledger-project needs --mac-key, the function's AUTOHEAL_MAC_KEY (terraform output mac_key_version): specs in that ledger are sealed with it")
	}
	return nil
}

// defaultActor is the account of the credentials the real API is called
// with: a service-account key's client_email, else gcloud's account; ""
// when neither can be found.
func defaultActor() string {
	if path := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); path != "" {
		if b, err := os.ReadFile(path); err == nil {
			var key struct {
				ClientEmail string `json:"client_email"`
			}
			if json.Unmarshal(b, &key) == nil && key.ClientEmail != "" {
				return key.ClientEmail
			}
		}
	}
	return gcloudAccount()
}

// sealer is what seals and verifies the run's saved specs: a key of this
// run for a ledger in memory, the function's KMS key with --ledger-project.
func (a *applyFlags) sealer(ctx context.Context) (seal.Sealer, func() error, error) {
	if a.macKey == "" {
		return seal.RandomLocalKeys(), func() error { return nil }, nil
	}
	s, closeFn, err := openSealer(ctx, a.macKey)
	if err != nil {
		return nil, nil, err
	}
	// One seal and its check now, before any entry is read: an account
	// that may not use the key would otherwise retry every recovery until
	// --wait or its cap, deleting nothing, with no word of why.
	probe := []byte("autoheal replay: may this account seal with --mac-key?")
	sl, err := s.Seal(ctx, probe)
	if err == nil {
		err = s.Verify(ctx, probe, sl)
	}
	if err != nil {
		closeFn()
		return nil, nil, setupf("--mac-key %s: cannot seal and verify with it (%v): the account running replay needs cloudkms.cryptoKeyVersions.useToSign and useToVerify on that key, which the module grants only to the function (docs/security.md)", a.macKey, err)
	}
	return s, closeFn, nil
}

// openSealer opens the Cloud KMS MAC key version (a variable: tests seal
// with a local key instead).
var openSealer = func(ctx context.Context, keyVersion string) (seal.Sealer, func() error, error) {
	c, err := kms.NewKeyManagementClient(ctx)
	if err != nil {
		return nil, nil, setupf("--mac-key: cloud kms client: %v", err)
	}
	k, err := seal.NewKMS(c, keyVersion, 0)
	if err != nil {
		c.Close()
		return nil, nil, usagef("--mac-key %s: %v", keyVersion, err)
	}
	return k, c.Close, nil
}

// openStore opens the run's ledger: Firestore with --ledger-project, else a
// fresh in-memory one on the run's clock. resumed lists the unfinished
// recoveries an earlier replay left in it.
func (a *applyFlags) openStore(ctx context.Context, clock func() time.Time, holdTTL time.Duration) (store ledger.Admin, mem *ledger.Memory, resumed []remediate.Recovery, closeFn func() error, err error) {
	if a.ledger.project == "" {
		m := ledger.NewMemory(ledger.WithClock(clock), ledger.WithHoldTTL(holdTTL))
		return m, m, nil, func() error { return nil }, nil
	}
	s, closeFn, err := openLedger(ctx, a.ledger.project, a.ledger.database, ledger.WithHoldTTL(holdTTL))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	un, err := s.Unfinished(ctx)
	if err != nil {
		closeFn()
		return nil, nil, nil, nil, setupf("list the unfinished recoveries of ledger %s of project %s: %v", a.ledger.database, a.ledger.project, err)
	}
	for _, r := range un {
		if r.Holder == replayHolder {
			resumed = append(resumed, r)
		}
	}
	return s, nil, resumed, closeFn, nil
}

// stops says what an interrupt of the wall-clock continuation leaves.
func (a *applyFlags) stops() string {
	if a.ledger.project != "" {
		return "each stays where it is, in the ledger; replay --apply again with the same --ledger-project resumes it"
	}
	return "this run's ledger is in memory: a recovery stopped now is finished by no one; --ledger-project makes it resumable"
}

// finishHint says, after a wall-clock continuation stopped with
// recoveries unfinished, what stopped it and how to finish them. It names
// nodes and phases only: never a spec or a metadata value.
func (a *applyFlags) finishHint(w io.Writer, stopped string, outs []outcome, args []string) {
	var left []string
	for _, o := range outs {
		if o.Outcome == outcomeUnfinished {
			left = append(left, fmt.Sprintf("%s (phase %s)", shortNode(o.Node), o.Phase))
		}
	}
	if len(left) == 0 {
		return
	}
	why := stopped
	switch stopped {
	case stoppedWait:
		why = "--wait " + shortDuration(a.wait) + " ends before the next look"
	case "":
		why = "stopped"
	}
	fmt.Fprintf(w, "autoheal replay: %s with %s unfinished: %s\n", why, plural(len(left), "recovery", "recoveries"), strings.Join(left, ", "))
	again := "autoheal replay " + strings.Join(quoteArgs(args), " ")
	if a.ledger.project != "" {
		fmt.Fprintf(w, "autoheal replay: to finish, run replay --apply again with the same ledger (it resumes where this run stopped; its entries are already marked handled):\n  %s\n", again)
		fmt.Fprintf(w, "autoheal replay: a function deployed on ledger %s of project %s finishes them too, at its next sweep\n", a.ledger.database, a.ledger.project)
		return
	}
	fmt.Fprintln(w, "autoheal replay: this run's ledger was in memory: the saved spec of each unfinished recovery is gone with it, and nothing will finish them")
	fmt.Fprintln(w, "autoheal replay: look at each node now (autoheal status cannot see them); recreate a deleted one by hand from its spec in --records (metadata values redacted there)")
	fmt.Fprintln(w, "autoheal replay: next time run replay --apply with --ledger-project P --ledger-database D --mac-key K (the Firestore ledger and MAC key, as the function uses), so that a second run resumes the first")
}

// quoteArgs quotes the arguments a shell would split.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

// functionLookAgain is the function's AUTOHEAL_LOOK_AGAIN default: how soon
// replay --apply looks again at a real operation in progress.
const functionLookAgain = 5 * time.Second
