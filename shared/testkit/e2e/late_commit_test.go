package e2e

// A commit of a dropped incarnation that lands while its cleanup (or a
// sweep of it) runs. What a delete batch rests on is derived from the head
// its proof read: a head of the dropped lifetime other than the one the
// run started from ends the run, and cleaning starts again from the new
// head with its commit's horizons (guard dropped_head_pinned; rules 3, 14,
// 16). Each test also runs with the guard off and shows the loss there.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
)

// headPinnedVariants runs lost (which says what the scenario deleted that
// it must keep, "" for nothing) guarded and with dropped_head_pinned off.
func headPinnedVariants(t *testing.T, lost func(t *testing.T, g guard.Set) string) {
	for _, g := range []guard.Set{guardsOn, mustWithout("dropped_head_pinned")} {
		t.Run(map[bool]string{true: "guarded", false: "dropped_head_pinned off"}[g.DroppedHeadPinned], func(t *testing.T) {
			what := lost(t, g)
			switch {
			case g.DroppedHeadPinned && what != "":
				t.Fatal(what)
			case !g.DroppedHeadPinned && what == "":
				t.Fatal("with dropped_head_pinned off nothing was lost: the test proves nothing")
			case !g.DroppedHeadPinned:
				t.Logf("dropped_head_pinned off: %s", what)
			}
		})
	}
}

// A commit of the dropped incarnation lands during a tombstone cleanup
// run, after the run judged its gates (tokens, watermark) and while its
// first batch waits for the prefix budget: it is the current head when
// that batch is proven, a token may open it for a token lifetime from its
// commit, so every object it references is pinned (rule 3 (a)). The proof
// re-reads the head after the wait (rule 14), sees the new version and
// ends the run; the next run judges its gates on the new commit and
// defers. Guard off: the 60 objects the new head references, then its
// root and parts, are deleted and its head retired.
//
// The run deletes while the head stands only with guard retire_first off
// (with it the publisher retires the head before the first delete, and no
// commit can land on a retired head: TestLateCommitBeforeRetirement...
// covers the window that is left); the pin is the second line, proven here.
func TestLateCommitDuringTombstoneRunKeepsWhatItReferences(t *testing.T) {
	headPinnedVariants(t, func(t *testing.T, g guard.Set) string {
		g.RetireFirst = false
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		objs := e.add("c1", 60, 0, 0) // more than one second of the prefix budget below: the batch waits
		facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
		if err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Hour) // past the token lifetime and the retention window since the drop
		e.watermark(e.clk.Now())
		head, _ := e.Lineage.Head(e.ctx, "c1")
		task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
		var late contract.Head
		committed := false
		sleep := func(ctx context.Context, d time.Duration) error {
			e.clk.Advance(d)
			if !committed && d > 0 {
				committed = true
				e.add("c1", 1, 0, 0) // a late commit of the dropped incarnation (v+1 keeps every object)
				late, _ = e.Lineage.Head(e.ctx, "c1")
			}
			return ctx.Err()
		}
		pb := awsio.NewPrefixBudget(e.Clients.Dynamo, e.Config.Table, "latecommit", 0, 50, e.clk.Now, sleep)
		ex, _ := e.executorWithPorts(g, func(p *gc.Ports) { p.PrefixBudget = pb }, nil)
		rep, err := ex.RunTombstone(e.ctx, task)
		if !committed {
			t.Fatalf("the run never waited for its budget: %+v %v", rep, err)
		}
		if late.Version != head.Version+1 {
			t.Fatalf("late commit: head %+v", late)
		}
		if g.DroppedHeadPinned {
			if err != nil || rep.Outcome != gc.TombProgressed || rep.Progress.Phase != gc.PhaseObjects {
				t.Fatalf("the run that met the late commit should end, its cursor back at the objects phase: %+v %v", rep, err)
			}
			// The next run judges its gates on the late commit: it defers.
			if rep, err = ex.RunTombstone(e.ctx, task); err != nil || rep.Outcome != gc.TombDeferred {
				t.Fatalf("the next run, a moment after the late commit: %+v %v", rep, err)
			}
		}
		var gone []string
		for _, o := range objs {
			if !e.exists(o.Key) {
				gone = append(gone, o.Key)
			}
		}
		if !e.exists(late.ManifestKey) {
			gone = append(gone, late.ManifestKey+" (the new head's root)")
		}
		if len(gone) > 0 {
			return fmt.Sprintf("%d keys referenced by head v%d, committed %s before the cleanup's batch was proven, were deleted (outcome %s, phase %s): first %s",
				len(gone), late.Version, e.clk.Now().Sub(time.UnixMilli(late.CommittedAtUnixMs)), rep.Outcome, rep.Phase, gone[0])
		}
		return ""
	})
}

// The same late commit, met by a sweep (a gc task) of the dropped
// collection: the sweep's candidates include what the head references,
// evicted when the tombstone was. A commit of the dropped incarnation
// lands during the first batch's budget wait and removes ten of the head's
// objects: the old head is superseded now, so a token opened on it until
// now may read them for a token lifetime (rule 3 (a)). The proof re-reads
// the head and refuses the rest of the sweep (a new plan is needed).
// Guard off: the fence treats the new root as retained, asks only whether
// it references a key, and the ten it removed are deleted at once.
func TestLateCommitDuringSweepOfDroppedCollectionKeepsWhatItEvicted(t *testing.T) {
	headPinnedVariants(t, func(t *testing.T, g guard.Set) string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		objs := e.add("c1", 60, 0, 0)
		facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
		if err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		head, _ := e.Lineage.Head(e.ctx, "c1")
		task := contract.NewTask(contract.KindGC, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
		committed := false
		sleep := func(ctx context.Context, d time.Duration) error {
			e.clk.Advance(d)
			if !committed && d > 0 {
				committed = true
				e.commit("c1", objs[:10], nil) // a late commit of the dropped incarnation
			}
			return ctx.Err()
		}
		pb := awsio.NewPrefixBudget(e.Clients.Dynamo, e.Config.Table, "latecommit", 0, 50, e.clk.Now, sleep)
		ex, _ := e.executorWithPorts(g, func(p *gc.Ports) { p.PrefixBudget = pb }, nil)
		rep, err := ex.Run(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if !committed {
			t.Fatalf("the sweep never waited for its budget: %+v", rep)
		}
		if g.DroppedHeadPinned && rep.Refused != gc.RefusedLineage {
			t.Fatalf("the sweep that met the late commit should be refused (%s): %+v", gc.RefusedLineage, rep)
		}
		for i, o := range objs {
			if !e.exists(o.Key) {
				what := "referenced by the new head"
				if i < 10 {
					what = "removed by the late commit a moment ago (the old head, which references it, was the head until then)"
				}
				return fmt.Sprintf("%s, %s, deleted (objects deleted %d, refused %q)", o.Key, what, rep.ObjectsDeleted, rep.Refused)
			}
		}
		return ""
	})
}

// Issue 23 item 1 (a drop does not waive lifecycle retention) across a
// resumed cleanup. A dropped collection with a six-hour lifecycle
// retention: its objects are past it and go; a compaction output written
// just before the drop is too young to reclaim, so the run waits in the
// outputs phase. The output's cutover is then applied (a late commit of
// the dropped incarnation): it is now a committed object whose data is
// minutes old. The next run reads the new head, which is not the one its
// cursor was cleaned from, and cleans again from the objects phase, where
// the output is judged as a committed object by its maximum timestamp:
// held by lifecycle retention, and the release with it. Guard off: the
// outputs phase judges every owned key of the lifetime as never-committed
// (ownership and age only) and deletes the committed output inside its
// retention, and the release dependency confirms retention.
func TestResumedTombstoneCleanupKeepsALateCommittedOutputInItsRetention(t *testing.T) {
	headPinnedVariants(t, func(t *testing.T, g guard.Set) string {
		g.RetireFirst = false // with it the head is retired in the first run: the late cutover cannot apply at all
		e := startGC(t, nil)
		retention := 6 * time.Hour
		e.create("c1", contract.Lifecycle{RetentionMs: retention.Milliseconds()})
		old := e.clk.Now().Add(-7 * time.Hour).UnixMilli()
		in := e.add("c1", 2, old, old)    // past their lifecycle retention
		_, out := e.lateCutover("c1", in) // a rewrite output written now, its cutover not yet applied
		facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
		if err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(20 * time.Minute) // past the token lifetime (+ skew) since the drop; the output is 20 min old
		e.watermark(e.clk.Now())
		head, _ := e.Lineage.Head(e.ctx, "c1")
		task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
		ex, _ := e.executor(g, nil)
		rep, err := ex.RunTombstone(e.ctx, task)
		if err != nil || rep.Phase != gc.PhaseOutputs || rep.Outcome != gc.TombWaiting || !e.exists(out.Key) {
			t.Fatalf("setup: the first run should wait in the outputs phase for the young output: %+v %v", rep, err)
		}
		// The cutover is applied late: the output is committed, its data
		// as recent as now.
		out.MinTsUnixMs, out.MaxTsUnixMs = e.clk.Now().UnixMilli(), e.clk.Now().UnixMilli()
		late := e.commit("c1", nil, []contract.ObjectEntry{out})
		e.clk.Advance(40 * time.Minute) // past the token lifetime since the late commit, inside the output's six-hour retention
		e.watermark(e.clk.Now())
		rep, err = ex.RunTombstone(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if !e.exists(out.Key) {
			return fmt.Sprintf("%s, committed by v%d with data %s old, deleted inside its lifecycle retention of %s by the resumed cleanup (outcome %s, phase %s; lifecycle_retention %+v)",
				out.Key, late.Version, e.clk.Now().Sub(time.UnixMilli(out.MaxTsUnixMs)), retention, rep.Outcome, rep.Phase, dependency(rep.Deps, contract.DepLifecycleRetention))
		}
		if rep.Outcome != gc.TombWaiting || rep.Progress.Holding == nil || rep.Progress.Holding.Reason != gc.ReasonLifecycle {
			return fmt.Sprintf("the resumed cleanup should wait for the committed output's lifecycle retention: %+v", rep)
		}
		return ""
	})
}
