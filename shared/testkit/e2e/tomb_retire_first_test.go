package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
)

// Guard retire_first (review2526 D3; issue 25 "no spoofed owner answer can
// wipe"; rules 1, 3, 15): a dropped lifetime's cleanup asks the publisher
// to retire the head before it deletes anything, and the publisher asks
// CCS itself (guard retire_tombstoned): a tombstone answer spoofed on GC's
// own path to CCS, at the first sighting and again a retention window
// later, gets a refusal and deletes nothing. Guard off (the head retired
// last, after the deletes): the cleanup deletes every data object of the
// live collection before the publisher refuses.
func TestRetireFirstSpoofedTombstoneWipesNothing(t *testing.T) {
	guardVariants(t, "retire_first", func(t *testing.T, g guard.Set) string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		live := e.add("c1", 3, 0, 0)
		e.clk.Advance(48 * time.Hour)
		real, err := e.CCS.Facts(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		forged := real
		forged.Tombstoned, forged.TombstonedAtUnixMs, forged.ReservationHorizonUnixMs = true, e.clk.Now().UnixMilli(), e.clk.Now().UnixMilli()
		forged.FactsVersion = real.FactsVersion + 1
		ex, _ := e.executorWithPorts(g, func(p *gc.Ports) {
			p.Facts = spoofedFacts{FactsSource: p.Facts, c: "c1", forged: forged}
		}, nil)
		run := func() (gc.TombstoneReport, error) {
			e.watermark(e.clk.Now())
			head, _ := e.Lineage.Head(e.ctx, "c1")
			task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, forged.FactsVersion, e.clk.Now().UnixMilli())
			return ex.RunTombstone(e.ctx, task)
		}
		_, _ = run() // the first sighting
		e.clk.Advance(time.Hour)
		var rep gc.TombstoneReport
		var runErr error
		for range 5 {
			if rep, runErr = run(); runErr != nil || rep.Outcome == gc.TombCompleted || rep.Outcome == gc.TombDone {
				break
			}
		}
		var gone []string
		for _, o := range live {
			if !e.exists(o.Key) {
				gone = append(gone, o.Key)
			}
		}
		if !e.exists(contract.HeadKey("c1")) {
			gone = append(gone, contract.HeadKey("c1"))
		}
		if len(gone) > 0 {
			return fmt.Sprintf("a tombstone spoofed on GC's path alone deleted %d keys of live c1 (first %s; outcome %s, %v)", len(gone), gone[0], rep.Outcome, runErr)
		}
		return ""
	})
}

// With the head retired first, the one window a late commit of the
// dropped incarnation has left is between the cleanup's head read and the
// retirement: the publisher's conditional delete on the head's ETag then
// fails (conflict, same lifetime), nothing is deleted, and the next run
// judges its gates on the late commit (a token may open it for a token
// lifetime from then): it defers. Later everything of the lifetime goes,
// the late commit's objects included, and the head the cleanup recorded
// is the late one.
func TestLateCommitBeforeRetirementKeepsWhatItReferences(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	objs := e.add("c1", 4, 0, 0)
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	ex, _ := e.executor(guardsOn, nil)
	var late []contract.ObjectEntry
	ex.SetBeforeHeadRetire(func() {
		ex.SetBeforeHeadRetire(nil)
		late = e.add("c1", 1, 0, 0) // a late commit of the dropped incarnation
	})
	rep, err := ex.RunTombstone(e.ctx, task)
	if err != nil || rep.Outcome != gc.TombProgressed || rep.Deleted != 0 {
		t.Fatalf("the run whose retirement met the late commit should end having deleted nothing: %+v %v", rep, err)
	}
	if rep, err = ex.RunTombstone(e.ctx, task); err != nil || rep.Outcome != gc.TombDeferred {
		t.Fatalf("the next run, a moment after the late commit: %+v %v", rep, err)
	}
	for _, o := range append(objs, late...) {
		if !e.exists(o.Key) {
			t.Fatalf("%s deleted within a token lifetime of the late commit that references it", o.Key)
		}
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	if rep = e.runTombstone(ex, task, 10); rep.Outcome != gc.TombCompleted {
		t.Fatalf("cleanup after the late commit's horizons: %+v", rep)
	}
	if ls, err := e.Bucket.List(e.ctx, contract.CollectionPrefix("c1")); err != nil || len(ls) > 0 {
		t.Fatalf("%d keys of the dropped lifetime left: %v %v", len(ls), ls, err)
	}
	if now, _ := e.Lineage.Head(e.ctx, "c1"); now.Version != 0 {
		t.Fatalf("head still there: %+v", now)
	}
	if rep.Progress.HeadVersion != head.Version+1 {
		t.Fatalf("the cleanup recorded head v%d, want the late v%d", rep.Progress.HeadVersion, head.Version+1)
	}
}
