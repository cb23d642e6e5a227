package lease

import (
	"context"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Extender extends a held lease (the use case, or a port wrapping it).
type Extender interface {
	Extend(ctx context.Context, l contract.Lease, now time.Time, d time.Duration) (contract.Lease, error)
}

// Keeper heartbeats one held lease while its task works. Beat is cheap
// when no heartbeat is due (a clock read), so the work calls it wherever it
// makes progress — every block a merge reads, every output it finishes —
// and a long merge keeps its lease without a timer goroutine. The first
// failed extension sticks: every later Beat returns it, so the work stops.
type Keeper struct {
	ext   Extender
	now   func() time.Time
	every time.Duration
	d     time.Duration

	mu   sync.Mutex
	ls   contract.Lease
	last time.Time
	err  error
}

// NewKeeper keeps ls, granted for task at acquired, extending it by d
// whenever every has passed since the last extension. It refuses a lease
// that was not granted for task (ErrScope).
func NewKeeper(ext Extender, ls contract.Lease, task contract.Task, now func() time.Time, acquired time.Time, every, d time.Duration) (*Keeper, error) {
	if err := CheckScope(ls, task); err != nil {
		return nil, err
	}
	return &Keeper{ext: ext, now: now, every: every, d: d, ls: ls, last: acquired}, nil
}

// Beat extends the lease when a heartbeat is due.
func (k *Keeper) Beat(ctx context.Context) error { return k.beat(ctx, false) }

// Force extends the lease now (before reporting a result).
func (k *Keeper) Force(ctx context.Context) error { return k.beat(ctx, true) }

func (k *Keeper) beat(ctx context.Context, force bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	now := k.now()
	if !force && now.Sub(k.last) < k.every {
		return nil
	}
	nl, err := k.ext.Extend(ctx, k.ls, now, k.d)
	if err != nil {
		k.err = err
		return err
	}
	k.ls, k.last = nl, now
	return nil
}

// Lease is the lease as last extended.
func (k *Keeper) Lease() contract.Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ls
}

// Err is the extension failure that stopped the keeper, if any.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}
