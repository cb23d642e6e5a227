package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// GC liveness under gc.max_sweep_candidates: a backlog several times one
// sweep's bound, each compaction's root removing more objects than the
// bound (4 > 3). Every sweep deletes at most the bound, so the backlog
// takes several sweeps; candidates an earlier sweep already deleted must
// not use up a later sweep's bound, or every later sweep stops at the
// same already-gone candidates, deletes nothing, and the roots behind
// them are never trimmed (the backlog is stuck for good). The whole
// backlog is reclaimed, and every root but the head trimmed, within a
// few reconcile passes (each pass: one sweep plus its continuations).
//
// With every continuation lost (its enqueue failed, or the task went to
// the DLQ), reconciliation continues: a sweep that stopped at its bound
// records the rest as GC debt due now, so each pass sweeps one more slice
// (not one slice per gc.sweep_interval).
func TestGCBacklogLargerThanTheBoundIsReclaimedOverSeveralSweeps(t *testing.T) {
	t.Run("continued", func(t *testing.T) { testBoundedBacklog(t, false) })
	t.Run("continuations lost", func(t *testing.T) { testBoundedBacklog(t, true) })
}

func testBoundedBacklog(t *testing.T, loseContinuations bool) {
	clock := newCxClock()
	p := cxPolicy(4)
	p.GC.TokenLifetime, p.GC.RetentionWindow = policy.Duration(time.Minute), policy.Duration(time.Minute)
	p.GC.SweepInterval = policy.Duration(24 * time.Hour)
	p.GC.MaxSweepCandidates = 3 // less than one compaction's removals
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: p})
	ctx := context.Background()
	settle := func() {
		for drain(t, env, resources.QueueCompaction, resources.FnCompaction, 100)+drain(t, env, resources.QueueHandoff, resources.FnHandoff, 100) > 0 {
		}
	}
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	for range 5 { // 5 compactions of 4 appends (and one of level 1)
		cxAppend(t, env, "c1", 4)
		cxSettle(t, env)
		settle()
	}
	// The dereferenced objects, read before any root is trimmed (a trimmed
	// root no longer names what it removed).
	var backlog []string
	roots := cxLineage(t, env, "c1")
	for _, r := range roots {
		for _, o := range r.Change.Removed {
			backlog = append(backlog, o.Key)
		}
		if len(r.Change.Removed) > 0 && len(r.Change.Removed) <= p.GC.MaxSweepCandidates {
			t.Fatalf("v%d removed %d objects, want more than the bound %d", r.Version, len(r.Change.Removed), p.GC.MaxSweepCandidates)
		}
	}
	left := func() int {
		n := 0
		for _, k := range backlog {
			if _, err := env.Bucket.Get(ctx, k); err == nil {
				n++
			}
		}
		return n
	}
	drain(t, env, resources.QueueGC, resources.FnGC, 100) // inside the token lifetime: nothing eligible yet
	if n := left(); n < 4*p.GC.MaxSweepCandidates {
		t.Fatalf("backlog %d objects, want at least 4 sweeps' worth (%d)", n, 4*p.GC.MaxSweepCandidates)
	}
	t.Logf("backlog: %d objects removed by %d roots, bound %d", left(), len(roots)-1, p.GC.MaxSweepCandidates)

	clock.Advance(10 * time.Minute) // past token lifetime and retention window
	if err := env.Watermark.Publish(ctx, clock.Now(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	tasks, passes, maxPasses := 0, 0, 8
	if loseContinuations {
		maxPasses = 4 * len(backlog) / p.GC.MaxSweepCandidates
	}
	for ; passes < maxPasses && (left() > 0 || len(cxLineage(t, env, "c1")) > 1); passes++ {
		clock.Advance(time.Minute)
		if _, err := env.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if !loseContinuations {
			tasks += drain(t, env, resources.QueueGC, resources.FnGC, 200)
			continue
		}
		if _, ok, err := env.Stack.DeliverBatch(ctx, env.Prov.QueueURLs[resources.QueueGC], resources.FnGC, 1); err != nil || !ok {
			t.Fatalf("pass %d: no gc sweep scheduled (%v) with %d objects left", passes+1, err, left())
		}
		cxSettle(t, env)
		tasks++
		cxReceive(t, env, resources.QueueGC) // the continuation is lost
	}
	t.Logf("%d reconcile passes, %d gc tasks, %v continuations", passes, tasks, metricDim(env, "SweepsContinued", "Kind", string(contract.KindGC)))
	if n := left(); n != 0 {
		t.Errorf("%d of %d dereferenced objects left after %d reconcile passes and %d gc tasks", n, len(backlog), passes, tasks)
	}
	if r := cxLineage(t, env, "c1"); len(r) != 1 {
		t.Errorf("%d roots left in the lineage, want only the head (v%d)", len(r), r[0].Version)
	}
	if tasks < 4 {
		t.Errorf("%d gc tasks reclaimed a backlog of %d with a bound of %d", tasks, len(backlog), p.GC.MaxSweepCandidates)
	}
	cxVerify(t, env, "c1")
}
