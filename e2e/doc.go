// Package e2e is tpu-autoheal's end-to-end test: the Pub/Sub and Firestore
// emulators, `autoheal serve` built and run as a subprocess (the deployed
// function and configuration), and the simulated TPU control plane, with a
// burst of entries published as the log sink would publish them.
//
// It has only tests, built with the emulator tag:
//
//	go test -tags emulator ./e2e/...
//
// It must never be imported, and it stops every process it starts.
package e2e
