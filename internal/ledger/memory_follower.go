package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// memoryFollower is Memory's follower lease, under its own lock.
type memoryFollower struct {
	mu     sync.Mutex
	holder string
	until  time.Time
	kickAt time.Time // a kick pending since then; zero = none
}

var _ remediate.FollowerLease = (*Memory)(nil)

// TakeFollower implements remediate.FollowerLease.
func (m *Memory) TakeFollower(ctx context.Context, holder string, now, until time.Time) (bool, error) {
	if holder == "" {
		return false, fmt.Errorf("take follower lease: empty holder")
	}
	f := &m.follower
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder != "" && f.holder != holder && f.until.After(now) {
		return false, nil
	}
	f.holder, f.until = holder, until
	return true, nil
}

// ReleaseFollower implements remediate.FollowerLease.
func (m *Memory) ReleaseFollower(ctx context.Context, holder string) error {
	f := &m.follower
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder == holder {
		f.holder, f.until = "", time.Time{}
	}
	return nil
}

// FollowerHeld implements remediate.FollowerLease.
func (m *Memory) FollowerHeld(ctx context.Context, now time.Time) (bool, error) {
	f := &m.follower
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holder != "" && f.until.After(now), nil
}

// ClaimKick implements remediate.FollowerLease.
func (m *Memory) ClaimKick(ctx context.Context, now time.Time, pending time.Duration) (bool, error) {
	f := &m.follower
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder != "" && f.until.After(now) {
		return false, nil
	}
	if !f.kickAt.IsZero() && now.Before(f.kickAt.Add(pending)) {
		return false, nil
	}
	f.kickAt = now
	return true, nil
}

// ClearKick implements remediate.FollowerLease.
func (m *Memory) ClearKick(ctx context.Context) error {
	f := &m.follower
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kickAt = time.Time{}
	return nil
}
