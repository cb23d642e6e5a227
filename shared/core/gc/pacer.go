package gc

import (
	"context"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Sleeper waits for d or until ctx ends.
type Sleeper func(ctx context.Context, d time.Duration) error

// SleepContext is the real Sleeper.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Pacer is a token bucket per collection plus one global bucket (the budget
// of every collection one worker deletes for). A delete call of n keys takes
// n tokens from both. Clock and sleeper are injected so tests never sleep.
// A rate <= 0 means unlimited.
type Pacer struct {
	mu      sync.Mutex
	now     func() time.Time
	sleep   Sleeper
	perRate float64
	global  bucket
	per     map[string]*bucket
	burst   float64
	fleet   FleetBudget
	prefix  PrefixTaker
	Waited  time.Duration // total time spent waiting (for reports)
	// FleetWaits counts the waits the fleet budget imposed (budget
	// saturation across instances).
	FleetWaits int
}

// FleetBudget is a delete budget shared by every GC instance of the
// deployment (a token bucket in the coordinator's table): TakeTokens takes
// n tokens at now, or takes none and says how long until n may be there.
type FleetBudget interface {
	TakeTokens(ctx context.Context, n float64, now time.Time) (wait time.Duration, err error)
}

// WithFleet makes the pacer also take every delete call's tokens from
// fleet, after its own buckets granted them: the global rate then holds
// across instances, not per instance.
func (p *Pacer) WithFleet(fleet FleetBudget) *Pacer {
	p.fleet = fleet
	return p
}

// PrefixTaker is the S3 per-prefix request budget shared by the fleet
// (budgets.s3_writes_per_sec_per_prefix): Take waits until n writes may go
// to key's prefix and takes them.
type PrefixTaker interface {
	Take(ctx context.Context, write bool, key string, n int) error
}

// WithPrefix makes the pacer also take every delete batch's writes from
// the collection prefix's S3 budget, after the delete budgets granted
// them. The delete gate waits for all of it before it proves the batch:
// nothing waits between a proof and its call (SYSTEM rule 14).
func (p *Pacer) WithPrefix(prefix PrefixTaker) *Pacer {
	p.prefix = prefix
	return p
}

type bucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

// NewPacer paces deletes at perCollection keys/s per collection and global
// keys/s overall, with bursts of up to burst keys (at least one batch).
func NewPacer(perCollection, global float64, burst int, now func() time.Time, sleep Sleeper) *Pacer {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = SleepContext
	}
	b := float64(max(burst, 1))
	return &Pacer{now: now, sleep: sleep, perRate: perCollection, burst: b, per: map[string]*bucket{},
		global: bucket{rate: global, tokens: b, last: now()}}
}

func (b *bucket) refill(now time.Time, burst float64) {
	if b.rate <= 0 {
		return
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(burst, b.tokens+el*b.rate)
	}
	b.last = now
}

// need returns how long until n tokens are available (0: now).
func (b *bucket) need(n float64) time.Duration {
	if b.rate <= 0 || b.tokens >= n {
		return 0
	}
	return time.Duration((n - b.tokens) / b.rate * float64(time.Second))
}

// Wait blocks until n keys of collection may be deleted and takes them.
func (p *Pacer) Wait(ctx context.Context, collection string, n int) error {
	if p == nil {
		return nil
	}
	want := min(float64(n), p.burst)
	for {
		p.mu.Lock()
		now := p.now()
		cb, ok := p.per[collection]
		if !ok {
			cb = &bucket{rate: p.perRate, tokens: p.burst, last: now}
			p.per[collection] = cb
		}
		cb.refill(now, p.burst)
		p.global.refill(now, p.burst)
		wait := max(cb.need(want), p.global.need(want))
		if wait <= 0 && p.fleet != nil {
			// The local buckets admit the call; the fleet's decides. Asked
			// under the lock: one instance asks for one call at a time.
			fw, err := p.fleet.TakeTokens(ctx, want, now)
			if err != nil {
				p.mu.Unlock()
				return err
			}
			if fw > 0 {
				p.FleetWaits++
			}
			wait = fw
		}
		if wait <= 0 {
			if cb.rate > 0 {
				cb.tokens -= want
			}
			if p.global.rate > 0 {
				p.global.tokens -= want
			}
			p.mu.Unlock()
			return p.takePrefix(ctx, collection, n)
		}
		p.Waited += wait
		p.mu.Unlock()
		if err := p.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// takePrefix takes n writes of the collection's S3 prefix budget (its
// own waits, outside the pacer's lock).
func (p *Pacer) takePrefix(ctx context.Context, collection string, n int) error {
	if p.prefix == nil {
		return nil
	}
	start := p.now()
	err := p.prefix.Take(ctx, true, contract.CollectionPrefix(collection), n)
	if d := p.now().Sub(start); d > 0 {
		p.mu.Lock()
		p.Waited += d
		p.mu.Unlock()
	}
	return err
}

// fleetWaitCount is FleetWaits (0 for no pacer).
// waited is the total time the pacer has made its callers wait.
func (p *Pacer) waited() time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Waited
}

func (p *Pacer) fleetWaitCount() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.FleetWaits
}
