package ledger

// DeferralWrites reports how many SetDeferral calls changed something.
func (m *Memory) DeferralWrites() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deferralWrites
}
