package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	tpu "google.golang.org/api/tpu/v2"
)

// StartupScriptKey is the metadata key of a TPU VM's startup script.
const StartupScriptKey = "startup-script"

// CleanSpec returns a deep copy of n with every output-only field of the TPU
// v2 Node cleared, except Name, which is kept for reference (createSpec drops
// it: the name goes in the create call's parent and nodeId).
// Everything a person chose is kept: accelerator type and config, runtime
// version, network config(s), cidrBlock, service account, scheduling config,
// labels, tags, metadata, data disks, shielded config, boot disk config,
// description. ApiVersion is kept too, although output-only: it says which
// API created the node (V1 for a legacy TPU Node, V2 for a TPU VM), so the
// saved spec routes the create to the same API even after a crash between
// delete and create. The v2 API ignores output-only fields on create.
func CleanSpec(n *tpu.Node) *tpu.Node {
	c := CloneNode(n)
	if c == nil {
		return nil
	}
	c.State = ""
	c.Health = ""
	c.HealthDescription = ""
	c.CreateTime = ""
	c.Id = 0
	c.NetworkEndpoints = nil
	c.Symptoms = nil
	c.QueuedResource = ""
	c.MultisliceNode = false
	c.UpcomingMaintenance = nil
	c.ProtectionTier = ""
	return c
}

// Metadata keys the startup-script policy reads. They name the same keys as
// the startup package's constants (a test checks), without importing it:
// the policy lives here, the script and its needs are handed in (Config).
const (
	// ResumeOptInKey on a node opts it into the resume script
	// (Config.ResumeScript): its value is the training command.
	ResumeOptInKey = "autoheal-train-cmd"
)

// CreateSpec is the node sent to CreateNode: the saved spec without its name
// and without metadata NoticeMetadataKey (the old node's maintenance notice), labelled with the recovery
// generation, with the startup script chosen by StartupScriptFor. The
// warnings say when the node's own script is replaced or the node will come
// back with nothing to resume training; they go in the record.
func CreateSpec(saved *tpu.Node, generation int, cfg Config) (*tpu.Node, []string) {
	n := CloneNode(saved)
	n.Name = ""
	n.Labels = maps.Clone(n.Labels)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[GenerationLabel] = strconv.Itoa(generation)
	n.Metadata = maps.Clone(n.Metadata)
	delete(n.Metadata, NoticeMetadataKey) // a notice is about the old node, never carried over
	if saved.ApiVersion == "V1" || saved.ApiVersion == "V1_ALPHA1" {
		// A legacy TPU Node has no metadata: nothing runs at boot.
		return n, []string{"legacy TPU Node (API " + saved.ApiVersion + "): recreated without a startup script; training will not resume by itself"}
	}
	script, warnings := StartupScriptFor(n.Metadata, cfg)
	if script != "" {
		if n.Metadata == nil {
			n.Metadata = map[string]string{}
		}
		n.Metadata[StartupScriptKey] = script
	}
	return n, warnings
}

// StartupScriptFor is the startup-script policy: which script a node whose
// metadata is md comes back with, and the warnings for its record.
//
//   - A script configured explicitly (cfg.StartupScript) wins.
//   - Else a node that opted in by carrying ResumeOptInKey gets the resume
//     script handed in (cfg.ResumeScript).
//   - Else the node keeps its own startup-script.
//
// It warns whenever the node's own script is replaced, and whenever the node
// will come back with nothing to resume training: no script at all, or the
// resume script without one of the keys it needs (cfg.ResumeKeys). Warnings
// give sizes, never metadata values.
func StartupScriptFor(md map[string]string, cfg Config) (script string, warnings []string) {
	own := md[StartupScriptKey]
	_, optedIn := md[ResumeOptInKey]
	replaced := func(script, by string) {
		if own != "" && own != script {
			warnings = append(warnings, fmt.Sprintf("the node's own startup-script (%d bytes) is replaced by %s", len(own), by))
		}
	}
	resumeNeeds := func() {
		if missing := MissingKeys(md, cfg.ResumeKeys); len(missing) > 0 {
			warnings = append(warnings, fmt.Sprintf("the resume script needs metadata %s; the node boots but training will not resume until it is set", strings.Join(missing, ", ")))
		}
	}
	switch {
	case cfg.StartupScript != "":
		replaced(cfg.StartupScript, "the configured script (AUTOHEAL_STARTUP_SCRIPT / --startup-script)")
		if cfg.StartupScript == cfg.ResumeScript {
			resumeNeeds()
		}
		return cfg.StartupScript, warnings
	case optedIn && cfg.ResumeScript != "":
		replaced(cfg.ResumeScript, "the resume script (the node carries metadata "+ResumeOptInKey+")")
		resumeNeeds()
		return cfg.ResumeScript, warnings
	case own != "":
		return own, nil
	case optedIn:
		return "", []string{"metadata " + ResumeOptInKey + " is set but no resume script was handed in and the node had no startup-script; the node is recreated but training will not resume by itself"}
	default:
		return "", []string{"no startup script: none configured, the node had no metadata startup-script and no " + ResumeOptInKey + "; the node is recreated but training will not resume by itself"}
	}
}

// MissingKeys returns the keys of need that metadata lacks or leaves blank,
// in need's order; nil when none is missing.
func MissingKeys(metadata map[string]string, need []string) []string {
	var missing []string
	for _, k := range need {
		if strings.TrimSpace(metadata[k]) == "" {
			missing = append(missing, k)
		}
	}
	return missing
}

// CloneNode deep-copies a node through its JSON form, the form the ledger
// saves it in (so the in-memory ledger loses exactly what Firestore loses:
// nothing the API returns). The one copy the ledger and remediate share.
func CloneNode(n *tpu.Node) *tpu.Node {
	if n == nil {
		return nil
	}
	b, err := json.Marshal(n)
	if err != nil {
		panic(fmt.Sprintf("remediate: marshal node %s: %v", n.Name, err)) // a tpu.Node always marshals
	}
	var c tpu.Node
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("remediate: unmarshal node %s: %v", n.Name, err))
	}
	return &c
}

// ParseNodeName splits projects/P/locations/Z/nodes/N.
func ParseNodeName(name string) (parent, project, zone, nodeID string, err error) {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[0] != "projects" || p[2] != "locations" || p[4] != "nodes" || p[1] == "" || p[3] == "" || p[5] == "" {
		return "", "", "", "", fmt.Errorf("node name %q: want projects/P/locations/Z/nodes/N", name)
	}
	return strings.Join(p[:4], "/"), p[1], p[3], p[5], nil
}
