package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/guard"
)

// The embedded S3 stamps LastModified from the environment's clock, as S3
// does from a clock within the deployment's skew of the functions': a
// test clock moved on (TestDropReleaseRecreate waits out a two-day
// reservation horizon) must not make an output written after the move look
// as old as the move. It did: the wall-clock stamp was 49 hours behind, GC
// reclaimed a compaction's output as a never-committed orphan between its
// report and its cutover, the publisher rejected the cutover ("output ...
// not found"), the re-created incarnation got no cutover for five
// reconciliations (the retry under a fresh identity waits a sweep
// interval), and in another run the output went after the cutover was
// accepted (a committed object missing). About 1 run in 15.
func TestGCOutputWrittenAfterTheClockMovedIsYoung(t *testing.T) {
	// moto (or any upstream) stamps LastModified from its own wall clock,
	// as S3 does: a test clock moved 49 h on cannot agree with it. What
	// this proves is the embedded stack's time source.
	embeddedOnly(t, "the embedded S3's clock: an upstream keeps its own")
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0)
	e.clk.Advance(49 * time.Hour)
	e.watermark(e.clk.Now())
	comp, out := e.lateCutover("c1", in)
	ls, err := e.Bucket.List(e.ctx, out.Key)
	if err != nil || len(ls) != 1 {
		t.Fatalf("list %s: %v %v", out.Key, ls, err)
	}
	if d := e.clk.Now().Sub(ls[0].LastModified); d > time.Minute || d < -time.Minute {
		t.Fatalf("LastModified %s is %s from the environment's clock %s", ls[0].LastModified, d, e.clk.Now())
	}
	ex, _ := e.executor(guard.All(), nil)
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if !e.exists(out.Key) || rep.OrphansDeleted != 0 {
		t.Fatalf("an output written a moment ago was reclaimed before its cutover: %+v", rep)
	}
	if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("cutover: %+v %v", res, err)
	}
}
