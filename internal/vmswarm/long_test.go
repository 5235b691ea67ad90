//go:build emulator

package vmswarm

// The emulator build is scripts/test.sh's second go test of every package
// (go test -tags emulator ./...): TestVMSwarm then runs longSeeds seeds
// after the unit run's, unless -seeds says otherwise.
func init() { longBuild = true }
