package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
)

// The stand-in writer names an append's segment for the version it would
// create; an attempt that loses the head CAS (here to a cutover) is retried
// on the new head under the next name. The lost attempt's segment is the
// writer's own never-committed upload: GC never deletes it (another
// writer's key), so the writer removes it once its append committed, and a
// dropped incarnation's cleanup then leaves nothing behind.
// TestDropReleaseRecreate found data/l0/...08-0.seg left after the
// cleanup (about 1 run in 80): v8 went to a cutover.
func TestWorkloadRemovesLostAttemptSegment(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0)
	head, _ := e.Lineage.Head(e.ctx, "c1")
	lost := contract.AppendSegmentKey("c1", 1, head.Version+1, 0)
	n := 0
	e.Publisher.SetBeforeCAS(func() {
		if n++; n == 1 {
			e.commit("c1", nil, nil) // another commit takes the version first (a cutover)
		}
	})
	got, err := e.Workload.Append(e.ctx, "c1", e.Workload.Random())
	e.Publisher.SetBeforeCAS(nil)
	if err != nil || got.Version != head.Version+2 {
		t.Fatalf("append: %+v %v (want v%d)", got, err, head.Version+2)
	}
	if e.exists(lost) {
		t.Fatalf("the lost attempt's segment %s is left behind", lost)
	}
	// Drop and clean: nothing of the incarnation is left.
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ = e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	ex, _ := e.executor(guard.All(), nil)
	if rep := e.runTombstone(ex, task, 10); rep.Outcome != gc.TombCompleted {
		t.Fatalf("cleanup: %+v", rep)
	}
	if ls, err := e.Bucket.List(e.ctx, contract.CollectionPrefix("c1")); err != nil || len(ls) > 0 {
		t.Fatalf("%d keys left (inputs %v): %v %v", len(ls), in, ls, err)
	}
}
