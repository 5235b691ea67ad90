// Package computevm is the Compute Engine backend: TPU VMs that run as
// Compute Engine instances with a TPU machine type (TPU7x and later; v6e
// and v5p when created that way), single-host or as multi-host slices,
// standalone or owned by a managed instance group. Client observes (get,
// list the opted-in TPU instances of a zone), acts (start, insert from a
// saved spec, recreateInstances on a MIG, setMetadata with the fingerprint)
// and polls zone operations, mapping every error to a domain kind (package failure); Recovery
// (recovery.go) interprets vmpolicy's decisions with the ledger's guards.
//
// It never deletes or stops an instance, and never calls anything on an
// instance that is not opted in (label tpu-autoheal=enabled) and of a TPU
// machine type.
//
// Why google.golang.org/api/compute/v1 and not cloud.google.com/go/compute/apiv1:
// the project already depends on the google.golang.org/api module (the TPU
// v2 client comes from it), so this client adds no module; its resources are
// the documented REST JSON (what a fleet file, `gcloud compute instances
// describe --format=json` and the audit log carry), so a saved spec is that
// JSON and internal/computefake serves the same types; the apiv1 client wraps
// the same REST calls in protobuf types and its own operation type, which
// would make the fake, the fleet files and the saved specs translate.
package computevm

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

	"github.com/tpu-autoheal/autoheal/internal/endpoint"
	"github.com/tpu-autoheal/autoheal/internal/failure"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// OptInFilter is the instances.list filter of the opted-in instances.
const OptInFilter = `labels.tpu-autoheal = "enabled"`

// MaxListPages bounds one zone's listing: 500 instances a page, so 200
// pages are 100 000 instances, far over any project's quota. A listing that
// repeats a page token or passes the bound is an error, never a loop.
const MaxListPages = 200

// Client talks to Compute Engine through the compute/v1 REST client.
type Client struct {
	svc *compute.Service
	// PageSize is instances.list's maxResults (0 = the API's default, 500).
	PageSize int64
}

// New wraps a compute/v1 service.
func New(svc *compute.Service) *Client { return &Client{svc: svc} }

// NewFromOptions builds the service from client options (none for the real
// API with Application Default Credentials; EndpointOptions for another
// endpoint).
func NewFromOptions(ctx context.Context, opts ...option.ClientOption) (*Client, error) {
	svc, err := compute.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("compute client: %w", err)
	}
	return New(svc), nil
}

// EndpointOptions are the client options of AUTOHEAL_COMPUTE_ENDPOINT /
// --compute-endpoint: nil for "" (compute.googleapis.com); else requests go
// to URL/compute/v1/projects/…, as on the real host (the trailing slash the
// generated client needs is added), without credentials for a plain http
// URL (a local simulator), so they are never sent in clear text.
func EndpointOptions(e string) ([]option.ClientOption, error) {
	return endpoint.Options("compute endpoint", e, "/compute/v1")
}

// Ref is an instance's project, zone and name.
type Ref struct{ Project, Zone, Name string }

// String is projects/P/zones/Z/instances/I.
func (r Ref) String() string {
	return "projects/" + r.Project + "/zones/" + r.Zone + "/instances/" + r.Name
}

// ParseRef reads projects/P/zones/Z/instances/I (or a selfLink ending so).
func ParseRef(name string) (Ref, error) {
	i := strings.Index(name, "projects/")
	if i < 0 {
		return Ref{}, fmt.Errorf("%q is not projects/P/zones/Z/instances/I", name)
	}
	seg := strings.Split(name[i:], "/")
	if len(seg) != 6 || seg[2] != "zones" || seg[4] != "instances" || seg[1] == "" || seg[3] == "" || seg[5] == "" {
		return Ref{}, fmt.Errorf("%q is not projects/P/zones/Z/instances/I", name)
	}
	return Ref{Project: seg[1], Zone: seg[3], Name: seg[5]}, nil
}

// parseMIG reads projects/P/zones/Z/instanceGroupManagers/M (or a URL
// ending so).
func parseMIG(mig string) (project, zone, name string, err error) {
	i := strings.Index(mig, "projects/")
	if i >= 0 {
		seg := strings.Split(mig[i:], "/")
		if len(seg) == 6 && seg[2] == "zones" && seg[4] == "instanceGroupManagers" && seg[1] != "" && seg[3] != "" && seg[5] != "" {
			return seg[1], seg[3], seg[5], nil
		}
	}
	return "", "", "", fmt.Errorf("%q is not projects/P/zones/Z/instanceGroupManagers/M", mig)
}

// GetInstance reads an instance.
func (c *Client) GetInstance(ctx context.Context, r Ref) (*compute.Instance, error) {
	in, err := c.svc.Instances.Get(r.Project, r.Zone, r.Name).Context(ctx).Do() // rest: compute.instances.get
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", r, classify(err))
	}
	return in, nil
}

// ListOptedIn lists the opted-in instances of a TPU machine type in a zone,
// following page tokens: a token seen twice, or more than MaxListPages
// pages, ends the listing with a transient error (the next sweep tries
// again) rather than a loop.
func (c *Client) ListOptedIn(ctx context.Context, project, zone string) ([]*compute.Instance, error) {
	var out []*compute.Instance
	seen := map[string]bool{"": true}
	token := ""
	for page := 0; ; page++ {
		if page >= MaxListPages {
			return nil, fmt.Errorf("list instances in %s/%s: more than %d pages: %w", project, zone, MaxListPages, failed(failure.Transient, errors.New("listing without end")))
		}
		call := c.svc.Instances.List(project, zone).Filter(OptInFilter).Context(ctx)
		if token != "" {
			call = call.PageToken(token)
		}
		if c.PageSize > 0 {
			call = call.MaxResults(c.PageSize)
		}
		resp, err := call.Do() // rest: compute.instances.list
		if err != nil {
			return nil, fmt.Errorf("list instances in %s/%s: %w", project, zone, classify(err))
		}
		for _, in := range resp.Items {
			if in != nil && IsTPU(in) && OptedIn(in) {
				out = append(out, in)
			}
		}
		if resp.NextPageToken == "" {
			return out, nil
		}
		if seen[resp.NextPageToken] {
			return nil, fmt.Errorf("list instances in %s/%s: page token %q repeated: %w", project, zone, resp.NextPageToken, failed(failure.Transient, errors.New("page token repeated")))
		}
		seen[resp.NextPageToken] = true
		token = resp.NextPageToken
	}
}

// Start starts a TERMINATED instance and returns its operation's name.
// requestID makes a retry of the same step idempotent (RequestID).
func (c *Client) Start(ctx context.Context, r Ref, requestID string) (string, error) {
	op, err := c.svc.Instances.Start(r.Project, r.Zone, r.Name).RequestId(requestID).Context(ctx).Do() // rest: compute.instances.start
	if err != nil {
		return "", fmt.Errorf("start instance %s: %w", r, classify(err))
	}
	return op.Name, nil
}

// Insert creates an instance from spec (a saved spec: see SpecOf) in r's
// zone under r's name and returns its operation's name.
func (c *Client) Insert(ctx context.Context, r Ref, spec *compute.Instance, requestID string) (string, error) {
	body := *spec
	body.Name = r.Name
	op, err := c.svc.Instances.Insert(r.Project, r.Zone, &body).RequestId(requestID).Context(ctx).Do() // rest: compute.instances.insert
	if err != nil {
		return "", fmt.Errorf("insert instance %s: %w", r, classify(err))
	}
	return op.Name, nil
}

// RecreateInstances asks the MIG (projects/P/zones/Z/instanceGroupManagers/M)
// to recreate the named instances (instance names or URLs), together.
func (c *Client) RecreateInstances(ctx context.Context, mig string, instances []string, requestID string) (string, error) {
	project, zone, name, err := parseMIG(mig)
	if err != nil {
		return "", fmt.Errorf("recreate instances: %w", failed(failure.Permanent, err))
	}
	urls := make([]string, len(instances))
	for i, in := range instances {
		r, err := ParseRef(in)
		if err != nil {
			return "", fmt.Errorf("recreate instances of %s: %w", mig, failed(failure.Permanent, err))
		}
		urls[i] = "zones/" + r.Zone + "/instances/" + r.Name
	}
	req := &compute.InstanceGroupManagersRecreateInstancesRequest{Instances: urls}
	op, err := c.svc.InstanceGroupManagers.RecreateInstances(project, zone, name, req).RequestId(requestID).Context(ctx).Do() // rest: compute.instanceGroupManagers.recreateInstances
	if err != nil {
		return "", fmt.Errorf("recreate instances %v of %s: %w", instances, mig, classify(err))
	}
	return op.Name, nil
}

// MIGIsSlice reports whether the MIG is a multi-host slice: it has a
// workload policy (the accelerator topology), so its instances are one
// slice, recovered together; a MIG without one is a group of single-host
// VMs, each its own slice.
func (c *Client) MIGIsSlice(ctx context.Context, mig string) (bool, error) {
	m, err := c.getMIG(ctx, mig)
	if err != nil {
		return false, err
	}
	return m.ResourcePolicies != nil && m.ResourcePolicies.WorkloadPolicy != "", nil
}

// getMIG reads the MIG projects/P/zones/Z/instanceGroupManagers/M.
func (c *Client) getMIG(ctx context.Context, mig string) (*compute.InstanceGroupManager, error) {
	project, zone, name, err := parseMIG(mig)
	if err != nil {
		return nil, failed(failure.Permanent, err)
	}
	m, err := c.svc.InstanceGroupManagers.Get(project, zone, name).Context(ctx).Do() // rest: compute.instanceGroupManagers.get
	if err != nil {
		return nil, fmt.Errorf("get instance group manager %s: %w", mig, classify(err))
	}
	return m, nil
}

// ManagedInstance is one instance a MIG lists as its own: Instance its
// name (projects/P/zones/Z/instances/I), CurrentAction what the MIG is
// doing with it (NONE, RECREATING, DELETING, ABANDONING, …).
type ManagedInstance struct {
	Instance      string
	CurrentAction string
}

// ManagedInstances lists the MIG's members (listManagedInstances,
// following page tokens with the bounds of ListOptedIn). A MIG's slice is
// taken from it, not from the zone's listing, which may lack a member (a
// page passed over, a VM deleted). Fewer members listed than the MIG's
// targetSize is a transient error (a page passed over here too): the slice
// is decided on a later look, never from part of it.
func (c *Client) ManagedInstances(ctx context.Context, mig string) ([]ManagedInstance, error) {
	m, err := c.getMIG(ctx, mig)
	if err != nil {
		return nil, err
	}
	project, zone, name, _ := parseMIG(mig) // parsed by getMIG
	var out []ManagedInstance
	seen := map[string]bool{"": true}
	token := ""
	for page := 0; ; page++ {
		if page >= MaxListPages {
			return nil, fmt.Errorf("list the instances of %s: more than %d pages: %w", mig, MaxListPages, failed(failure.Transient, errors.New("listing without end")))
		}
		call := c.svc.InstanceGroupManagers.ListManagedInstances(project, zone, name).Context(ctx)
		if token != "" {
			call = call.PageToken(token)
		}
		resp, err := call.Do() // rest: compute.instanceGroupManagers.listManagedInstances
		if err != nil {
			return nil, fmt.Errorf("list the instances of %s: %w", mig, classify(err))
		}
		for _, mi := range resp.ManagedInstances {
			if mi == nil {
				continue
			}
			r, err := ParseRef(mi.Instance)
			if err != nil {
				return nil, fmt.Errorf("list the instances of %s: %w", mig, failed(failure.Permanent, err))
			}
			out = append(out, ManagedInstance{Instance: r.String(), CurrentAction: mi.CurrentAction})
		}
		if resp.NextPageToken == "" {
			break
		}
		if seen[resp.NextPageToken] {
			return nil, fmt.Errorf("list the instances of %s: page token %q repeated: %w", mig, resp.NextPageToken, failed(failure.Transient, errors.New("page token repeated")))
		}
		seen[resp.NextPageToken] = true
		token = resp.NextPageToken
	}
	if int64(len(out)) < m.TargetSize {
		return nil, fmt.Errorf("list the instances of %s: %d listed, its targetSize is %d: %w", mig, len(out), m.TargetSize, failed(failure.Transient, errors.New("members missing from the listing")))
	}
	return out, nil
}

// SetMetadataKey sets one metadata key of an instance, read-modify-write:
// the instance's metadata as read (in), with key set to value, sent with
// in's fingerprint. A concurrent change makes Compute Engine refuse it
// (412 conditionNotMet, KindTransient): read again and retry.
func (c *Client) SetMetadataKey(ctx context.Context, r Ref, in *compute.Instance, key, value string) (string, error) {
	md := &compute.Metadata{}
	if in.Metadata != nil {
		md.Fingerprint = in.Metadata.Fingerprint
		for _, it := range in.Metadata.Items {
			if it != nil && it.Key != key {
				md.Items = append(md.Items, it)
			}
		}
	}
	md.Items = append(md.Items, &compute.MetadataItems{Key: key, Value: &value})
	op, err := c.svc.Instances.SetMetadata(r.Project, r.Zone, r.Name, md).Context(ctx).Do() // rest: compute.instances.setMetadata
	if err != nil {
		return "", fmt.Errorf("set metadata %s of %s: %w", key, r, classify(err))
	}
	return op.Name, nil
}

// FaultReason is the fault reason a faulty-host report gives
// (faultReasons[].behavior): "any GPU or TPU errors or faults where the
// accelerator becomes unusable".
const FaultReason = "CHIP_ERROR"

// ReportHostAsFaulty reports the host of a RUNNING reservation-bound
// instance faulty, disruptionSchedule IMMEDIATE (the only value the v1
// API allows): Compute Engine powers the VM off and repairs the host,
// which takes days, then starts it on the same host. description says why.
func (c *Client) ReportHostAsFaulty(ctx context.Context, r Ref, description, requestID string) (string, error) {
	req := &compute.InstancesReportHostAsFaultyRequest{
		DisruptionSchedule: "IMMEDIATE",
		FaultReasons:       []*compute.InstancesReportHostAsFaultyRequestFaultReason{{Behavior: FaultReason, Description: description}},
	}
	op, err := c.svc.Instances.ReportHostAsFaulty(r.Project, r.Zone, r.Name, req).RequestId(requestID).Context(ctx).Do() // rest: compute.instances.reportHostAsFaulty
	if err != nil {
		return "", fmt.Errorf("report the host of %s faulty: %w", r, classify(err))
	}
	return op.Name, nil
}

// GetOperation looks at a zone operation once: done false while it runs;
// done true when it ended, with its error classified (a capacity or quota
// error, RESOURCE_NOT_READY transient, …).
func (c *Client) GetOperation(ctx context.Context, project, zone, name string) (bool, error) {
	op, err := c.svc.ZoneOperations.Get(project, zone, name).Context(ctx).Do() // rest: compute.zoneOperations.get
	if err != nil {
		return false, fmt.Errorf("get operation %s/%s/%s: %w", project, zone, name, classify(err))
	}
	if op.Status != "DONE" {
		return false, nil
	}
	if op.Error != nil && len(op.Error.Errors) > 0 {
		return true, fmt.Errorf("operation %s ended in error: %w", name, classifyOperation(op))
	}
	return true, nil
}

// RequestID is the requestId of one step (key names it: the instance, the
// incident and the action): a UUID derived from key, so a retry of the step
// after a lost answer is the same request, which Compute Engine does not
// carry out twice (it keeps request ids for at least an hour).
func RequestID(key string) string {
	h := sha256.Sum256([]byte(key))
	h[6] = h[6]&0x0f | 0x50 // version 5-style (name-based)
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// GuestCheckpoint is the guest's autoheal/checkpoint report of an instance,
// read with instances.getGuestAttributes (queryPath autoheal/); ok false
// when the guest wrote none (404: nothing under the path) or the value is
// not a report.
func (c *Client) GuestCheckpoint(ctx context.Context, r Ref) (rep remediate.CheckpointReport, ok bool, _ error) {
	ga, err := c.svc.Instances.GetGuestAttributes(r.Project, r.Zone, r.Name).QueryPath(remediate.CheckpointNamespace + "/").Context(ctx).Do() // rest: compute.instances.getGuestAttributes
	if err != nil {
		if err := classify(err); !failure.IsNotFound(err) {
			return rep, false, fmt.Errorf("get guest attributes of %s: %w", r, err)
		}
		return rep, false, nil
	}
	if ga.QueryValue == nil {
		return rep, false, nil
	}
	for _, it := range ga.QueryValue.Items {
		if it != nil && it.Namespace == remediate.CheckpointNamespace && it.Key == remediate.CheckpointKey {
			if json.Unmarshal([]byte(it.Value), &rep) == nil && rep.Notice != "" {
				return rep, true, nil
			}
		}
	}
	return rep, false, nil
}

// PerformMaintenance starts an instance's announced maintenance now
// (allowed while its notice is PENDING with canReschedule).
func (c *Client) PerformMaintenance(ctx context.Context, r Ref, requestID string) (string, error) {
	op, err := c.svc.Instances.PerformMaintenance(r.Project, r.Zone, r.Name).RequestId(requestID).Context(ctx).Do() // rest: compute.instances.performMaintenance
	if err != nil {
		return "", fmt.Errorf("perform maintenance of %s: %w", r, classify(err))
	}
	return op.Name, nil
}
