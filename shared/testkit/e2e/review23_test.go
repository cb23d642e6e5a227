package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
)

// Review 23 D7 (residual): a completion's claimed start between its
// output's write and the handoff stretches the cutover's not_after past
// the never-committed reclaim grace (rules 4, 16; issue 23 "one gate":
// the gate's rule 4 horizon must outlast every cutover that can name the
// output). GC reclaims an output at its S3 write time + cutover deadline +
// 2 x skew (34 min here). The handoff clamps only a start claimed after
// its own clock; a start claimed at the handoff's now, 14 minutes after
// the output was written (a worker whose clock is 14 min ahead, a corrupt
// or forged message — still inside the task lifetime, so not expired),
// gets not_after = write + 44 min. GC reclaims the output at write + 35
// min, then the publisher applies the cutover (before its not_after): the
// committed head references a deleted object.
// Suggested fix: count not_after from min(claimed start, the earliest S3
// LastModified of the outputs the coverage adds) (the handoff can HEAD
// them), or have the publisher refuse a cutover whose added objects are
// missing at its CAS.
func TestReview23_ClaimedStartAfterOutputWriteOutlivesOrphanGrace(t *testing.T) {
	e := startGC(t, nil) // max task lifetime 15m, cutover deadline 30m, skew 2m
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0)
	comp, out := e.lateCutover("c1", in) // output written now
	e.clk.Advance(14 * time.Minute)
	comp.StartedAtUnixMs = e.clk.Now().UnixMilli() // claimed start: the handoff's now, after the write
	comp.FinishedAtUnixMs = comp.StartedAtUnixMs
	var notAfter int64
	e.Publisher.SetQueue(func(ctx context.Context, req contract.CutoverRequest) {
		notAfter = req.NotAfterUnixMs
		e.clk.Advance(21 * time.Minute) // write + 35 min: past the output's reclaim grace (34 min)
		e.watermark(e.clk.Now())
		ex, _ := e.executor(guardsOn, nil)
		rep, err := ex.Run(ctx, contract.Task{TaskID: "sweep", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Error(err)
		}
		t.Logf("sweep: orphans deleted %d, young %d", rep.OrphansDeleted, rep.RemainingObjects)
	})
	res, err := e.handoff().Process(e.ctx, comp)
	if err != nil {
		t.Fatal(err)
	}
	written := e.clk.Now().Add(-35 * time.Minute)
	if res.Outcome == handoff.OutcomeAccepted && !e.exists(out.Key) {
		t.Fatalf("the cutover (not_after %s after its output was written, the orphan grace is 34m) was applied after GC reclaimed its output %s: the committed head references a deleted object (missing: %v)",
			time.Duration(notAfter-written.UnixMilli())*time.Millisecond, out.Key, e.missingRetained("c1"))
	}
}
