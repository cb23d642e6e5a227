package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// The recorded GC due time is the earliest due of the debt it covers. A
// sweep that found the coordinator's young never-committed output records
// its reclaim grace (over half an hour ahead) as the collection's GC due
// time; a cutover then adds debt due in two minutes (token lifetime +
// retention window). The observer's advance used if_not_exists and kept
// the later time, so the cutover's debt waited for the grace. Reconciliation
// right after the cutover's due time must sweep it.
func TestGCDueIsTheEarliestOfTheRecordedDebt(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	clock := newCxClock()
	p := cxPolicy(4)
	p.GC.TokenLifetime, p.GC.RetentionWindow = policy.Duration(time.Minute), policy.Duration(time.Minute)
	p.GC.SweepInterval = policy.Duration(24 * time.Hour)
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: p})
	ctx := context.Background()
	state := awsio.NewObservedTable(env.Clients.Dynamo, env.Prov.Def.Table.Name)
	settle := func() {
		for drain(t, env, resources.QueueCompaction, resources.FnCompaction, 100)+drain(t, env, resources.QueueHandoff, resources.FnHandoff, 100) > 0 {
		}
	}
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	head := cxAppend(t, env, "c1", 1)
	cxSettle(t, env)
	settle()

	// A crashed rewrite's output, never committed: the coordinator's own,
	// young. A sweep keeps it and records when it may go.
	crashed, _ := cxTask(t, env, "c1")
	orphan := contract.RewriteOutputKey("c1", 1, crashed.TaskID, 0)
	if _, err := env.Bucket.Put(ctx, orphan, []byte("never committed")); err != nil {
		t.Fatal(err)
	}
	_, sweep := headTask(t, env, "c1", contract.NewSweepTask, contract.KindGC)
	if failed, _ := cxInvoke(t, env, resources.FnGC, sweep); len(failed) > 0 {
		t.Fatalf("sweep failed: %v", failed)
	}
	st, err := state.Get(ctx, "c1", head.Inc())
	if err != nil {
		t.Fatal(err)
	}
	graceDue := st.Debt.GCDueAtUnixMs
	if graceDue < clock.Now().Add(30*time.Minute).UnixMilli() || st.Debt.GCObjects != 1 {
		t.Fatalf("after the sweep: %+v, want the young output recorded, due over 30 min ahead", st.Debt)
	}

	// A compaction's cutover dereferences 4 objects, due in 2 minutes.
	cxAppend(t, env, "c1", 3) // 4 level-0 objects: compaction due
	cxSettle(t, env)
	settle()
	roots := cxLineage(t, env, "c1")
	cut := roots[0]
	if cut.Origin.Kind != contract.OriginCutover || len(cut.Change.Removed) != 4 {
		t.Fatalf("head v%d (%s) removed %d objects, want a cutover removing 4", cut.Version, cut.Origin.Kind, len(cut.Change.Removed))
	}
	debtDue := cut.CommitTsUnixMs + (2 * time.Minute).Milliseconds()
	st, err = state.Get(ctx, "c1", head.Inc())
	if err != nil {
		t.Fatal(err)
	}
	if st.Debt.GCObjects != 5 || st.Debt.GCDueAtUnixMs != debtDue {
		t.Fatalf("after the cutover: gc debt %d due at %d, want 5 due at the cutover's %d (not the earlier-recorded, later %d)",
			st.Debt.GCObjects, st.Debt.GCDueAtUnixMs, debtDue, graceDue)
	}
	if n := len(cxReceive(t, env, resources.QueueGC)); n != 0 {
		t.Logf("%d gc tasks were waiting (discarded: reconciliation must schedule the sweep)", n)
	}

	clock.Advance(3 * time.Minute) // past the cutover debt's due time, long before the grace's
	if err := env.Watermark.Publish(ctx, clock.Now(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := drain(t, env, resources.QueueGC, resources.FnGC, 10); n == 0 {
		t.Fatalf("reconciliation at +3 min scheduled no gc sweep (debt due at %d, now %d)", debtDue, clock.Now().UnixMilli())
	}
	for _, o := range cut.Change.Removed {
		if _, err := env.Bucket.Get(ctx, o.Key); err == nil {
			t.Errorf("%s still exists 3 min after its cutover (due 2 min after)", o.Key)
		}
	}
	if _, err := env.Bucket.Get(ctx, orphan); err != nil {
		t.Errorf("the young never-committed output is gone inside its grace: %v", err)
	}
	cxVerify(t, env, "c1")
}
