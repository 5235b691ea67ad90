// Package startup supplies the default startup script that tpu-autoheal sets
// as metadata startup-script on a TPU VM it recreates (resume-training.sh:
// wait until ready, find the newest checkpoint, run the training command in a
// bounded retry loop, checkpoint on a maintenance notice), the names of the
// metadata keys, guest attributes and environment variables that script reads
// and sets, and the JSON shapes of the notice and of the guest's reports, so
// the rest of the system and the documentation speak of them by one name.
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
	// MetadataCheckpointCmd is run on the worker on a new maintenance
	// notice, to make the training checkpoint now.
	MetadataCheckpointCmd = "autoheal-checkpoint-cmd"
	// MetadataCheckpointSignal is sent (without MetadataCheckpointCmd) to
	// the training's process group on a new notice, e.g. USR1. No default:
	// a signal the training does not handle would kill it.
	MetadataCheckpointSignal = "autoheal-checkpoint-signal"
	// MetadataCheckpointWaitSeconds bounds the wait, from the notice's
	// sentAt, for the checkpoint it asked for (default 1800).
	MetadataCheckpointWaitSeconds = "autoheal-checkpoint-wait-seconds"
	// MetadataStopGraceSeconds bounds, on SIGTERM, the wait for every
	// process of the training's group to exit (default 60).
	MetadataStopGraceSeconds = "autoheal-stop-grace-seconds"
	// MetadataWorkerNumber is set by the TPU platform on every worker.
	MetadataWorkerNumber = "agent-worker-number"
	// MetadataMaintenance holds the maintenance notice (JSON, Notice) that
	// the function's prepare action writes and Script watches. Never set by
	// users, never carried over to a recreated node.
	MetadataMaintenance = "autoheal-maintenance"
)

// Guest attributes Script writes (metadata server PUT
// instance/guest-attributes/<namespace>/<key>); the function reads them with
// nodes.getGuestAttributes, one value per worker.
const (
	// GuestAttributeNamespace is the namespace of all of them.
	GuestAttributeNamespace = "autoheal"
	// GuestAttributeNotice acknowledges a notice: NoticeReport.
	GuestAttributeNotice = "autoheal/notice"
	// GuestAttributeCheckpoint reports the checkpoint written for a notice:
	// CheckpointReport.
	GuestAttributeCheckpoint = "autoheal/checkpoint"
	// GuestAttributeResumed reports the latest start of the training:
	// ResumedReport.
	GuestAttributeResumed = "autoheal/resumed"
)

// Notice is the value of MetadataMaintenance. Notice (the window's start
// time, RFC 3339) identifies it: one checkpoint per notice on each worker.
type Notice struct {
	Notice        string `json:"notice"`
	SentAt        string `json:"sentAt"`
	Status        string `json:"status"`
	Type          string `json:"type"`
	WindowStart   string `json:"windowStart"`
	WindowEnd     string `json:"windowEnd"`
	CanReschedule bool   `json:"canReschedule"`
}

// NoticeReport is GuestAttributeNotice: the worker saw Notice at Time and
// asked the training to checkpoint with Action: "cmd", "signal" or "none"
// (nothing configured: it only reports the next checkpoint).
type NoticeReport struct {
	Notice string `json:"notice"`
	Time   string `json:"time"`
	Action string `json:"action"`
}

// CheckpointReport is GuestAttributeCheckpoint: Checkpoint (a gs:// URI),
// complete and written at Time (RFC 3339, the object's update time), at or
// after the notice's sentAt. Notice repeats the notice's "notice" as read,
// or the platform's window_start_time; compare them as times.
type CheckpointReport struct {
	Notice     string `json:"notice"`
	Checkpoint string `json:"checkpoint"`
	Time       string `json:"time"`
}

// ResumedReport is GuestAttributeResumed: the training command started at
// Time (RFC 3339) from Checkpoint (empty: fresh start), whose update time is
// CheckpointTime (empty when unknown), on attempt Attempt (from 1, per boot)
// of worker Worker.
type ResumedReport struct {
	Time           string `json:"time"`
	Checkpoint     string `json:"checkpoint"`
	CheckpointTime string `json:"checkpointTime"`
	Attempt        int    `json:"attempt"`
	Worker         int    `json:"worker"`
}

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
	// EnvNotice is the notice, JSON as read (checkpoint command only).
	EnvNotice = "AUTOHEAL_NOTICE"
	// EnvTrainPGID is the training's process group (checkpoint command only).
	EnvTrainPGID = "AUTOHEAL_TRAIN_PGID"
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
		MetadataCheckpointCmd,
		MetadataCheckpointSignal,
		MetadataCheckpointWaitSeconds,
		MetadataStopGraceSeconds,
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
