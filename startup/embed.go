// Package startup supplies the default startup script that tpu-autoheal sets
// as metadata startup-script on a TPU VM it recreates (resume-training.sh:
// wait until ready, find the newest checkpoint, run the training command in a
// bounded retry loop), and the names of the metadata keys and environment
// variables that script reads and sets, so the rest of the system and the
// documentation speak of them by one name.
//
// The package only provides bytes and names. It must never run the script,
// touch the network or decide anything about nodes.
package startup

import (
	_ "embed"
	"strings"
)

// Script is resume-training.sh, byte for byte: the default value of the
// startup-script metadata key on a recreated node.
//
//go:embed resume-training.sh
var Script string

// MetadataStartupScript is the metadata key Compute Engine runs at boot.
const MetadataStartupScript = "startup-script"

// Metadata keys (instance attributes) that configure Script. See README.md.
const (
	// MetadataTrainCmd is the training command, run with bash -c. Required.
	MetadataTrainCmd = "autoheal-train-cmd"
	// MetadataCheckpointDir is the gs:// directory holding the checkpoints.
	MetadataCheckpointDir = "autoheal-checkpoint-dir"
	// MetadataCheckpointMarker names the object that marks a checkpoint
	// complete, e.g. commit_success.txt; unset means every entry counts.
	MetadataCheckpointMarker = "autoheal-checkpoint-marker"
	// MetadataWorkdir is the directory the commands run in.
	MetadataWorkdir = "autoheal-workdir"
	// MetadataSetupCmd prepares the environment before the first attempt.
	MetadataSetupCmd = "autoheal-setup-cmd"
	// MetadataMaxAttempts caps the attempts per boot (default 100, 0 = none).
	MetadataMaxAttempts = "autoheal-max-attempts"
	// MetadataBackoffSeconds is the first delay between attempts (default 10).
	MetadataBackoffSeconds = "autoheal-backoff-seconds"
	// MetadataBackoffMaxSeconds caps the delay (default 300).
	MetadataBackoffMaxSeconds = "autoheal-backoff-max-seconds"
	// MetadataReadyTimeoutSeconds bounds the wait for TPU devices and
	// storage at boot (default 300).
	MetadataReadyTimeoutSeconds = "autoheal-ready-timeout-seconds"
	// MetadataWorkerNumber is set by the TPU platform on every worker.
	MetadataWorkerNumber = "agent-worker-number"
)

// Environment variables Script sets for the training and setup commands.
const (
	// EnvResumeFrom is the newest checkpoint's URI, empty for a fresh start.
	EnvResumeFrom = "AUTOHEAL_RESUME_FROM"
	// EnvCheckpointDir repeats MetadataCheckpointDir.
	EnvCheckpointDir = "AUTOHEAL_CHECKPOINT_DIR"
	// EnvWorker is this host's worker number.
	EnvWorker = "AUTOHEAL_WORKER"
	// EnvAttempt counts the attempts of this boot from 1.
	EnvAttempt = "AUTOHEAL_ATTEMPT"
)

// MaxMetadataValueBytes is Compute Engine's limit on one metadata value; the
// script must fit in it to be set as startup-script.
const MaxMetadataValueBytes = 256 * 1024

// MetadataKeys returns the keys a user sets to configure Script, the
// required one first.
func MetadataKeys() []string {
	return []string{
		MetadataTrainCmd,
		MetadataCheckpointDir,
		MetadataCheckpointMarker,
		MetadataWorkdir,
		MetadataSetupCmd,
		MetadataMaxAttempts,
		MetadataBackoffSeconds,
		MetadataBackoffMaxSeconds,
		MetadataReadyTimeoutSeconds,
	}
}

// MissingKeys returns the keys Script requires that metadata (a node's
// metadata map) lacks or leaves blank; nil when Script can run. A recreate
// that installs Script on a node for which this is non-empty should warn in
// its record: the node will boot and do nothing.
func MissingKeys(metadata map[string]string) []string {
	var missing []string
	if strings.TrimSpace(metadata[MetadataTrainCmd]) == "" {
		missing = append(missing, MetadataTrainCmd)
	}
	return missing
}
