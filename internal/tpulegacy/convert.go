package tpulegacy

import (
	"strings"
	"time"

	"cloud.google.com/go/tpu/apiv1/tpupb"
	tpu "google.golang.org/api/tpu/v2"
)

// useServiceNetworkingKey is the metadata key that carries a legacy node's
// useServiceNetworking flag in the v2 shape, which has no such field. It is
// kept in the saved spec (metadata survives remediate.CleanSpec) and turned
// back into the flag on create; metadata itself is never sent to v1.
const useServiceNetworkingKey = "tpu-autoheal-legacy-use-service-networking"

// ToV2 converts a v1 node to the v2 shape remediate works with. ApiVersion
// is the node's own (V1 or V1_ALPHA1), "V1" when v1 leaves it unset: it is
// the marker tpuapi.Router routes by.
func ToV2(n *tpupb.Node) *tpu.Node {
	if n == nil {
		return nil
	}
	out := &tpu.Node{
		Name:              n.GetName(),
		Description:       n.GetDescription(),
		AcceleratorType:   n.GetAcceleratorType(),
		RuntimeVersion:    n.GetTensorflowVersion(),
		CidrBlock:         n.GetCidrBlock(),
		HealthDescription: n.GetHealthDescription(),
		ApiVersion:        "V1",
	}
	if n.GetApiVersion() == tpupb.Node_V1_ALPHA1 {
		out.ApiVersion = "V1_ALPHA1"
	}
	if n.GetState() != tpupb.Node_STATE_UNSPECIFIED {
		out.State = n.GetState().String()
	}
	if n.GetHealth() != tpupb.Node_HEALTH_UNSPECIFIED {
		out.Health = n.GetHealth().String()
	}
	if n.GetNetwork() != "" {
		out.NetworkConfig = &tpu.NetworkConfig{Network: n.GetNetwork()}
	}
	if n.GetServiceAccount() != "" {
		out.ServiceAccount = &tpu.ServiceAccount{Email: n.GetServiceAccount()}
	}
	if sc := n.GetSchedulingConfig(); sc != nil && (sc.GetPreemptible() || sc.GetReserved()) {
		out.SchedulingConfig = &tpu.SchedulingConfig{Preemptible: sc.GetPreemptible(), Reserved: sc.GetReserved()}
	}
	if len(n.GetLabels()) > 0 {
		out.Labels = make(map[string]string, len(n.GetLabels()))
		for k, v := range n.GetLabels() {
			out.Labels[k] = v
		}
	}
	if n.GetUseServiceNetworking() {
		out.Metadata = map[string]string{useServiceNetworkingKey: "true"}
	}
	if ts := n.GetCreateTime(); ts != nil {
		out.CreateTime = ts.AsTime().UTC().Format(time.RFC3339Nano)
	}
	for _, ep := range n.GetNetworkEndpoints() {
		out.NetworkEndpoints = append(out.NetworkEndpoints, &tpu.NetworkEndpoint{IpAddress: ep.GetIpAddress(), Port: int64(ep.GetPort())})
	}
	for _, s := range n.GetSymptoms() {
		v2 := &tpu.Symptom{Details: s.GetDetails(), WorkerId: s.GetWorkerId()}
		if s.GetSymptomType() != tpupb.Symptom_SYMPTOM_TYPE_UNSPECIFIED {
			v2.SymptomType = s.GetSymptomType().String()
		}
		if s.GetCreateTime() != nil {
			v2.CreateTime = s.GetCreateTime().AsTime().UTC().Format(time.RFC3339Nano)
		}
		out.Symptoms = append(out.Symptoms, v2)
	}
	return out
}

// ToV1 converts the v2-shaped node remediate creates into the v1 node to
// send to nodes.create: only the fields a person sets on a legacy node.
// Output-only fields and v2-only fields (metadata, tags, disks, shielded and
// accelerator config, subnetwork) are dropped; a v1 node has no place for
// them.
func ToV1(n *tpu.Node) *tpupb.Node {
	if n == nil {
		return nil
	}
	out := &tpupb.Node{
		Name:                 n.Name,
		Description:          n.Description,
		AcceleratorType:      n.AcceleratorType,
		TensorflowVersion:    n.RuntimeVersion,
		CidrBlock:            n.CidrBlock,
		UseServiceNetworking: strings.EqualFold(n.Metadata[useServiceNetworkingKey], "true"),
	}
	if n.NetworkConfig != nil {
		out.Network = n.NetworkConfig.Network
	}
	if n.ServiceAccount != nil {
		out.ServiceAccount = n.ServiceAccount.Email
	}
	if sc := n.SchedulingConfig; sc != nil && (sc.Preemptible || sc.Reserved || sc.Spot) {
		// v1 has no spot: a spot spec becomes preemptible, the closest.
		out.SchedulingConfig = &tpupb.SchedulingConfig{Preemptible: sc.Preemptible || sc.Spot, Reserved: sc.Reserved}
	}
	if len(n.Labels) > 0 {
		out.Labels = make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			out.Labels[k] = v
		}
	}
	return out
}
