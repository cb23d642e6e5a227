package awsio

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/metrics"
)

// prefixTakeWindow: one take from a prefix's shared bucket asks for this
// much of the rate (at least what the call needs), kept in hand for the
// calls that follow, so that a run of small reads costs one DynamoDB
// round trip per window instead of one per request. Tokens in hand are
// spent or wasted, never returned: the fleet stays under the rate.
const prefixTakeWindow = 50 * time.Millisecond

// maxPrefixBuckets bounds the prefixes one instance remembers.
const maxPrefixBuckets = 4096

// RequestPrefix is the prefix whose S3 request rate a key counts
// against: collections/<c>/ for a collection's keys (every key the
// product writes for a collection shares it, and S3 partitions a bucket
// by such prefixes as their load grows; nothing finer is stable, a
// rewrite's outputs land under a new task id), "" (the whole bucket) for
// any other key. A bucket S3 has not split yet is one partition: the
// bucket-wide GC delete budget (gc.global_deletes_per_sec) covers that.
func RequestPrefix(key string) string {
	rest, ok := strings.CutPrefix(key, contract.CollectionsPrefix)
	if !ok {
		return ""
	}
	c, _, found := strings.Cut(rest, "/")
	if !found || c == "" {
		return ""
	}
	return contract.CollectionPrefix(c)
}

// PrefixBudget paces one function's bulk S3 requests per prefix across
// the fleet: one TokenBucket per prefix and direction in the
// coordinator's table (pk "BUDGET#s3-read#<prefix>" or
// "BUDGET#s3-write#<prefix>"), shared by every instance, refilled at
// the configured rate with one second of burst.
type PrefixBudget struct {
	api           DynamoAPI
	table, holder string
	reads, writes float64
	now           func() time.Time
	sleep         func(context.Context, time.Duration) error
	m             *metrics.Recorder

	mu      sync.Mutex
	buckets map[string]*TokenBucket
	inHand  map[string]float64
}

// NewPrefixBudget paces reads and writes (requests per second per
// prefix; 0: not paced) on the clock now, waiting with sleep.
func NewPrefixBudget(api DynamoAPI, table, holder string, reads, writes float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *PrefixBudget {
	return &PrefixBudget{api: api, table: table, holder: holder, reads: reads, writes: writes, now: now, sleep: sleep,
		buckets: map[string]*TokenBucket{}, inHand: map[string]float64{}}
}

// WithMetrics records the waits (S3BudgetWaitMs) and saturations
// (S3BudgetSaturated, dimension Op) in m.
func (p *PrefixBudget) WithMetrics(m *metrics.Recorder) *PrefixBudget {
	p.m = m
	return p
}

// Take waits until n requests of the direction (write: PUT, POST, DELETE,
// one per key of a DeleteObjects call; else GET, HEAD) may go to key's
// prefix.
func (p *PrefixBudget) Take(ctx context.Context, write bool, key string, n int) error {
	if p == nil || n <= 0 {
		return nil
	}
	rate, op := p.reads, "read"
	if write {
		rate, op = p.writes, "write"
	}
	if rate <= 0 {
		return nil
	}
	name := "s3-" + op + "#" + RequestPrefix(key)
	for {
		p.mu.Lock()
		if p.inHand[name] >= float64(n) {
			p.inHand[name] -= float64(n)
			p.mu.Unlock()
			return nil
		}
		b := p.buckets[name]
		if b == nil && len(p.buckets) >= maxPrefixBuckets {
			// A warm instance that has touched many collections forgets
			// them (tokens in hand are wasted, never over-spent).
			clear(p.buckets)
			clear(p.inHand)
		}
		if b == nil {
			b = NewTokenBucket(p.api, p.table, name, rate, rate, p.holder)
			p.buckets[name] = b
		}
		need := float64(n) - p.inHand[name]
		p.mu.Unlock()
		ask := min(max(need, rate*prefixTakeWindow.Seconds()), rate)
		wait, err := b.TakeTokens(ctx, ask, p.now())
		if err != nil {
			return err
		}
		if wait == 0 {
			p.mu.Lock()
			p.inHand[name] += ask
			p.mu.Unlock()
			continue
		}
		if p.m != nil {
			p.m.AddDim("S3BudgetSaturated", "Op", op, 1)
			p.m.Duration("S3BudgetWaitMs", wait)
		}
		if err := p.sleep(ctx, wait); err != nil {
			return err
		}
	}
}
