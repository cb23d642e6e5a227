package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/policy"
)

// budgetPlan is how a seed's world paces GC deletes (issue 23): the
// delete rates, the S3 per-prefix write rate (down to the legal minimum,
// policy.MinS3WritesPerSecPerPrefix) with the fleet's token buckets in the
// coordinator's table (the shipped awsio.TokenBucket and PrefixBudget over
// the simulated DynamoDB), and slow grants: a take that answers only after
// up to twice ProofMaxAge of simulated time (a throttled or slow DynamoDB).
// Every wait, and every slow grant, advances the simulated clock and lets
// the world move on (duringBackoff: a restore of an older head), so a proof
// taken before a wait is stale by the call. Derived from the seed alone:
// the schedule's random stream is the same as without it.
type budgetPlan struct {
	name                 string
	perCollection, fleet float64 // gc.deletes_per_sec, gc.global_deletes_per_sec (0: unpaced, no fleet bucket)
	prefixWrites         float64 // budgets.s3_writes_per_sec_per_prefix (0: not paced)
	slowGrants           bool
}

var budgetPlans = []budgetPlan{
	{name: "unpaced"},
	{name: "default", perCollection: 3000, fleet: 3500, prefixWrites: 0.8 * 3500},
	{name: "prefix-minimum", perCollection: 3000, fleet: 3500, prefixWrites: policy.MinS3WritesPerSecPerPrefix},
	{name: "minimum", perCollection: 1, fleet: 2, prefixWrites: policy.MinS3WritesPerSecPerPrefix},
	{name: "slow-grants", perCollection: 20, fleet: 40, prefixWrites: policy.MinS3WritesPerSecPerPrefix, slowGrants: true},
	{name: "minimum-slow", perCollection: 1, fleet: 2, prefixWrites: policy.MinS3WritesPerSecPerPrefix, slowGrants: true},
}

// budgetsOf is a seed's budget plan.
func budgetsOf(seed uint64) budgetPlan { return budgetPlans[seed/5%uint64(len(budgetPlans))] }

// apply sets the plan's rates in the simulated policy.
func (b budgetPlan) apply(p *policy.Policy) {
	if b.fleet > 0 {
		p.GC.DeletesPerSec, p.GC.GlobalDeletesPerSec = b.perCollection, b.fleet
	}
	p.Budgets.S3WritesPerSecPerPrefix = b.prefixWrites
}

// gcPacer is the GC function's delete pacer under the plan, on the
// invocation's clock; sleep advances the simulated clock.
func (w *World) gcPacer(r fnRun, group string, sleep gc.Sleeper) *gc.Pacer {
	b := w.budgets
	if b.fleet == 0 {
		return gc.NewPacer(0, 0, w.pol.GC.BatchSize, r.now, sleep)
	}
	w.holders++
	holder := fmt.Sprintf("sim-gc-%d", w.holders)
	fleet := awsio.NewTokenBucket(w.ddb, w.def.Table.Name, "gc-deletes", b.fleet, max(b.fleet, float64(w.pol.GC.BatchSize)), holder)
	p := gc.NewPacer(b.perCollection, b.fleet, w.pol.GC.BatchSize, r.now, sleep).WithFleet(slowFleet{w: w, group: group, b: fleet})
	if b.prefixWrites > 0 {
		pb := awsio.NewPrefixBudget(w.ddb, w.def.Table.Name, holder, 0, b.prefixWrites, r.now, sleep)
		p.WithPrefix(slowPrefix{w: w, group: group, b: pb})
	}
	return p
}

// slowGrant is the time one grant of the fleet's buckets takes under the
// plan: one grant in four is slow, up to one and a half times the proof
// bound (a proof taken before it is stale half the time), during which
// the world moves on.
func (w *World) slowGrant(group string) {
	if !w.budgets.slowGrants || w.rng.IntN(4) != 0 {
		return
	}
	d := time.Duration(w.rng.Int64N(int64(3*w.pol.GC.ProofMaxAge.D()/2) + 1))
	w.t += d.Milliseconds()
	w.count("slow-grant")
	w.duringBackoff(group)
}

type slowFleet struct {
	w     *World
	group string
	b     *awsio.TokenBucket
}

func (s slowFleet) TakeTokens(ctx context.Context, n float64, now time.Time) (time.Duration, error) {
	s.w.slowGrant(s.group)
	return s.b.TakeTokens(ctx, n, now)
}

type slowPrefix struct {
	w     *World
	group string
	b     *awsio.PrefixBudget
}

func (s slowPrefix) Take(ctx context.Context, write bool, key string, n int) error {
	s.w.slowGrant(s.group)
	return s.b.Take(ctx, write, key, n)
}
