//go:build !emulator

package docs_test

import "testing"

// emulatorBlocks: the plain suite runs the blocks that need no emulator.
const emulatorBlocks = false

func requireEmulators(*testing.T) {}
