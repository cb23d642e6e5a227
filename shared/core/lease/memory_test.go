package lease

import (
	"context"
	"fmt"
	"sync"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Memory is an in-memory Store with the DynamoDB adapter's conditions, for
// this package's unit tests only: the simulation and the end-to-end tests
// run the real adapter (awsio.LeaseTable) over in-memory or embedded
// DynamoDB, so this copy is never what proves the adapter.
type Memory struct {
	mu    sync.Mutex
	items map[string]State
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{items: map[string]State{}} }

// Get returns the stored state of taskID.
func (m *Memory) Get(taskID string) (State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.items[taskID]
	return s, ok
}

// Wipe forgets every lease (coordinator state is disposable).
func (m *Memory) Wipe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.items)
}

// Acquire implements Store.
func (m *Memory) Acquire(_ context.Context, l contract.Lease, nowMs int64, conditional bool) (contract.Lease, State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.items[l.TaskID]
	if conditional && ok && (cur.Done || cur.Lease.LeaseExpiryUnixMs > nowMs) {
		return contract.Lease{}, cur, fmt.Errorf("acquire lease %s: %w", l.TaskID, store.ErrConditionFailed)
	}
	l.LeaseEpoch = cur.Lease.LeaseEpoch + 1
	m.items[l.TaskID] = State{Lease: l, Done: cur.Done}
	return l, cur, nil
}

// Extend implements Store.
func (m *Memory) Extend(_ context.Context, taskID, holder string, epoch uint64, nowMs, expiryMs int64, conditional bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.items[taskID]
	if conditional && (!ok || cur.Done || cur.Lease.LeaseEpoch != epoch || cur.Lease.Holder != holder) {
		return fmt.Errorf("extend lease %s: %w", taskID, store.ErrConditionFailed)
	}
	cur.Lease.TaskID = taskID
	cur.Lease.LeaseExpiryUnixMs, cur.Lease.HeartbeatAtUnixMs = expiryMs, nowMs
	m.items[taskID] = cur
	return nil
}

// Complete implements Store.
func (m *Memory) Complete(_ context.Context, taskID, holder string, epoch uint64, _ int64, conditional bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.items[taskID]
	if conditional && (!ok || cur.Lease.LeaseEpoch != epoch || cur.Lease.Holder != holder) {
		return fmt.Errorf("complete lease %s: %w", taskID, store.ErrConditionFailed)
	}
	cur.Lease.TaskID = taskID
	cur.Done = true
	m.items[taskID] = cur
	return nil
}
