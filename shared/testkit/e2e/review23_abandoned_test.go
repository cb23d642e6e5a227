package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/guard"
)

var withoutAbandonedCommitted = mustWithout("abandoned_committed")

// Review 23 D5 (516be7b, was
// TestReview23_RegressionReclaimSkipsLifecycleRetention): regression reclaim skipped lifecycle retention (rule 15: sweep,
// retention reclaim, never-committed reclaim, regression reclaim and
// tombstone cleanup all ask the one function that evaluates the whole of
// rule 3, lifecycle retention included). A compaction output committed
// at v3 and abandoned by a restore to v2 is committed data: rule 3 holds
// it until its maximum timestamp + retention_ms. After the operator
// confirms the new lineage, GC reclaims it a token lifetime later as a
// "never-committed output" (kindOutput: rule 4's grace only), although
// the collection's lifecycle keeps its objects 30 days and the output's
// max_ts is minutes old. (The sweep that reclaims it counts it in
// OrphansDeleted.)
// Suggested fix: an output a protected/abandoned committed root names is
// put to the gate as kindObject with that root's entry (gate (c)), not as
// a never-committed output.
//
// With guard abandoned_committed off the output is deleted (the old path).
func TestAbandonedCommittedOutputWaitsForLifecycleRetention(t *testing.T) {
	bothWays(t, withoutAbandonedCommitted, func(t *testing.T, g guard.Set) []string {
		retention := 30 * 24 * time.Hour
		e, out, rep := abandonedOutputReclaim(t, g, contract.Lifecycle{RetentionMs: retention.Milliseconds()}, nil)
		if !e.exists(out.Key) {
			age := e.clk.Now().Sub(time.UnixMilli(out.MaxTsUnixMs))
			return []string{fmt.Sprintf("the abandoned committed output %s (max_ts %s ago) was deleted inside the collection's lifecycle retention of %s (orphans deleted %d, objects deleted %d)",
				out.Key, age.Round(time.Minute), retention, rep.OrphansDeleted, rep.ObjectsDeleted)}
		}
		if rep.DeferredByReason[gc.ReasonLifecycle] != 1 {
			t.Fatalf("the abandoned committed output should be held by lifecycle retention: %v", rep.DeferredByReason)
		}
		return nil
	})
}

// Review 23 D5b (8fa6336, was TestReview23_RegressionReclaimIgnoresWatermark):
// regression reclaim ignored the query plane's watermark (rule
// 3 (b): evict_commit_ts < global_safe_ts - retention_window, for every
// path, rule 15). The abandoned committed output left the lineage at the
// restore; the query plane's global_safe_ts stays before the restore (a
// reader still holds a snapshot from before it). A token lifetime after
// the confirmation GC reclaims the output anyway, as a never-committed
// output: the watermark is never asked.
// Suggested fix: as above — judge it as kindObject evicted at the restore
// (the first sighting of the regression), so gates (b) and (c) apply.
//
// With guard abandoned_committed off the output is deleted (the old path).
func TestAbandonedCommittedOutputWaitsForTheWatermark(t *testing.T) {
	bothWays(t, withoutAbandonedCommitted, func(t *testing.T, g guard.Set) []string {
		return abandonedOutputWatermark(t, g)
	})
}

func abandonedOutputWatermark(t *testing.T, g guard.Set) []string {
	var restoredAt time.Time
	e, out, rep := abandonedOutputReclaim(t, g, contract.Lifecycle{}, func(e *gcEnv, restored bool) {
		if restored && restoredAt.IsZero() {
			restoredAt = e.clk.Now()
		}
		if !restoredAt.IsZero() {
			e.watermark(restoredAt.Add(-time.Minute)) // the watermark stays before the restore
			return
		}
		e.watermark(e.clk.Now())
	})
	if !e.exists(out.Key) {
		return []string{fmt.Sprintf("the abandoned committed output %s, evicted at the restore, was deleted while global_safe_ts stays before the restore (%s) (orphans deleted %d)",
			out.Key, restoredAt.Add(-time.Minute).UTC().Format(time.RFC3339), rep.OrphansDeleted)}
	}
	if rep.DeferredByReason[gc.ReasonRetentionWindow] != 1 {
		t.Fatalf("the abandoned committed output should be held by the retention window: %v", rep.DeferredByReason)
	}
	return nil
}

// abandonedOutputReclaim commits a compaction output at v3, restores the
// head to v2 (v3 and v4 abandoned above it), confirms the new lineage and
// sweeps a token lifetime later; wm publishes the watermark at each step
// (nil: the clock's now).
func abandonedOutputReclaim(t *testing.T, g guard.Set, lc contract.Lifecycle, wm func(e *gcEnv, restored bool)) (*gcEnv, contract.ObjectEntry, gc.Report) {
	t.Helper()
	e := startGC(t, nil)
	if wm == nil {
		wm = func(e *gcEnv, _ bool) { e.watermark(e.clk.Now()) }
	}
	e.create("c1", lc)
	in := e.add("c1", 2, 0, 0) // v2, max_ts now
	comp, out := e.lateCutover("c1", in)
	if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("compaction cutover: %+v %v", res, err) // v3 holds the output
	}
	e.add("c1", 1, 0, 0) // v4
	if _, err := e.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	wm(e, true)
	e.clk.Advance(48 * time.Hour) // every grace has passed since the output was written
	wm(e, true)
	sweep := func() gc.Report {
		ex, _ := e.executor(g, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	sweep() // refused: head regression
	ex, _ := e.executor(g, nil)
	plan, _ := ex.Plan(e.ctx, "c1")
	conf, ok := gc.ConfirmationFor(plan, "test", "restored v2", e.clk.Now())
	if !ok {
		t.Fatalf("no confirmation for the plan: %+v", plan)
	}
	if err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).ConfirmLineage(e.ctx, conf); err != nil {
		t.Fatal(err)
	}
	sweep()
	e.clk.Advance(20 * time.Minute)
	wm(e, true)
	return e, out, sweep()
}

// The positive control of the two above: once rule 3 holds for it (no
// lifecycle retention, the watermark past its eviction at the
// confirmation's sighting plus the retention window), the abandoned
// committed output is reclaimed, as a committed object (rule 17: nothing
// owed is left for ever).
func TestAbandonedCommittedOutputIsReclaimedOnceRuleThreeHolds(t *testing.T) {
	e, out, rep := abandonedOutputReclaim(t, guardsOn, contract.Lifecycle{}, nil)
	if e.exists(out.Key) || rep.ObjectsDeleted != 1 || rep.OrphansDeleted != 0 {
		t.Fatalf("the abandoned committed output %s should be reclaimed as a committed object once every gate passed: %+v", out.Key, rep)
	}
}
