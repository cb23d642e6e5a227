package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
)

// The summary counts a level across tiers: after a lifecycle transition
// level 0 holds 2 warm and 2 hot objects, merge factor 4, so the
// observer's debt says compaction is due while no (tier, level) group
// reaches the merge factor and the executor plans nothing. The executor
// records that head as idle; reconciliation then enqueues no compaction
// for it, pass after pass (a sweep interval apart, when it would otherwise
// rebuild the task under a fresh identity), and the compaction class is
// not signalled due (its oldest-due alarm would fire for a healthy
// collection). With guard debt_agreement off nothing is recorded and every
// pass runs one more task that plans nothing.
func TestCompactionDueAcrossTiersIsNotReenqueuedForever(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	for _, tc := range []struct {
		name   string
		g      guard.Set
		wasted bool
	}{
		{"guarded", guard.All(), false},
		{"debt_agreement_off", without(t, "debt_agreement"), true},
	} {
		t.Run(tc.name, func(t *testing.T) { compactionAcrossTiers(t, tc.g, tc.wasted) })
	}
}

func compactionAcrossTiers(t *testing.T, g guard.Set, wasted bool) {
	clock := newCxClock()
	env := cxStart(t, localenv.Options{Now: clock.Now, Policy: cxPolicy(4)})
	cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
	ctx := context.Background()
	toWarm := contract.Lifecycle{TransitionAfterMs: (24 * time.Hour).Milliseconds(), TransitionToTier: contract.TierWarm}
	if err := env.Workload.Create(ctx, "c1", toWarm); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 2)
	cxSettle(t, env)
	clock.Advance(25 * time.Hour)
	cxAppend(t, env, "c1", 1) // the first two are due to move to warm: a transition
	cxSettle(t, env)
	cxAppend(t, env, "c1", 1) // 2 warm + 2 hot: compaction due by the summary
	cxSettle(t, env)
	_, objs := headObjects(t, env, "c1")
	if got := tiers(objs); len(objs) != 4 || got[contract.TierWarm] != 2 || got[contract.TierHot] != 2 {
		t.Fatalf("after the transition: %d objects %v, want 2 warm + 2 hot", len(objs), got)
	}
	for _, o := range objs {
		if o.Level != 0 {
			t.Fatalf("%s is at level %d, want every object at level 0", o.Key, o.Level)
		}
	}
	head, _ := headObjects(t, env, "c1")
	env.Metrics.Reset()
	const passes = 6
	for range passes {
		clock.Advance(61 * time.Minute) // a sweep interval: a due rewrite is rebuilt
		if _, err := env.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		cxSettle(t, env)
	}
	runs := len(durationsDim(env, "TaskWaitMs", "Kind", string(contract.KindCompaction)))
	due := metricDim(env, "DueWork", "Kind", string(contract.KindCompaction))
	t.Logf("%d reconciliation passes: %d compaction tasks run, compaction signalled due %v times", passes, runs, due)
	if wasted {
		if runs < passes || due < passes {
			t.Fatalf("mutation: want a wasted task and a due signal at every pass, got %d tasks and %v signals in %d passes", runs, due, passes)
		}
		return
	}
	if runs > 0 || due > 0 {
		t.Fatalf("%d passes over a head with nothing to compact: %d compaction tasks run, due signalled %v times; want none", passes, runs, due)
	}
	if h, _ := headObjects(t, env, "c1"); h.Version != head.Version {
		t.Fatalf("head moved from v%d to v%d: nothing was due", head.Version, h.Version)
	}
	st, err := awsio.NewObservedTable(env.Clients.Dynamo, env.Prov.Def.Table.Name).Get(ctx, "c1", head.Inc())
	if err != nil {
		t.Fatal(err)
	}
	if idle := st.CompactionIdleVersion == head.Version && st.CompactionIdleChecksum == head.ManifestChecksum &&
		st.CompactionIdlePolicy == env.Config.Policy.Compaction.Fingerprint(); idle == wasted || (!wasted && st.Debt.CompactionDueSinceUnixMs != 0) {
		t.Fatalf("observed state: idle at v%d %s (head v%d), due since %d: want the head recorded idle and the due clock stopped (guarded only)",
			st.CompactionIdleVersion, st.CompactionIdleChecksum, head.Version, st.Debt.CompactionDueSinceUnixMs)
	}
	cxVerify(t, env, "c1")

	// Two more appends: 4 hot objects reach the merge factor in their
	// tier, and the new head is judged afresh: compaction runs.
	cxAppend(t, env, "c1", 2)
	cxSettle(t, env)
	if n := cxMetric(env, "CompactionsRun"); n < 1 {
		t.Fatalf("4 hot level-0 objects at a new head: %v compactions run, want 1", n)
	}
	cxVerify(t, env, "c1")
}
