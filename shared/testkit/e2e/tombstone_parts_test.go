package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// A dropped lineage with more parts than one bounded run can delete
// reaches its roots: the manifests phase deletes every part before the
// first root, and a run stopped at its budget among the parts resumes
// after the parts it confirmed gone instead of deleting them all again
// (simulation seed 6747: at the minimum delete rate a run's time budget
// covered fewer parts than the lineage had, every run re-deleted the same
// parts, already gone, and no run reached a root: the release never
// came).
func TestTombstoneCleanupWithManyPartsReachesTheRoots(t *testing.T) {
	const calls, batch = 2, 2 // one run deletes at most 4 keys
	e := startGC(t, func(p *policy.Policy) { p.GC.TombstoneMaxCalls, p.GC.BatchSize = calls, batch })
	e.create("c1", contract.Lifecycle{})
	for range 8 {
		e.add("c1", 1, 0, 0) // every commit writes a new part: 9 roots, more parts than a run deletes
	}
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.Lineage.WalkFrom(e.ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for _, m := range w.Roots {
		for _, p := range m.Parts {
			parts[p.Key] = true
		}
		for _, p := range m.Change.Parts {
			parts[p.Key] = true
		}
	}
	if len(parts) <= calls*batch {
		t.Fatalf("the lineage has %d parts: not more than one run deletes (%d)", len(parts), calls*batch)
	}
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	ex, _ := e.executor(guard.All(), nil)
	var rep gc.TombstoneReport
	runs := 0
	for ; runs < 40; runs++ {
		if rep, err = ex.RunTombstone(e.ctx, task); err != nil {
			t.Fatal(err)
		}
		if rep.Outcome == gc.TombCompleted {
			break
		}
		if rep.Outcome != gc.TombProgressed {
			t.Fatalf("run %d: %+v", runs, rep)
		}
	}
	if rep.Outcome != gc.TombCompleted {
		t.Fatalf("after %d runs the cleanup has not completed (phase %s, %d parts and %d roots deleted, %d delete calls; the lineage has %d parts, %d roots)",
			runs, rep.Progress.Phase, rep.Progress.PartsDeleted, rep.Progress.RootsDeleted, rep.Progress.DeleteCalls, len(parts), len(w.Roots))
	}
	ls, err := e.Bucket.List(e.ctx, contract.CollectionPrefix("c1"))
	if err != nil || len(ls) > 0 {
		t.Fatalf("%d keys of the dropped incarnation remain: %v", len(ls), err)
	}
	t.Logf("%d runs, %d delete calls, %d parts and %d roots deleted (lineage: %d parts, %d roots)",
		runs+1, rep.Progress.DeleteCalls, rep.Progress.PartsDeleted, rep.Progress.RootsDeleted, len(parts), len(w.Roots))
}

// A bounded tombstone cleanup run that moved its cursor enqueues its
// continuation at once, as a bounded sweep does: a dropped collection with
// more to delete than one run's budget is not held back to one run per
// reconcile interval (simulation seeds 4456, 6706 and 6796: at the minimum
// delete rate a dropped lifetime with hundreds of abandoned roots deleted
// 33 keys per 20-minute reconciliation and was not released by the end).
// The run that completes enqueues nothing, and nor does a run that
// deleted nothing.
func TestBoundedTombstoneRunContinuesAtOnce(t *testing.T) {
	const calls, batch = 2, 2
	e := startGC(t, func(p *policy.Policy) { p.GC.TombstoneMaxCalls, p.GC.BatchSize = calls, batch })
	e.create("c1", contract.Lifecycle{})
	for range 8 {
		e.add("c1", 1, 0, 0)
	}
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	ex, _ := e.executor(guard.All(), nil)
	// Inside the token lifetime the dropped lineage is pinned: nothing
	// deleted, nothing continued.
	if _, err := ex.Run(e.ctx, task); err != nil {
		t.Fatal(err)
	}
	if msgs := continuations(t, e); len(msgs) != 0 {
		t.Fatalf("a run that deleted nothing enqueued %d continuations: %v", len(msgs), msgs)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	runs := 0
	for ; runs < 40; runs++ {
		rep, err := ex.Run(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		msgs := continuations(t, e)
		if rep.Complete {
			if len(msgs) != 0 {
				t.Fatalf("the completing run enqueued %d continuations: %v", len(msgs), msgs)
			}
			break
		}
		if len(msgs) != 1 {
			t.Fatalf("run %d stopped at its budget (deleted %d) and enqueued %d continuations, want one", runs, rep.ObjectsDeleted, len(msgs))
		}
		next := msgs[0]
		if next.Kind != contract.KindTombstoneCleanup || next.Collection != "c1" || next.Inc() != task.Inc() ||
			next.BaseManifestVersion != task.BaseManifestVersion || next.CCSFactsVersion != task.CCSFactsVersion || next.TaskID == task.TaskID {
			t.Fatalf("continuation %+v of %+v", next, task)
		}
		task = next
	}
	ls, err := e.Bucket.List(e.ctx, contract.CollectionPrefix("c1"))
	if err != nil || len(ls) > 0 {
		t.Fatalf("after %d runs %d keys of the dropped incarnation remain: %v", runs+1, len(ls), err)
	}
	t.Logf("completed in %d runs, each continued by the one before", runs+1)
}

// continuations receives the gc queue's messages and returns the
// continuation tasks among them (a sweep time: the cleanup's own tasks
// carry none).
func continuations(t *testing.T, e *gcEnv) []contract.Task {
	t.Helper()
	var out []contract.Task
	for _, m := range receiveAll(t, e, resources.QueueGC) {
		task, err := contract.DecodeTask("gc", []byte(m))
		if err != nil {
			t.Fatal(err)
		}
		if task.SweepUnixMs != 0 {
			out = append(out, task)
		}
	}
	return out
}

// A tombstone cleanup run whose whole budget went on waiting for the
// fleet's delete budget (here: another GC instance with a clock a minute
// ahead took every token, so this one's clock must catch up before the
// bucket refills) deletes nothing; it is continued once all the same, so
// one stalled invocation does not cost a reconcile interval (simulation
// seed 6796: runs on a lagging clock stalled this way every few runs and
// the dropped lifetime's thousand abandoned roots outlasted the run). A
// second stall in a row is not continued (no loop through the queue);
// reconciliation asks again.
func TestStalledTombstoneRunIsContinuedOnce(t *testing.T) {
	e := startGC(t, func(p *policy.Policy) {
		p.GC.TombstoneMaxCalls, p.GC.BatchSize = 2, 2
		p.GC.TombstoneRunBudget = policy.Duration(5 * time.Second)
		p.GC.DeletesPerSec, p.GC.GlobalDeletesPerSec = 1, 2
	})
	e.create("c1", contract.Lifecycle{})
	for range 8 {
		e.add("c1", 1, 0, 0)
	}
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	ports := app.GCPorts(e.Config, e.FunctionClients(resources.FnGC))
	pol := e.Config.Policy
	cfg := gc.ConfigFrom(pol, guard.All())
	sleep := func(ctx context.Context, d time.Duration) error {
		e.clk.Advance(d)
		return ctx.Err()
	}
	pacer := gc.NewPacer(pol.GC.DeletesPerSec, pol.GC.GlobalDeletesPerSec, cfg.BatchSize, e.clk.Now, sleep).WithFleet(ports.Budget)
	ex := gc.New(ports, cfg, pacer, e.clk.Now, sleep, metrics.New(resources.FnGC), e.Log)
	ahead := awsio.NewTokenBucket(e.Clients.Dynamo, e.Config.Table, app.GCDeleteBudget, pol.GC.GlobalDeletesPerSec, 2, "gc-ahead")
	drain := func() {
		t.Helper()
		if w, err := ahead.TakeTokens(e.ctx, 2, e.clk.Now().Add(time.Minute)); err != nil || w > 0 {
			t.Fatalf("the instance a minute ahead could not take the fleet's tokens: wait %v, %v", w, err)
		}
	}
	stalled := func(task contract.Task) []contract.Task {
		t.Helper()
		drain()
		rep, err := ex.Run(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ObjectsDeleted != 0 || rep.DeleteCalls != 0 || rep.Complete {
			t.Fatalf("a run behind the fleet bucket's clock deleted %d keys in %d calls (complete %v)", rep.ObjectsDeleted, rep.DeleteCalls, rep.Complete)
		}
		return continuations(t, e)
	}
	// A first run advances (and is continued); the continuation stalls.
	if _, err := ex.Run(e.ctx, task); err != nil {
		t.Fatal(err)
	}
	first := continuations(t, e)
	if len(first) != 1 {
		t.Fatalf("the first run enqueued %d continuations, want one", len(first))
	}
	next := stalled(first[0])
	if len(next) != 1 {
		t.Fatalf("the first stalled run enqueued %d continuations, want one", len(next))
	}
	if again := stalled(next[0]); len(again) != 0 {
		t.Fatalf("the second stalled run in a row enqueued %d continuations, want none", len(again))
	}
	// Reconciliation asks again; from now on the runs advance.
	task = contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	runs := 0
	for ; runs < 40; runs++ {
		rep, err := ex.Run(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Complete {
			break
		}
		msgs := continuations(t, e)
		if len(msgs) != 1 {
			t.Fatalf("run %d enqueued %d continuations, want one", runs, len(msgs))
		}
		task = msgs[0]
	}
	if ls, err := e.Bucket.List(e.ctx, contract.CollectionPrefix("c1")); err != nil || len(ls) > 0 {
		t.Fatalf("after %d runs %d keys of the dropped incarnation remain: %v", runs+1, len(ls), err)
	}
}
