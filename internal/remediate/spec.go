package remediate

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/startup"
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
	c := cloneNode(n)
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

// createSpec is the node sent to CreateNode: the saved spec without its
// name, labelled with the recovery generation, with the startup script set
// (configured script wins; else the node's own). It returns a warning when
// there is no script at all: the node comes back, training does not resume.
func createSpec(saved *tpu.Node, generation int, script string) (*tpu.Node, []string) {
	n := cloneNode(saved)
	n.Name = ""
	n.Labels = maps.Clone(n.Labels)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[GenerationLabel] = strconv.Itoa(generation)
	n.Metadata = maps.Clone(n.Metadata)
	delete(n.Metadata, NoticeMetadataKey) // maint (#10): a notice is about the old node, never carried over
	var warnings []string
	switch {
	case saved.ApiVersion == "V1" || saved.ApiVersion == "V1_ALPHA1":
		// A legacy TPU Node has no metadata: nothing runs at boot.
		warnings = append(warnings, "legacy TPU Node (API "+saved.ApiVersion+"): recreated without a startup script; training will not resume by itself")
	case script != "":
		if n.Metadata == nil {
			n.Metadata = map[string]string{}
		}
		n.Metadata[StartupScriptKey] = script
		if script == startup.Script {
			if missing := startup.MissingKeys(n.Metadata); len(missing) > 0 {
				warnings = append(warnings, fmt.Sprintf("startup script resume-training.sh needs metadata %s; the node boots but training will not resume until it is set", strings.Join(missing, ", ")))
			}
		}
	case n.Metadata[StartupScriptKey] != "":
	default:
		warnings = append(warnings, "no startup script: none configured and the node had no metadata startup-script; the node is recreated but training will not resume by itself")
	}
	return n, warnings
}

// cloneNode deep-copies a node through its JSON form (the form the ledger
// saves it in).
func cloneNode(n *tpu.Node) *tpu.Node {
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

// parseNodeName splits projects/P/locations/Z/nodes/N.
func parseNodeName(name string) (parent, project, zone, nodeID string, err error) {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[0] != "projects" || p[2] != "locations" || p[4] != "nodes" || p[1] == "" || p[3] == "" || p[5] == "" {
		return "", "", "", "", fmt.Errorf("node name %q: want projects/P/locations/Z/nodes/N", name)
	}
	return strings.Join(p[:4], "/"), p[1], p[3], p[5], nil
}
