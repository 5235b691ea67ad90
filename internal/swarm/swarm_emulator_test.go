//go:build emulator

package swarm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
)

func init() { emulatorBuild = true }

var firestoreSeeds = flag.Int("firestore-seeds", 300, "how many seeds TestSwarmFirestore runs")

// TestSwarmFirestore is TestSwarm with the Firestore ledger (the emulator)
// instead of the in-memory one: its transactions, its conflicts, its own
// encoding of every saved field. -seed N replays one seed here too.
//
//	go test -tags emulator ./internal/swarm -run TestSwarmFirestore
func TestSwarmFirestore(t *testing.T) {
	kinds, err := ParseKinds(*kindsFlag)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, stop, err := emulator.StartFirestore(ctx)
	if errors.Is(err, emulator.ErrNoGcloud) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cfg := loadConfig(t)
	fc, err := firestore.NewClient(ctx, emulator.Project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	opts := Options{Config: cfg, Kinds: kinds, Firestore: fc, Prefix: fmt.Sprintf("t%d-", time.Now().UnixNano()%1e9)}
	var seeds []uint64
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range *firestoreSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	// The emulator's round trips, not the CPU, are what a run waits on.
	runSeeds(t, seeds, 4*runtime.GOMAXPROCS(0), func(seed uint64) Result { return Run(ctx, seed, opts) })
}
