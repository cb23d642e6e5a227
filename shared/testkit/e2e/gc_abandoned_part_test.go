package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/guard"
)

// An abandoned root (a confirmed head regression) whose part is gone: in
// the simulation (make sim SEEDS=10000: seeds 6487, 6611, 7899, 8111) the
// restored lineage's trim deleted its base's part, which the abandoned
// cutover root shared, once no lineage root needed it any more. From then
// on every never-committed output of a later rewrite task (a rejected
// lifecycle transition) in that part's key range was "maybe named by the
// abandoned root" and held as committed with an unknown maximum
// timestamp: under a lifecycle retention, deferred for ever (converged:
// "GC debt remains: deferred=map[lifecycle_retention:2]", due never).
//
// A root of version V names an output of the coordinator's only if the
// task's base is below V: a rewrite commits above its base (the publisher
// applies only outputs of a task of the request's base, on that base or on
// a newer head whose parent chain reaches it: events/PUBLISHER.md). So an
// output of a task based at or above V cannot be in that root, readable
// part or not, and is reclaimed as never-committed after its grace. An
// output of a task based below V is still held (fail closed: the gone
// part may name it).
func TestGCAbandonedRootWithAPartGoneHoldsOnlyWhatItCanName(t *testing.T) {
	// The reclaim compares a root's commit time with the output's S3
	// LastModified, and this test moves its clock past the roots' commits.
	embeddedOnly(t, s3ClockMoves)
	e := startGC(t, nil)
	retention := 30 * time.Minute
	e.create("c1", contract.Lifecycle{RetentionMs: retention.Milliseconds()})
	in := e.add("c1", 2, 0, 0) // v2
	comp, _ := e.lateCutover("c1", in)
	if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("compaction cutover: %+v %v", res, err) // v3
	}
	e.add("c1", 1, 0, 0) // v4
	e.reconcile()
	if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(48 * time.Hour)
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	plan, _ := ex.Plan(e.ctx, "c1")
	conf, ok := gc.ConfirmationFor(plan, "test", "restored v2", e.clk.Now())
	if !ok || len(conf.AbandonedRoots) != 2 {
		t.Fatalf("the plan must show the two abandoned roots: %+v", plan)
	}
	if err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).ConfirmLineage(e.ctx, conf); err != nil {
		t.Fatal(err)
	}
	// The new lineage passes the abandoned versions; two lifecycle
	// transitions write outputs that are never committed: one based on
	// the new v5 (at or above every abandoned root: none can name it), one
	// based on v3 (below the abandoned v4: its gone part may name it).
	e.add("c1", 1, 0, 0) // new v3
	h3, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	e.add("c1", 1, 0, 0) // new v4
	e.add("c1", 1, 0, 0) // new v5
	h5, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	sweep := func() gc.Report {
		ex, _ := e.executor(guard.All(), nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil || rep.Refused != "" {
			t.Fatalf("sweep: %+v %v", rep, err)
		}
		return rep
	}
	sweep() // the coordinator sees the confirmation
	// A token lifetime after that the abandoned roots protect nothing any
	// more; then the abandoned v4's parts are gone (as the trim of a part
	// it shared with the lineage leaves it).
	e.clk.Advance(30 * time.Minute)
	e.watermark(e.clk.Now())
	var v4 contract.Manifest
	for _, k := range conf.AbandonedRoots {
		m, err := e.Lineage.RootAt(e.ctx, "c1", k)
		if err != nil {
			t.Fatal(err)
		}
		if m.Version == 4 {
			v4 = m
		}
	}
	if len(v4.Parts) == 0 {
		t.Fatalf("no abandoned v4 with parts among %v", conf.AbandonedRoots)
	}
	for _, p := range v4.Parts {
		if err := e.Bucket.Delete(e.ctx, p.Key); err != nil {
			t.Fatal(err)
		}
	}
	output := func(h contract.Head) string {
		task := contract.NewTask(contract.KindLifecycleTransition, "c1", h.Version, h.ManifestChecksum, 1, e.clk.Now().UnixMilli())
		key := contract.RewriteOutputKey("c1", 0, task.TaskID, 0)
		if _, err := e.Bucket.Put(e.ctx, key, []byte("never committed "+key)); err != nil {
			t.Fatal(err)
		}
		for _, p := range v4.Parts {
			if p.FirstKey <= key && key <= p.LastKey {
				return key
			}
		}
		t.Fatalf("%s is outside every part of the abandoned v4: the test would not ask it", key)
		return ""
	}
	above, below := output(h5), output(h3)
	if sweep(); !e.exists(above) || !e.exists(below) {
		t.Fatalf("young never-committed outputs must stay (above %v, below %v)", e.exists(above), e.exists(below))
	}
	// Every grace and the lifecycle retention have passed.
	e.clk.Advance(retention + time.Hour)
	e.watermark(e.clk.Now())
	sweep()
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	rep := sweep()
	if e.exists(above) {
		t.Errorf("the never-committed output %s of a task based above every abandoned root is never reclaimed: %+v", above, rep.DeferredByReason)
	}
	if !e.exists(below) {
		t.Errorf("the output %s of a task based below the abandoned v4, whose part that may name it is gone, was deleted (fail closed: held)", below)
	}
}
