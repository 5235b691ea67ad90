//go:build emulator

package docs_test

import (
	"os"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
)

// emulatorBlocks: the emulator suite runs only the blocks marked emulator,
// with the Firestore emulator running (FIRESTORE_EMULATOR_HOST set), so the
// ledger commands (pause, resume, status, breaker reset) run as written.
const emulatorBlocks = true

// TestMain starts the Firestore emulator for the ledger commands' blocks.
func TestMain(m *testing.M) { os.Exit(emulator.Main(m, emulator.Firestore)) }

func requireEmulators(t *testing.T) { emulator.Require(t, emulator.Firestore) }
