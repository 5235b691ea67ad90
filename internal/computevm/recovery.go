package computevm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/failure"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/tpumachine"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Instances is the part of Compute Engine the recovery calls (*Client).
type Instances interface {
	GetInstance(ctx context.Context, r Ref) (*compute.Instance, error)
	ListOptedIn(ctx context.Context, project, zone string) ([]*compute.Instance, error)
	Start(ctx context.Context, r Ref, requestID string) (string, error)
	Insert(ctx context.Context, r Ref, spec *compute.Instance, requestID string) (string, error)
	RecreateInstances(ctx context.Context, mig string, instances []string, requestID string) (string, error)
	GetOperation(ctx context.Context, project, zone, name string) (bool, error)
	MIGIsSlice(ctx context.Context, mig string) (bool, error)
	ManagedInstances(ctx context.Context, mig string) ([]ManagedInstance, error)
	SetMetadataKey(ctx context.Context, r Ref, in *compute.Instance, key, value string) (string, error)
	ReportHostAsFaulty(ctx context.Context, r Ref, description, requestID string) (string, error)
	GuestCheckpoint(ctx context.Context, r Ref) (remediate.CheckpointReport, bool, error)
	PerformMaintenance(ctx context.Context, r Ref, requestID string) (string, error)
}

var _ Instances = (*Client)(nil)

// Recovery is the instance path's small interpreter: it observes a slice,
// asks vmpolicy.Decide, and carries a mutating decision out through the
// ledger's guards, writing one record per decision as node recoveries do.
//
// Guards reused from the ledger (remediate.Store): the pause
// (History.Pause, and zone and project pauses applied here), and Claim's lease, cooldown,
// window cap, project in-flight cap and, for recreate, the zone's storm
// breaker (the ledger's breaker counts only recreate and reset claims, so a
// start or a MIG's recreateInstances is not counted there). Dry run is the
// handler's Config.DryRun. Not reused: the ledger's event dedupe
// (MarkEvent: a redelivery is handled again, idempotently), the node's Hold (a held instance is
// held by the evidence itself, decided again on every look) and deferrals
// (the ledger's deferrals are advanced as nodes; SliceState.Since and the
// sweep take their place).
type Recovery struct {
	Compute  Instances
	Store    Store
	Ledger   remediate.Store
	Recorder remediate.Recorder
	Config   remediate.Config // DryRun, Lease, Cooldown, Window, caps, breaker
	Policy   vmpolicy.Config
	Holder   string
	Now      func() time.Time
	// Sealer seals every saved spec and verifies it before an insert
	// (specseal.go); nil: specs are neither sealed nor verified (local
	// runs). TrustUnsealedSpecs accepts a spec saved with no seal, as
	// remediate.Handler.TrustUnsealedSpecs does for nodes.
	Sealer             seal.Sealer
	TrustUnsealedSpecs bool

	mu        sync.Mutex
	migSlices map[string]bool // MIGIsSlice, cached: a MIG's workload policy does not change
	// notOurs caches the instances found not to be opted-in TPU VMs (the
	// sink routes entries about every VM of a project), until when.
	notOurs map[string]time.Time
}

// NotOursTTL is how long an instance found not to be an opted-in TPU VM is
// dropped without a lookup; MaxNotOurs bounds that cache.
const (
	NotOursTTL = time.Hour
	MaxNotOurs = 10000
)

func (r *Recovery) cachedNotOurs(name string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.notOurs[name]
	return ok && now.Before(until)
}

func (r *Recovery) rememberNotOurs(name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notOurs == nil || len(r.notOurs) >= MaxNotOurs {
		r.notOurs = map[string]time.Time{} // bounded: start over
	}
	r.notOurs[name] = now.Add(NotOursTTL)
}

// keyOf is the slice key of an instance (SliceKey), reading whether its
// MIG is a multi-host slice once per MIG.
func (r *Recovery) keyOf(ctx context.Context, in *compute.Instance, ref Ref) (string, error) {
	mig := MIGOf(in, ref.Project)
	if mig == "" {
		return SliceKey(in, ref, false), nil
	}
	r.mu.Lock()
	isSlice, ok := r.migSlices[mig]
	r.mu.Unlock()
	if !ok {
		var err error
		if isSlice, err = r.Compute.MIGIsSlice(ctx, mig); err != nil {
			return "", err
		}
		r.mu.Lock()
		if r.migSlices == nil {
			r.migSlices = map[string]bool{}
		}
		r.migSlices[mig] = isSlice
		r.mu.Unlock()
	}
	return SliceKey(in, ref, isSlice), nil
}

func (r *Recovery) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// member is one instance of a slice as just observed: in nil when NOT FOUND.
type member struct {
	ref   Ref
	in    *compute.Instance
	spec  *compute.Instance // saved.Spec, nil when none is saved
	saved SavedSpec
	// mig is the MIG that listed it as its own ("" when the slice is not a
	// MIG's), action what that MIG said it is doing with it.
	mig, action string
}

// evidenceOf is the evidence an event gives, ok false when it gives none
// (an insert, ours or anyone's, changes nothing the table reads).
func evidenceOf(ev events.Event) (vmpolicy.Evidence, bool) {
	e := vmpolicy.Evidence{
		Instance: Ref{Project: ev.Node.Project, Zone: ev.Node.Zone, Name: ev.Instance}.String(),
		Method:   ev.Method, Time: ev.Time, InsertID: ev.Key(),
	}
	if ev.Admin != nil {
		switch ev.Admin.Change {
		case events.ChangeStopInstance, events.ChangeSuspendInstance, events.ChangeDeleteInstance:
			if ev.Admin.Code != 0 {
				return e, false // refused: nothing happened
			}
			e.Kind = vmpolicy.EvidencePerson // we never stop, suspend or delete
			return e, true
		}
		return e, false
	}
	switch ev.Method {
	case events.MethodHostError, events.MethodPreempted, events.MethodTerminateOnHostMaintenance:
		e.Kind = vmpolicy.EvidenceSystem
	case events.MethodAutomaticRestart:
		e.Kind = vmpolicy.EvidenceRestart
	default:
		e.Kind = vmpolicy.EvidenceNotice
	}
	return e, true
}

// HandleEvent handles an instance event (events.KindInstance): the entry
// is kept as evidence, then the instance's slice is looked at now. Errors
// returned are transient (retry the delivery); everything else is recorded,
// except an entry about an instance that is not an opted-in TPU VM, which is
// returned but not written (most entries are: the sink routes every VM's).
func (r *Recovery) HandleEvent(ctx context.Context, ev events.Event) ([]remediate.Record, error) {
	// No MarkEvent: a delivery that failed transiently must be handled
	// again in full when redelivered (its evidence kept), and handling
	// one twice is harmless: evidence is deduplicated by the entry's key
	// and a slice is acted on once per incident.
	start := r.now()
	ref := Ref{Project: ev.Node.Project, Zone: ev.Node.Zone, Name: ev.Instance}
	if r.cachedNotOurs(ref.String(), start) {
		return []remediate.Record{r.build(start, &ev, ref.String(), nil, remediate.ActionRecord, "not an opted-in Compute Engine TPU VM (looked up within the hour)", nil)}, nil
	}
	in, err := r.Compute.GetInstance(ctx, ref)
	if err != nil && !failure.IsNotFound(err) {
		// The evidence is kept (whether the instance is ours is unknown),
		// so the sweep, which lists the opted-in instances, decides with
		// it: also when the read is retried, since every delivery's read
		// may fail (vmswarm seed 315 of page-skip and slice-delete: five
		// deliveries of a Spot VM's preemption, five transient errors,
		// and the VM was never recreated).
		if e, ok := evidenceOf(ev); ok {
			if err := r.Store.AddEvidence(ctx, e); err != nil {
				return nil, fmt.Errorf("keep evidence of %s: %w", ev.InsertID, err)
			}
		}
		if failure.IsTransient(err) {
			return nil, err
		}
		// Not retryable: the entry is acknowledged.
		return []remediate.Record{r.record(ctx, start, &ev, ref.String(), nil, remediate.ActionSkip, "cannot read the instance; its evidence is kept for the sweep", err)}, nil
	}
	specs, err := r.Store.Specs(ctx, ref.Project, ref.Zone)
	if err != nil {
		return nil, fmt.Errorf("read saved specs of %s/%s: %w", ref.Project, ref.Zone, err)
	}
	saved := specs[ref.String()]
	spec := saved.Spec
	if in == nil && spec == nil {
		// Gone, and no spec saved: not ours, or a MIG's VM (a MIG's VMs
		// have no saved spec), which reads NOT FOUND while its MIG makes
		// it again under the name, on a lagging or faulty read, or after
		// a person deleted it. Kept as evidence, not dropped as "not
		// ours", and not remembered as such:
		//   - a system event: what the MIG row needs to act on (without
		//     it, a MIG's VM whose read lied is never recovered: chaos
		//     seed 1); a few a day per 1,000 VMs;
		//   - a person's delete (one write per delete of a VM that is
		//     gone): without it, the MIG's slice would be taken for broken
		//     by the platform and recreated whole, undoing the delete.
		if e, ok := evidenceOf(ev); ok && (e.Kind == vmpolicy.EvidenceSystem || e.Kind == vmpolicy.EvidencePerson && strings.HasSuffix(e.Method, ".delete")) {
			if err := r.Store.AddEvidence(ctx, e); err != nil {
				return nil, fmt.Errorf("keep evidence of %s: %w", ev.InsertID, err)
			}
			return []remediate.Record{r.build(start, &ev, ref.String(), nil, remediate.ActionRecord, "NOT FOUND and no spec saved: the entry is kept as evidence for the sweep (it may be a MIG's VM)", nil)}, nil
		}
	}
	if in == nil && spec == nil || in != nil && (!IsTPU(in) || !OptedIn(in)) {
		// Most instance entries are about VMs that are not TPU VMs, or not
		// opted in: recorded and dropped, the next ones of the hour
		// without a lookup.
		// Not written to the recorder: the sink cannot filter by machine
		// type or label, so these are most instance entries, and each
		// would be an "incident" of a VM that is none of ours in the
		// records and reports.
		r.rememberNotOurs(ref.String(), start)
		return []remediate.Record{r.build(start, &ev, ref.String(), nil, remediate.ActionRecord, "not an opted-in Compute Engine TPU VM", nil)}, nil
	}
	if e, ok := evidenceOf(ev); ok {
		if err := r.Store.AddEvidence(ctx, e); err != nil {
			return nil, fmt.Errorf("keep evidence of %s: %w", ev.InsertID, err)
		}
	}
	key, err := r.keyOf(ctx, orSpec(in, spec), ref)
	if err != nil {
		return nil, err
	}
	members := []member{{ref: ref, in: in, spec: spec, saved: saved}}
	if key != ref.String() {
		all, err := r.Compute.ListOptedIn(ctx, ref.Project, ref.Zone)
		if err != nil {
			return nil, err
		}
		if members, err = r.sliceMembers(ctx, key, ref, all, specs); err != nil {
			return nil, err
		}
	}
	rec, err := r.reconcile(ctx, start, &ev, key, members)
	if err != nil {
		return nil, err
	}
	return []remediate.Record{rec}, nil
}

func orSpec(in, spec *compute.Instance) *compute.Instance {
	if in != nil {
		return in
	}
	return spec
}

// sliceMembers are the instances of slice key in the zone: a MIG's slice
// is the MIG's members (migMembers); another, those listed and those whose
// spec was saved but that are gone.
func (r *Recovery) sliceMembers(ctx context.Context, key string, zone Ref, listed []*compute.Instance, specs map[string]SavedSpec) ([]member, error) {
	if strings.Contains(key, "/instanceGroupManagers/") {
		return r.migMembers(ctx, key, listed, specs)
	}
	var out []member
	seen := map[string]bool{}
	for _, in := range listed {
		ref := Ref{Project: zone.Project, Zone: zone.Zone, Name: in.Name}
		k, err := r.keyOf(ctx, in, ref)
		if err != nil {
			return nil, err
		}
		if k == key {
			out = append(out, member{ref: ref, in: in, spec: specs[ref.String()].Spec, saved: specs[ref.String()]})
			seen[ref.String()] = true
		}
	}
	for name, saved := range specs {
		ref, err := ParseRef(name)
		if err != nil || seen[name] {
			continue
		}
		if k, err := r.keyOf(ctx, saved.Spec, ref); err != nil {
			return nil, err
		} else if k == key {
			out = append(out, member{ref: ref, spec: saved.Spec, saved: saved})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.Name < out[j].ref.Name })
	return out, nil
}

// migMembers are the members of a multi-host slice's MIG as the MIG lists
// them (listManagedInstances), never as the zone's listing shows them: a
// listing that passed over a page, a member a person opted out or deleted,
// would leave the slice decided from part of it, and acted on partially
// (the MIG then recreates all of it, undoing what the person did). A member
// the listing lacks is read by name; NOT FOUND, it is a member all the same
// (the evidence of who deleted it decides).
func (r *Recovery) migMembers(ctx context.Context, mig string, listed []*compute.Instance, specs map[string]SavedSpec) ([]member, error) {
	managed, err := r.Compute.ManagedInstances(ctx, mig)
	if err != nil {
		return nil, err
	}
	project, zone := zoneOfKey(mig)
	byName := map[string]*compute.Instance{}
	for _, in := range listed {
		byName[Ref{Project: project, Zone: zone, Name: in.Name}.String()] = in
	}
	var out []member
	for _, mi := range managed {
		ref, err := ParseRef(mi.Instance)
		if err != nil {
			return nil, err
		}
		in, ok := byName[ref.String()]
		if !ok {
			if in, err = r.Compute.GetInstance(ctx, ref); err != nil && !failure.IsNotFound(err) {
				return nil, err
			}
		}
		saved := specs[ref.String()]
		out = append(out, member{ref: ref, in: in, spec: saved.Spec, saved: saved, mig: mig, action: mi.CurrentAction})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.Name < out[j].ref.Name })
	return out, nil
}

// migHeld is the decision about a MIG's slice a person acted on through
// the MIG: a member it is deleting or abandoning (instanceGroupManagers
// deleteInstances, abandonInstances) is leaving the slice on purpose.
func migHeld(members []member) (vmpolicy.Decision, bool) {
	for _, m := range members {
		if m.action == "DELETING" || m.action == "ABANDONING" {
			return vmpolicy.Decision{Action: vmpolicy.ActionHeld, Reason: fmt.Sprintf("%s says %s is %s: a person acted on the slice, never undone", m.mig, m.ref, m.action)}, true
		}
	}
	return vmpolicy.Decision{}, false
}

// SweepResult is what a sweep of the instance path did.
type SweepResult struct {
	Instances int
	Records   []remediate.Record
	Errors    []error // zones that could not be listed
}

// Sweep looks at every opted-in TPU instance of the zones: it saves the
// spec of each standalone one that changed (so a vanished VM can be
// recreated), and decides about every slice, vanished ones included.
func (r *Recovery) Sweep(ctx context.Context, projects, zones []string) (SweepResult, error) {
	var res SweepResult
	for _, p := range projects {
		for _, z := range zones {
			all, err := r.Compute.ListOptedIn(ctx, p, z)
			if err != nil {
				res.Errors = append(res.Errors, err)
				continue
			}
			specs, err := r.Store.Specs(ctx, p, z)
			if err != nil {
				return res, fmt.Errorf("read saved specs of %s/%s: %w", p, z, err)
			}
			res.Instances += len(all)
			slicesSeen := map[string]bool{}
			var keys []string
			for _, in := range all {
				ref := Ref{Project: p, Zone: z, Name: in.Name}
				if MIGOf(in, p) == "" && in.Status == vmpolicy.StatusRunning {
					if err := r.saveSpec(ctx, ref, in, specs); errors.Is(err, seal.ErrTransient) {
						res.Errors = append(res.Errors, err) // the old spec stays; the next sweep seals again
					} else if err != nil {
						return res, err
					}
				}
				k, err := r.keyOf(ctx, in, ref)
				if err != nil {
					res.Errors = append(res.Errors, err)
					continue
				}
				if !slicesSeen[k] {
					slicesSeen[k] = true
					keys = append(keys, k)
				}
			}
			for name, saved := range specs {
				ref, err := ParseRef(name)
				if err != nil {
					continue
				}
				if k, err := r.keyOf(ctx, saved.Spec, ref); err == nil && !slicesSeen[k] {
					slicesSeen[k] = true
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				members, err := r.sliceMembers(ctx, k, Ref{Project: p, Zone: z}, all, specs)
				if err != nil {
					res.Errors = append(res.Errors, err)
					continue
				}
				rec, err := r.reconcile(ctx, r.now(), nil, k, members)
				if err != nil {
					return res, err
				}
				res.Records = append(res.Records, rec)
			}
		}
	}
	return res, nil
}

// saveSpec saves in's spec, sealed, when it differs from the saved one or
// the instance was started since it was saved (specs is updated too).
func (r *Recovery) saveSpec(ctx context.Context, ref Ref, in *compute.Instance, specs map[string]SavedSpec) error {
	spec := SpecOf(in)
	if spec == nil {
		return nil
	}
	// Saved again when unsealed and a Sealer is configured: after an
	// upgrade, the first sweep seals the spec of every running instance.
	if old := specs[ref.String()]; old.Spec != nil && sameSpec(old.Spec, spec) && old.LastStart == in.LastStartTimestamp && (r.Sealer == nil || !old.Seal.IsZero()) {
		return nil
	}
	saved := SavedSpec{Spec: spec, Seen: r.now().UTC().Truncate(time.Microsecond), LastStart: in.LastStartTimestamp}
	if err := r.sealSpec(ctx, ref.String(), &saved); err != nil {
		return fmt.Errorf("seal spec of %s: %w", ref, err)
	}
	if err := r.Store.SaveSpec(ctx, ref.String(), saved); err != nil {
		return fmt.Errorf("save spec of %s: %w", ref, err)
	}
	specs[ref.String()] = saved
	return nil
}

func sameSpec(a, b *compute.Instance) bool {
	ja, err1 := a.MarshalJSON()
	jb, err2 := b.MarshalJSON()
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// reconcile decides about one slice and carries the decision out.
func (r *Recovery) reconcile(ctx context.Context, start time.Time, ev *events.Event, key string, members []member) (remediate.Record, error) {
	project, zone := zoneOfKey(key)
	state, err := r.Store.Slice(ctx, key)
	if err != nil {
		return remediate.Record{}, fmt.Errorf("read slice %s: %w", key, err)
	}
	var names []string
	var observed []vmpolicy.Instance
	// A MIG's member that is NOT FOUND (no spec is saved of a MIG's VM) is
	// of the MIG and opted in as its slice is: by the members found.
	migOptedIn := false
	for _, m := range members {
		if m.in != nil && m.mig != "" && OptedIn(m.in) && IsTPU(m.in) {
			migOptedIn = true
		}
	}
	for _, m := range members {
		names = append(names, m.ref.String())
		o := Observe(m.ref, m.in, m.spec)
		mode := r.maintenanceMode(m.in)
		o.NoPrepare, o.Early = mode == remediate.MaintenanceOff, mode == remediate.MaintenanceEarly
		o.Maintained = state.maintained(m.ref.String(), o.ID)
		o.MaintainedUntil = state.maintainedUntil(m.ref.String(), o.ID)
		o.FaultyReported = state.faultyReported(m.ref.String())
		if m.in == nil && m.mig != "" {
			o.MIG, o.OptedIn = m.mig, migOptedIn
		}
		if m.in == nil {
			o.Seen = m.saved.Seen
			if t, err := time.Parse(time.RFC3339Nano, m.saved.LastStart); err == nil {
				o.LastStart = t
			}
		}
		observed = append(observed, o)
	}
	seen := r.checkpoints(ctx, members, observed, state.CheckpointLate)
	evidence, err := r.Store.Evidence(ctx, names)
	if err != nil {
		return remediate.Record{}, fmt.Errorf("read evidence of %s: %w", key, err)
	}
	if state, err = r.verdicts(ctx, key, state); err != nil {
		return remediate.Record{}, err
	}
	now := r.now()
	state, waiting, err := r.resolveUnknown(ctx, key, state, members, now)
	if err != nil {
		return remediate.Record{}, err
	}
	dec := vmpolicy.Decide(vmpolicy.Input{Slice: observed, Evidence: evidence, Incident: state.Incident, Since: state.Since, CheckpointLate: state.CheckpointLate, MaintenanceUntil: state.MaintenanceUntil, Now: now}, r.Policy)
	if held, ok := migHeld(members); ok {
		dec = held
	}
	if err := r.keepLate(ctx, key, &state, dec); err != nil {
		return remediate.Record{}, err
	}
	if len(seen) > 0 {
		dec.Reason += " (" + strings.Join(seen, "; ") + ")"
	}
	healthy := true
	for _, o := range observed {
		healthy = healthy && o.Found && o.Status == vmpolicy.StatusRunning
	}
	switch {
	case healthy && (!state.Since.IsZero() || !state.MaintenanceUntil.IsZero()):
		state.Since, state.MaintenanceUntil = time.Time{}, time.Time{}
		if err := r.Store.SetSlice(ctx, key, state); err != nil {
			return remediate.Record{}, err
		}
	case !healthy && (state.Since.IsZero() || dec.MaintenanceUntil.After(state.MaintenanceUntil)):
		if state.Since.IsZero() {
			state.Since = now
		}
		if dec.MaintenanceUntil.After(state.MaintenanceUntil) {
			state.MaintenanceUntil = dec.MaintenanceUntil // kept while the slice is broken (vmpolicy)
		}
		if err := r.Store.SetSlice(ctx, key, state); err != nil {
			return remediate.Record{}, err
		}
	}
	if dec.Action == vmpolicy.ActionHeld {
		// A person deleted it: its spec is not ours to keep (nor to
		// recreate from); the slice is then looked at no more.
		for i, m := range members {
			if m.in == nil && m.spec != nil && personDeleted(evidence, observed[i].Name) {
				if err := r.Store.ForgetSpec(ctx, observed[i].Name); err != nil {
					return remediate.Record{}, fmt.Errorf("forget the spec of %s: %w", observed[i].Name, err)
				}
			}
		}
	}
	if len(waiting) > 0 {
		if dec.Action == vmpolicy.ActionHeld {
			// A person acted since: whatever the call did, nothing more is sent.
			state.Unknown = nil
			if err := r.Store.SetSlice(ctx, key, state); err != nil {
				return remediate.Record{}, err
			}
		} else if dec.Action.Mutates() {
			return r.record(ctx, start, ev, key, members, remediate.ActionDefer, waitingReason(dec, waiting), nil), nil
		}
	}
	action := remediate.Action(dec.Action)
	if !dec.Action.Mutates() {
		return r.record(ctx, start, ev, key, members, action, dec.Reason, nil), nil
	}
	hist, err := r.Ledger.History(ctx, key, project, "", now, r.Config.Window)
	if err != nil {
		return remediate.Record{}, fmt.Errorf("history of %s: %w", key, err)
	}
	pause, err := r.pause(ctx, hist, key, members)
	if err != nil {
		return remediate.Record{}, err
	}
	if pause != nil {
		return r.record(ctx, start, ev, key, members, remediate.ActionSkip, fmt.Sprintf("would %s: paused (%s)", dec.Action, pause.What()), nil), nil
	}
	var warnings []string
	if dec.Action == vmpolicy.ActionRecreate {
		// The ledger is not a trust root: a spec whose seal does not
		// verify is never inserted (specseal.go).
		w, refused, err := r.verifySpecs(ctx, dec.Targets, members)
		if err != nil {
			out := r.build(start, ev, key, members, remediate.ActionSkip, fmt.Sprintf("would %s: the seal of a saved spec could not be checked (no verdict): %v; looked at again on the next look", dec.Action, err), nil)
			out.Severity = remediate.SeverityWarning
			r.write(ctx, &out)
			return out, nil
		}
		if refused != "" {
			return r.record(ctx, start, ev, key, members, remediate.ActionSkip, refused, errors.New(refused)), nil
		}
		warnings = w
	}
	if r.Config.DryRun {
		return r.record(ctx, start, ev, key, members, remediate.ActionSkip, fmt.Sprintf("dry run: would %s %v: %s", dec.Action, dec.Targets, dec.Reason), nil), nil
	}
	if dec.Action == vmpolicy.ActionPrepare {
		// Not a recovery: no claim, no cooldown. Level-triggered: an
		// instance holding the notice is not written again, and the write
		// carries the fingerprint of the metadata as just read.
		steps, err := r.prepare(ctx, dec, members)
		out := r.build(start, ev, key, members, action, dec.Reason+": "+strings.Join(dec.Targets, ", "), err)
		out.Steps = steps
		if err == nil {
			out.Outcome = remediate.OutcomePrepared
		}
		r.write(ctx, &out)
		return out, nil
	}
	if dec.Action == vmpolicy.ActionMaintain {
		return r.maintain(ctx, start, ev, key, dec, members, state)
	}
	if dec.Action == vmpolicy.ActionReportFaulty {
		return r.reportFaulty(ctx, start, ev, key, dec, members, evidence, state)
	}
	cause := events.CauseUnknown
	if ev != nil {
		cause = ev.Cause
	}
	eventID := ""
	if ev != nil {
		eventID = ev.Key()
	}
	rec, err := r.Ledger.Claim(ctx, remediate.ClaimRequest{
		Node: key, Project: project, Zone: zone, Holder: r.Holder, Now: now,
		Action: action, EventID: eventID, Cause: cause, Config: r.Config,
	})
	if err != nil {
		var open *remediate.BreakerOpenError
		if errors.Is(err, remediate.ErrClaimed) || errors.Is(err, remediate.ErrCooldown) || errors.Is(err, remediate.ErrWindowCap) ||
			errors.Is(err, remediate.ErrInFlightCap) || errors.As(err, &open) {
			return r.record(ctx, start, ev, key, members, remediate.ActionSkip, fmt.Sprintf("would %s: %v", dec.Action, err), nil), nil
		}
		return remediate.Record{}, fmt.Errorf("claim %s: %w", key, err)
	}
	// Persist before acting. The claim is saved in a terminal phase that
	// counts as a recreate (remediate.CountsAsRecreate): it counts for the
	// cooldown and caps from here on, and no unfinished recovery named
	// after an instance is ever left for the node path's resumers to
	// advance as a TPU node, whatever happens next. The instance's state
	// is read again on every look; the slice's incident (saved next) says
	// what was sent, so a crash after the call cannot make it twice, and
	// the request ids make a retried call the same call.
	rec.Phase, rec.StartedAt, rec.UpdatedAt = remediate.PhaseRecovered, now, now
	rec.LastError = fmt.Sprintf("instance path: %s %v sent; the instances are read again on every look", dec.Action, dec.Targets)
	if err := r.Ledger.Update(ctx, rec); err != nil {
		return remediate.Record{}, fmt.Errorf("save claim of %s: %w", key, err)
	}
	prev := state.Incident
	incident := fmt.Sprintf("%s|%d", state.Since.UTC().Format(time.RFC3339Nano), rec.Generation)
	state.Incident = vmpolicy.Incident{Action: dec.Action, At: now}
	// The incident's starts or inserts are saved with it as sent, outcome
	// unknown, until their answers come: a process that dies after this
	// write, before the call or its answer, leaves them to the next look,
	// which finds them in effect or concludes them lost and reopens the
	// incident (unknown.go), never an incident marked sent whose call was
	// never made.
	intent := intentOf(dec, key, incident, now)
	state.Unknown = append(state.Unknown, intent...)
	if err := r.Store.SetSlice(ctx, key, state); err != nil {
		return remediate.Record{}, fmt.Errorf("save incident of %s: %w", key, err)
	}
	steps, pending, unknown, callErr := r.act(ctx, dec, key, members, incident)
	state.Unknown = withoutCalls(state.Unknown, intent)
	if callErr == nil && (len(pending) > 0 || len(intent) > 0) {
		state.Operations = pending
		if err := r.Store.SetSlice(ctx, key, state); err != nil {
			return remediate.Record{}, fmt.Errorf("save the operations of %s: %w", key, err)
		}
	}
	if callErr != nil {
		// Failed (a stockout, quota, a refusal, or an answer lost): the
		// incident is open again, so a later look retries once the
		// cooldown the claim counted for has passed (bounded by the window
		// cap); a call that took effect after all is the same request.
		// A call whose answer was lost or unclear is kept as sent, outcome
		// unknown: no other is sent for it until it is seen in effect or
		// concluded not to be (unknown.go).
		state.Incident, state.Unknown = prev, append(state.Unknown, unknown...)
		if err := r.Store.SetSlice(ctx, key, state); err != nil {
			return remediate.Record{}, fmt.Errorf("reopen incident of %s: %w", key, err)
		}
		rec.LastError, rec.UpdatedAt = callErr.Error(), r.now()
		if err := r.Ledger.Update(ctx, rec); err != nil {
			return remediate.Record{}, fmt.Errorf("save the failure of %s: %w", key, err)
		}
	}
	reason := dec.Reason + ": " + strings.Join(dec.Targets, ", ")
	out := r.build(start, ev, key, members, action, reason, callErr)
	out.Steps, out.Generation, out.Warnings = steps, rec.Generation, append(out.Warnings, warnings...)
	if callErr == nil {
		out.Phase = remediate.PhaseDone
	}
	r.write(ctx, &out)
	return out, nil
}

// verdicts looks at the operations of the incident's last action: one that
// ended in error (a stockout, quota, a refusal found late), or that Compute
// Engine no longer knows, reopens the incident, so a later look may act
// again; finished ones are dropped.
func (r *Recovery) verdicts(ctx context.Context, key string, state SliceState) (SliceState, error) {
	if len(state.Operations) == 0 {
		return state, nil
	}
	var open []string
	var failed error
	for _, op := range state.Operations {
		seg := strings.Split(op, "/")
		if len(seg) != 6 {
			continue
		}
		done, err := r.Compute.GetOperation(ctx, seg[1], seg[3], seg[5])
		switch {
		case !done && err != nil && failure.IsNotFound(err):
			// Forgotten by Compute Engine: no verdict will come. Reopen:
			// the next look decides from the instances' state, and acts
			// again (after the claim's cooldown) only if they are still
			// broken.
			failed = err
		case !done:
			open = append(open, op)
		case err != nil:
			failed = err
		}
	}
	next := state
	next.Operations = open
	if failed != nil {
		next.Incident, next.Operations = vmpolicy.Incident{}, nil
	}
	if err := r.Store.SetSlice(ctx, key, next); err != nil {
		return state, fmt.Errorf("save the verdicts of %s: %w", key, err)
	}
	return next, nil
}

// personDeleted reports whether the newest evidence about instance is a
// person's delete.
func personDeleted(evidence []vmpolicy.Evidence, instance string) bool {
	var last *vmpolicy.Evidence
	for i, e := range evidence {
		if e.Instance == instance && (e.Kind == vmpolicy.EvidencePerson || e.Kind == vmpolicy.EvidenceSystem) && (last == nil || !e.Time.Before(last.Time)) {
			last = &evidence[i]
		}
	}
	return last != nil && last.Kind == vmpolicy.EvidencePerson && strings.HasSuffix(last.Method, ".delete")
}

// maintenanceMode is the instance's maintenance mode: its label
// tpu-autoheal-maintenance when valid, else the configured mode.
func (r *Recovery) maintenanceMode(in *compute.Instance) string {
	mode := r.Config.MaintenanceMode
	if in != nil {
		if v := in.Labels[remediate.MaintenanceLabel]; v == remediate.MaintenanceOff || v == remediate.MaintenancePrepare || v == remediate.MaintenanceEarly {
			mode = v
		}
	}
	return mode
}

// prepare writes the maintenance notice into metadata autoheal-maintenance
// of each target (read-modify-write with the fingerprint of the instance
// as read this look, read again on a concurrent change: writeNotice), the
// same JSON the node path writes, so the startup script and the guest read
// one contract.
func (r *Recovery) prepare(ctx context.Context, dec vmpolicy.Decision, members []member) ([]remediate.Step, error) {
	var steps []remediate.Step
	var errs []error
	for _, t := range dec.Targets {
		for _, m := range members {
			if m.ref.String() != t || upcoming(m.in) == nil {
				continue
			}
			st, err := r.writeNotice(ctx, m.ref, m.in)
			steps = append(steps, st...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return steps, errors.Join(errs...)
}

// pauses is what a ledger that lists its pauses (ledger.Admin) offers:
// remediate.Pause.Covers reads TPU node names only, so zone and project
// pauses are applied to an instance's slice here.
type pauses interface {
	Pauses(ctx context.Context) ([]remediate.Pause, error)
}

// pause is the pause covering the slice (its key, or one of its
// instances by name, or its zone or project), nil when none.
func (r *Recovery) pause(ctx context.Context, hist remediate.History, key string, members []member) (*remediate.Pause, error) {
	if hist.Pause != nil {
		return hist.Pause, nil
	}
	l, ok := r.Ledger.(pauses)
	if !ok {
		return nil, nil
	}
	ps, err := l.Pauses(ctx)
	if err != nil {
		return nil, fmt.Errorf("read pauses: %w", err)
	}
	project, zone := zoneOfKey(key)
	for i, p := range ps {
		switch p.Scope {
		case remediate.PauseProject:
			if p.Project == project {
				return &ps[i], nil
			}
		case remediate.PauseZone:
			if p.Zone == zone && (p.Project == "" || p.Project == project) {
				return &ps[i], nil
			}
		case remediate.PauseNode:
			if p.Node == key {
				return &ps[i], nil
			}
			for _, m := range members {
				if p.Node == m.ref.String() {
					return &ps[i], nil
				}
			}
		}
	}
	return nil, nil
}

// act makes the decision's calls, one per target (recreateInstances: one
// for all), and looks once at each operation; pending are the operations
// without a verdict yet. incident names the incident and the claim: the
// request ids derive from it, so a call repeated within one claim is one
// request, and a retry under a later claim (after a stockout) a new one.
//
// A start or insert whose answer was lost or unclear (ambiguous) is
// returned in unknown: sent, outcome unknown (unknown.go).
func (r *Recovery) act(ctx context.Context, dec vmpolicy.Decision, key string, members []member, incident string) (steps []remediate.Step, pending []string, unknown []UnknownCall, _ error) {
	byName := map[string]member{}
	for _, m := range members {
		byName[m.ref.String()] = m
	}
	var errs []error
	call := func(name, target, requestID, project, zone string, f func() (string, error)) {
		t := r.now()
		op, err := f()
		if err != nil && ambiguous(err) && (dec.Action == vmpolicy.ActionStart || dec.Action == vmpolicy.ActionRecreate || dec.Action == vmpolicy.ActionReportFaulty) {
			unknown = append(unknown, UnknownCall{Instance: target, Action: dec.Action, RequestID: requestID, At: t})
		}
		st := remediate.Step{Name: name, Operation: op, Start: t}
		if err == nil && op != "" {
			done, oerr := r.Compute.GetOperation(ctx, project, zone, op)
			switch {
			case done && oerr != nil:
				err = oerr
			case !done:
				pending = append(pending, "projects/"+project+"/zones/"+zone+"/operations/"+op)
			}
		}
		st.Duration = r.now().Sub(t)
		if err != nil {
			st.Err = err.Error()
			errs = append(errs, err)
		}
		steps = append(steps, st)
	}
	switch dec.Action {
	case vmpolicy.ActionStart:
		for _, t := range dec.Targets {
			m := byName[t]
			id := requestIDOf(dec.Action, t, incident)
			call("start", t, id, m.ref.Project, m.ref.Zone, func() (string, error) {
				return r.Compute.Start(ctx, m.ref, id)
			})
		}
	case vmpolicy.ActionRecreate:
		for _, t := range dec.Targets {
			m := byName[t]
			id := requestIDOf(dec.Action, t, incident)
			call("insert", t, id, m.ref.Project, m.ref.Zone, func() (string, error) {
				return r.Compute.Insert(ctx, m.ref, m.spec, id)
			})
		}
	case vmpolicy.ActionReportFaulty:
		for _, t := range dec.Targets {
			m := byName[t]
			id := RequestID(t + "|reportHostAsFaulty|" + incident)
			call("reportHostAsFaulty", t, id, m.ref.Project, m.ref.Zone, func() (string, error) {
				return r.Compute.ReportHostAsFaulty(ctx, m.ref, "tpu-autoheal: "+dec.Reason, id)
			})
		}
	case vmpolicy.ActionRecreateInstances:
		mig := members[0].mig
		if mig == "" {
			mig = MIGOf(orSpec(members[0].in, members[0].spec), members[0].ref.Project)
		}
		project, zone := zoneOfKey(mig)
		id := recreateInstancesID(key, incident)
		call("recreateInstances", mig, id, project, zone, func() (string, error) {
			return r.Compute.RecreateInstances(ctx, mig, dec.Targets, id)
		})
	}
	return steps, pending, unknown, errors.Join(errs...)
}

// zoneOfKey is the project and zone of a slice key.
func zoneOfKey(key string) (project, zone string) {
	seg := strings.Split(key, "/")
	if len(seg) >= 4 && seg[0] == "projects" && seg[2] == "zones" {
		return seg[1], seg[3]
	}
	return "", ""
}

// record writes the record of a decision about a slice.
func (r *Recovery) record(ctx context.Context, start time.Time, ev *events.Event, key string, members []member, action remediate.Action, reason string, err error) remediate.Record {
	rec := r.build(start, ev, key, members, action, reason, err)
	r.write(ctx, &rec)
	return rec
}

// write stamps the record's elapsed time and writes it.
func (r *Recovery) write(ctx context.Context, rec *remediate.Record) {
	rec.Elapsed = r.now().Sub(rec.Time)
	if r.Recorder != nil {
		_ = r.Recorder.Record(ctx, *rec)
	}
}

// build makes the record of a decision about a slice.
func (r *Recovery) build(start time.Time, ev *events.Event, key string, members []member, action remediate.Action, reason string, err error) remediate.Record {
	_, zone := zoneOfKey(key)
	rec := remediate.Record{Time: start, Node: key, Zone: zone, Action: action, Reason: reason, DryRun: r.Config.DryRun}
	if ev != nil {
		rec.InsertID, rec.EventTime, rec.Method, rec.Cause = ev.InsertID, ev.Time, ev.Method, ev.Cause
	}
	for _, m := range members {
		if in := orSpec(m.in, m.spec); in != nil {
			mt := in.MachineType[strings.LastIndexByte(in.MachineType, '/')+1:]
			rec.AcceleratorType = mt
			rec.Chips += tpumachine.ChipsPerVM(mt)
		}
	}
	if err != nil {
		rec.Err = err.Error()
	}
	return rec
}
