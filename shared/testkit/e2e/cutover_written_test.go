package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Guard cutover_from_written (rules 4, 13, 16): a cutover's not_after
// counts from the earlier of the task's claimed start and the earliest
// LastModified S3 gave the outputs it adds. GC reclaims a never-committed
// output at its LastModified + cutover_deadline + 2 x skew (34 min here);
// a completion claiming a start 14 minutes after its output's write (a
// worker clock ahead, a corrupt or forged message: inside the task
// lifetime, and not after the handoff's clock) would otherwise get
// not_after = write + 44 min. The publisher queues the request and applies
// it at write + 35 min, after GC swept: guarded it answers expired (the
// not_after, write + 30 min, passed) and nothing is committed; with the
// guard off the committed head names the output GC reclaimed.
// (review 23 D1: TestReview23_ClaimedStartAfterOutputWriteOutlivesOrphanGrace.)
func TestCutoverCountsFromItsOutputsWrite(t *testing.T) {
	embeddedOnly(t, s3ClockMoves) // the output's LastModified on moto is its wall clock's, not the test's
	guardVariants(t, "cutover_from_written", func(t *testing.T, g guard.Set) string {
		e := startGC(t, nil) // max task lifetime 15m, cutover deadline 30m, skew 2m
		e.create("c1", contract.Lifecycle{})
		in := e.add("c1", 2, 0, 0)
		comp, out := e.lateCutover("c1", in)
		written := e.clk.Now()
		e.clk.Advance(14 * time.Minute)
		comp.StartedAtUnixMs = e.clk.Now().UnixMilli()
		comp.FinishedAtUnixMs = comp.StartedAtUnixMs
		var notAfter int64
		e.Publisher.SetQueue(func(ctx context.Context, req contract.CutoverRequest) {
			notAfter = req.NotAfterUnixMs
			e.clk.Advance(21 * time.Minute)
			e.watermark(e.clk.Now())
			ex, _ := e.executor(g, nil)
			if _, err := ex.Run(ctx, contract.Task{TaskID: "sweep", Kind: contract.KindGC, Collection: "c1"}); err != nil {
				t.Error(err)
			}
		})
		res, err := e.handoffWith(g).Process(e.ctx, comp)
		if err != nil {
			t.Fatal(err)
		}
		if limit := written.Add(e.Config.Policy.CutoverDeadline.D()).UnixMilli(); g.CutoverFromWritten && notAfter > limit {
			t.Errorf("not_after is %s after the output's write, more than the cutover deadline", time.Duration(notAfter-written.UnixMilli())*time.Millisecond)
		}
		if res.Outcome == "accepted" && !e.exists(out.Key) {
			return fmt.Sprintf("the cutover (not_after %s after its output's write) was applied after GC reclaimed %s: missing %v",
				time.Duration(notAfter-written.UnixMilli())*time.Millisecond, out.Key, e.missingRetained("c1"))
		}
		t.Logf("outcome %s (%s)", res.Outcome, res.Reason)
		return ""
	})
}

// A retry that keeps the crashed attempt's outputs (compact.Executor.ours:
// its own identical bytes, rule 13) reports as its start the earliest
// LastModified of those outputs, and the handoff dates them itself: the
// cutover's not_after is the first attempt's write + cutover_deadline,
// which passes before GC's never-committed reclaim of them. The attempt
// writes at W1 and crashes before reporting; the retry runs 10 minutes
// later; the publisher queues the request and applies it at W1 + 35 min,
// after GC reclaimed the outputs as never-committed. Guarded: the
// completion reports W1, the publisher answers expired, nothing is
// committed. With the guard off (the executor reports its own start S2,
// the handoff counts not_after from it: S2 + 30 min = W1 + 40 min) the
// committed head names the reclaimed output.
// (review 25/26 D8: TestReview2526_RetriedRewriteOutlivesGCsOrphanHorizon.)
func TestRetryKeepingCrashedOutputsCountsFromTheirWrite(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	guardVariants(t, "cutover_from_written", func(t *testing.T, g guard.Set) string {
		clock := newCxClock()
		env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now})
		ctx := context.Background()
		cxSetup(t, env, "c1", 4)
		task, body := cxTask(t, env, "c1")
		written := clock.Now()
		cxRegisterCompaction(env, app.CompactionOptions{Guards: &g, Reporter: &countingReporter{fail: errors.New("process crashed before reporting")}})
		if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) != 1 {
			t.Fatal("the crashed attempt should fail its message")
		}
		out0 := contract.RewriteOutputKey("c1", 1, task.TaskID, 0)
		clock.Advance(10 * time.Minute)
		cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
		cxInvoke(t, env, resources.FnCompaction, body)
		bodies := cxReceive(t, env, resources.QueueHandoff)
		if len(bodies) != 1 {
			t.Fatalf("the retry reported %d completions", len(bodies))
		}
		msg, err := contract.DecodeHandoffMessage("handoff queue", []byte(bodies[0]))
		if err != nil || msg.Completion == nil {
			t.Fatalf("decode the completion: %v", err)
		}
		// S3 dates to the second: the report is at most the first
		// attempt's write, never the retry's start.
		if started := msg.Completion.StartedAtUnixMs; g.CutoverFromWritten && started > written.UnixMilli() {
			t.Errorf("the retry kept outputs written at %d but reported its start as %d", written.UnixMilli(), started)
		}
		p := env.Config.Policy
		env.Publisher.SetQueue(func(ctx context.Context, req contract.CutoverRequest) {
			clock.Advance(written.Add(p.CutoverDeadline.D() + 2*p.ClockSkew.D() + time.Minute).Sub(clock.Now()))
			if err := env.Watermark.Publish(ctx, clock.Now(), clock.Now()); err != nil {
				t.Error(err)
			}
			_, gcBody := headTask(t, env, "c1", contract.NewTask, contract.KindGC)
			cxInvoke(t, env, resources.FnGC, gcBody)
		})
		cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
		if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
			t.Fatal("handoff failed")
		}
		env.Publisher.SetQueue(nil)
		head, err := env.Lineage.Head(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if _, gone := env.Bucket.Get(ctx, out0); head.Version > task.BaseManifestVersion && gone != nil {
			return fmt.Sprintf("the cutover was committed (v%d) naming %s, which GC reclaimed as never-committed: %v", head.Version, out0, gone)
		}
		return ""
	})
}
