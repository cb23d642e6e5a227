package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
)

// Review 23: a dropped lifetime's cleanup leaks the data objects only the
// roots above its head reference, and releases the name anyway (issue 23
// acceptance: "a dropped collection ... is cleaned up and released"; rule
// 8: the release waits for every cleanup dependency; rule 17: what is
// left in the bucket is durable truth). The head was restored to an older
// version (a rollback) before the drop: the newer committed roots are
// abandoned above the head. The cleanup's objects phase walks only the
// head's lineage (tomb_objects.go), the manifests phase then deletes the
// abandoned roots as "strays" (tomb_listed.go) — the only index of the
// objects they added — and the leftovers listing that confirms
// DepObjects counts manifest keys, outputs and artifacts but never data
// objects (TombstoneLeft; dependencies: objects confirmed by
// Left.Outputs alone), nor does the handoff's re-derivation. The release
// is recorded while the lifetime's committed segments are still in the
// bucket, and nothing will ever delete them: the re-created name's GC
// sees them as another writer's uploads (rule 11).
// Suggested fix: before deleting a stray root, put every object it names
// to the gate as a committed object of the dropped lifetime (its roots
// above the head are lineage too), and count the lifetime's data keys
// (contract.IsDataKey with the incarnation's segment keys) in
// TombstoneLeft so DepObjects is confirmed by the listing.
func TestReview23_DroppedAfterRestoreLeaksAbandonedSegments(t *testing.T) {
	e := startInc(t)
	const c = "c1"
	if err := e.Workload.Create(e.ctx, c, contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, e.Env, c, 2)
	cxSettle(t, e.Env)
	h, err := e.Lineage.Head(e.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Publisher.Restore(e.ctx, c, h.Version-1); err != nil { // the last append is abandoned above the head
		t.Fatal(err)
	}
	abandoned := e.dataKeys(c)
	if _, err := e.CCS.Drop(e.ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12 && len(e.intents()) == 0; i++ {
		e.clk.Advance(time.Hour)
		if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
			t.Fatal(err)
		}
		e.reconcile()
	}
	in := e.intents()
	if len(in) == 0 {
		t.Fatalf("no release after 12 h; cursor %+v", e.runs(c, 1))
	}
	if left := e.keysUnder(contract.CollectionPrefix(c)); len(left) > 0 {
		t.Fatalf("the name was released (%d intents, dependencies %v) while %d keys of the dropped lifetime remain, never to be deleted: %v (data keys before the drop: %v)",
			len(in), in[0].Dependencies, len(left), left, abandoned)
	}
}

// Review 23: a dropped lifetime's cleanup that finds no head deletes none
// of its data, and still reports every release dependency confirmed
// (rules 8, 17; issue 23: "a delete nobody can prove safe does not
// happen, and the reason it was held is visible" — here nothing is held,
// the data is simply forgotten). The head pointer of the dropped lifetime
// is gone before its cleanup ran (retired by its owner out of band, a
// restore tool, an operator). The objects phase's walk answers "no
// lineage" (tomb_objects.go walk: ErrNotFound -> ok false) and moves to
// the outputs phase; the manifests phase deletes every root and part it
// lists by incarnation tag as strays (the only index of the data); the
// leftovers listing counts no data object, so objects, manifests and
// artifacts are all "confirmed" and the completion goes out. Every data
// object the lineage committed stays in the bucket, and after the
// release nothing will ever delete it.
// Suggested fix: with no head, fail closed (hold, visibly) or walk the
// lineage from the newest root the listing finds of the incarnation
// before any stray is deleted; count the lifetime's data keys in
// TombstoneLeft.
func TestReview23_DroppedCleanupWithoutHeadLeaksData(t *testing.T) {
	e := startGC(t, nil)
	task := retireScene(t, e)
	h, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	data := tombKeysOf(t, e, contract.DataPrefix("c1"))
	if len(data) == 0 {
		t.Fatal("no data objects")
	}
	if ans, err := e.Publisher.Retire(e.ctx, contract.NewRetireRequest(h)); err != nil || ans.Status != contract.RetireAccepted {
		t.Fatalf("out-of-band retirement: %+v %v", ans, err)
	}
	ex, _ := e.executor(guardsOn, nil)
	var rep gc.TombstoneReport
	for i := 0; i < 6; i++ {
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		if rep, err = ex.RunTombstone(e.ctx, task); err != nil {
			t.Fatal(err)
		}
		if rep.Outcome == gc.TombCompleted || rep.Outcome == gc.TombDone {
			break
		}
	}
	left := tombKeysOf(t, e, contract.DataPrefix("c1"))
	if rep.Outcome == gc.TombCompleted && len(left) > 0 {
		t.Fatalf("the cleanup completed (every dependency confirmed: %+v) while %d of the lifetime's %d committed data objects remain: %v",
			rep.Deps, len(left), len(data), left)
	}
	t.Logf("outcome %s, left %v", rep.Outcome, left)
}

func tombKeysOf(t *testing.T, e *gcEnv, prefix string) []string {
	t.Helper()
	ls, err := e.Bucket.List(e.ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.Key)
	}
	return out
}
