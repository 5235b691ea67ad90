package vmswarm

import (
	"context"
	"errors"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// A crash between two saved steps: the process dies at a planned write of
// the store or the ledger (before it, or right after it). From then on the
// dying Recovery's every call fails, so it goes no further; the run then
// starts a new Recovery (empty caches, as a new instance of the function)
// over the same store and ledger, and redelivers what was being delivered.

var errCrashed = errors.New("vmswarm: the process crashed")

// crasher counts the writes and kills the process at the planned ones.
type crasher struct {
	mu      sync.Mutex
	plan    []Crash
	writes  int
	dead    bool
	crashes int
}

// alive is nil until the process crashed.
func (c *crasher) alive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errCrashed
	}
	return nil
}

// write makes write f, unless the process dies at it.
func (c *crasher) write(f func() error) error {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return errCrashed
	}
	c.writes++
	var hit *Crash
	for i := range c.plan {
		if c.plan[i].Nth == c.writes {
			hit = &c.plan[i]
		}
	}
	c.mu.Unlock()
	if hit == nil {
		return f()
	}
	if hit.After {
		_ = f()
	}
	c.mu.Lock()
	c.dead = true
	c.crashes++
	c.mu.Unlock()
	return errCrashed
}

// restart reports whether the process died, and brings it back.
func (c *crasher) restart() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	died := c.dead
	c.dead = false
	return died
}

// crashStore is the instance path's store, mortal.
type crashStore struct {
	s computevm.Store
	c *crasher
}

var _ computevm.Store = crashStore{}

func (s crashStore) SaveSpec(ctx context.Context, name string, spec computevm.SavedSpec) error {
	return s.c.write(func() error { return s.s.SaveSpec(ctx, name, spec) })
}

func (s crashStore) Specs(ctx context.Context, project, zone string) (map[string]computevm.SavedSpec, error) {
	if err := s.c.alive(); err != nil {
		return nil, err
	}
	return s.s.Specs(ctx, project, zone)
}

func (s crashStore) ForgetSpec(ctx context.Context, name string) error {
	return s.c.write(func() error { return s.s.ForgetSpec(ctx, name) })
}

func (s crashStore) AddEvidence(ctx context.Context, e vmpolicy.Evidence) error {
	return s.c.write(func() error { return s.s.AddEvidence(ctx, e) })
}

func (s crashStore) Evidence(ctx context.Context, instances []string) ([]vmpolicy.Evidence, error) {
	if err := s.c.alive(); err != nil {
		return nil, err
	}
	return s.s.Evidence(ctx, instances)
}

func (s crashStore) Slice(ctx context.Context, key string) (computevm.SliceState, error) {
	if err := s.c.alive(); err != nil {
		return computevm.SliceState{}, err
	}
	return s.s.Slice(ctx, key)
}

func (s crashStore) SetSlice(ctx context.Context, key string, st computevm.SliceState) error {
	return s.c.write(func() error { return s.s.SetSlice(ctx, key, st) })
}

// crashLedger is the ledger, mortal (its pauses are read through the
// embedded ledger).
type crashLedger struct {
	*ledger.Memory
	c *crasher
}

func (l crashLedger) History(ctx context.Context, node, project, eventID string, now time.Time, window time.Duration) (remediate.History, error) {
	if err := l.c.alive(); err != nil {
		return remediate.History{}, err
	}
	return l.Memory.History(ctx, node, project, eventID, now, window)
}

func (l crashLedger) Claim(ctx context.Context, req remediate.ClaimRequest) (rec remediate.Recovery, err error) {
	err = l.c.write(func() error {
		rec, err = l.Memory.Claim(ctx, req)
		return err
	})
	return rec, err
}

func (l crashLedger) Update(ctx context.Context, rec remediate.Recovery) error {
	return l.c.write(func() error { return l.Memory.Update(ctx, rec) })
}

// crashCompute is Compute Engine as the mortal process reaches it.
type crashCompute struct {
	i computevm.Instances
	c *crasher
}

var _ computevm.Instances = crashCompute{}

func (x crashCompute) GetInstance(ctx context.Context, r computevm.Ref) (*compute.Instance, error) {
	if err := x.c.alive(); err != nil {
		return nil, err
	}
	return x.i.GetInstance(ctx, r)
}

func (x crashCompute) ListOptedIn(ctx context.Context, project, zone string) ([]*compute.Instance, error) {
	if err := x.c.alive(); err != nil {
		return nil, err
	}
	return x.i.ListOptedIn(ctx, project, zone)
}

func (x crashCompute) Start(ctx context.Context, r computevm.Ref, requestID string) (string, error) {
	if err := x.c.alive(); err != nil {
		return "", err
	}
	return x.i.Start(ctx, r, requestID)
}

func (x crashCompute) Insert(ctx context.Context, r computevm.Ref, spec *compute.Instance, requestID string) (string, error) {
	if err := x.c.alive(); err != nil {
		return "", err
	}
	return x.i.Insert(ctx, r, spec, requestID)
}

func (x crashCompute) RecreateInstances(ctx context.Context, mig string, instances []string, requestID string) (string, error) {
	if err := x.c.alive(); err != nil {
		return "", err
	}
	return x.i.RecreateInstances(ctx, mig, instances, requestID)
}

func (x crashCompute) GetOperation(ctx context.Context, project, zone, name string) (bool, error) {
	if err := x.c.alive(); err != nil {
		return false, err
	}
	return x.i.GetOperation(ctx, project, zone, name)
}

func (x crashCompute) MIGIsSlice(ctx context.Context, mig string) (bool, error) {
	if err := x.c.alive(); err != nil {
		return false, err
	}
	return x.i.MIGIsSlice(ctx, mig)
}

func (x crashCompute) ManagedInstances(ctx context.Context, mig string) ([]computevm.ManagedInstance, error) {
	if err := x.c.alive(); err != nil {
		return nil, err
	}
	return x.i.ManagedInstances(ctx, mig)
}

func (x crashCompute) SetMetadataKey(ctx context.Context, r computevm.Ref, in *compute.Instance, key, value string) (string, error) {
	if err := x.c.alive(); err != nil {
		return "", err
	}
	return x.i.SetMetadataKey(ctx, r, in, key, value)
}

func (x crashCompute) ReportHostAsFaulty(ctx context.Context, r computevm.Ref, description, requestID string) (string, error) {
	if err := x.c.alive(); err != nil {
		return "", err
	}
	return x.i.ReportHostAsFaulty(ctx, r, description, requestID)
}

func (x crashCompute) GuestCheckpoint(ctx context.Context, r computevm.Ref) (remediate.CheckpointReport, bool, error) {
	if err := x.c.alive(); err != nil {
		return remediate.CheckpointReport{}, false, err
	}
	return x.i.GuestCheckpoint(ctx, r)
}

func (x crashCompute) PerformMaintenance(ctx context.Context, r computevm.Ref, requestID string) (string, error) {
	if err := x.c.alive(); err != nil {
		return "", err
	}
	return x.i.PerformMaintenance(ctx, r, requestID)
}
