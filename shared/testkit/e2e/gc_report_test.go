package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
)

// Issue 10 item 6: a corrupt manifest part is reported (ManifestPartCorrupt,
// GCRefused manifest — alarmed — and the plan/status) although no candidate
// of the sweep falls in its key range, and nothing is deleted.
func TestGCReportsCorruptPartNoCandidateNeeds(t *testing.T) {
	e := startGCWith(t, nil, localenv.Options{Publisher: publisher.Options{MaxPartObjects: 2}})
	e.create("c1", contract.Lifecycle{})
	objs := e.add("c1", 4, 0, 0) // several parts of at most 2 objects
	e.commit("c1", objs[:1], nil)
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	_, root, err := e.Lineage.HeadRoot(e.ctx, "c1")
	if err != nil || len(root.Parts) < 2 {
		t.Fatalf("want several parts: %d %v", len(root.Parts), err)
	}
	far := root.Parts[len(root.Parts)-1] // no candidate in its range
	if far.FirstKey <= objs[0].Key {
		t.Fatalf("the candidate %s falls in the last part's range", objs[0].Key)
	}
	if _, err := e.Bucket.Put(e.ctx, far.Key, []byte(`{"schema_version":1,"collection":"c1","objects":[]}`)); err != nil {
		t.Fatal(err)
	}
	ex, m := e.executor(guard.All(), nil)
	plan, err := ex.Plan(e.ctx, "c1")
	if len(plan.CorruptParts) != 1 || plan.CorruptParts[0].Key != far.Key {
		t.Fatalf("the corrupt part must be reported by the plan: %+v %v", plan.CorruptParts, err)
	}
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	counts := m.Counts()
	if rep.Refused != gc.RefusedManifest || counts["ManifestPartCorrupt"] != 1 || counts["GCRefused|Reason=manifest"] != 1 {
		t.Fatalf("want ManifestPartCorrupt and a manifest refusal: %+v %v", rep, counts)
	}
	if !e.exists(objs[0].Key) {
		t.Fatal("nothing may be deleted while the lineage has a corrupt part")
	}
}

// Issue 10 item 7: once GC converged, a plan shows what is really
// outstanding: the deleted candidates of the retained roots are not
// "deletable now" again (they are counted as already gone).
func TestGCPlanShowsOnlyWhatIsOutstanding(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	objs := e.add("c1", 3, 0, 0)
	e.commit("c1", objs, nil) // the head's own change removes them: its root stays
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	if rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"}); err != nil || rep.ObjectsDeleted != 3 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	plan, err := ex.Plan(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Delete) != 0 || plan.AlreadyGone != 3 {
		t.Fatalf("after GC converged nothing is deletable now (3 already gone): delete=%d already_gone=%d", len(plan.Delete), plan.AlreadyGone)
	}
}
