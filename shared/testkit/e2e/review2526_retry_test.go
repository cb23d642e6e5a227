package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Review 25/26, D8 (SYSTEM rules 3, 4 and 13; issue 10's cutover deadline:
// "GC waits past the largest possible not_after before reclaiming a
// never-committed output"). A compaction attempt writes its outputs at W1
// and crashes before reporting. The retry after the lease (10 minutes on)
// rewrites the same keys with If-None-Match, finds its own identical bytes
// and lets them stand (compact.Executor.ours, rule 13) — so the outputs
// keep LastModified W1 — but reports StartedAtUnixMs = S2, its own start,
// and the handoff's request carries not_after = S2 + cutover_deadline. GC
// reclaims a never-committed output at its write time + cutover_deadline +
// 2 x clock_skew = W1 + 34m, while the publisher may apply the request
// until S2 + 30m = W1 + 40m. A publisher that checked the outputs on
// arrival and applies late (events/PUBLISHER.md allows it up to not_after;
// the stand-in's Queue) commits a head naming an output GC deleted in
// between: the committed head references a deleted object.
func TestReview2526_RetriedRewriteOutlivesGCsOrphanHorizon(t *testing.T) {
	clock := newCxClock()
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now})
	ctx := context.Background()
	cxSetup(t, env, "c1", 4)
	task, body := cxTask(t, env, "c1")
	written := clock.Now()
	cxRegisterCompaction(env, app.CompactionOptions{Reporter: &countingReporter{fail: errors.New("process crashed before reporting")}})
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) != 1 {
		t.Fatal("the crashed attempt should fail its message")
	}
	out0 := contract.RewriteOutputKey("c1", 1, task.TaskID, 0)
	if _, err := env.Bucket.Get(ctx, out0); err != nil {
		t.Fatalf("the crashed attempt's output %s: %v", out0, err)
	}
	clock.Advance(10 * time.Minute) // the lease expired long ago; the message is redelivered
	cxRegisterCompaction(env, app.CompactionOptions{})
	cxInvoke(t, env, resources.FnCompaction, body)
	bodies := cxReceive(t, env, resources.QueueHandoff)
	if len(bodies) != 1 {
		t.Fatalf("the retry reported %d completions", len(bodies))
	}
	p := env.Config.Policy
	swept := false
	env.Publisher.SetQueue(func(ctx context.Context, req contract.CutoverRequest) {
		// The publisher applies late, before not_after: one minute past
		// GC's horizon for the output written by the first attempt.
		clock.Advance(written.Add(p.CutoverDeadline.D() + 2*p.ClockSkew.D() + time.Minute).Sub(clock.Now()))
		if err := env.Watermark.Publish(ctx, clock.Now(), clock.Now()); err != nil {
			t.Error(err)
		}
		_, gcBody := headTask(t, env, "c1", contract.NewTask, contract.KindGC)
		cxInvoke(t, env, resources.FnGC, gcBody)
		swept = true
	})
	if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
		t.Fatal("handoff failed")
	}
	env.Publisher.SetQueue(nil)
	if !swept {
		t.Fatal("the cutover never reached the publisher's queue")
	}
	head, err := env.Lineage.Head(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	_, gone := env.Bucket.Get(ctx, out0)
	if head.Version > task.BaseManifestVersion && gone != nil {
		t.Fatalf("the cutover was committed (v%d) naming %s, which GC reclaimed as never-committed %s after the first attempt wrote it (not_after was the retry's start + %s): the head references a deleted object (%v)",
			head.Version, out0, p.CutoverDeadline.D()+2*p.ClockSkew.D()+time.Minute, p.CutoverDeadline.D(), gone)
	}
	if head.Version == task.BaseManifestVersion {
		t.Logf("the cutover was not committed; output present: %v", gone == nil)
	}
}
