package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
)

// A compaction whose cutover the publisher rejects (an output went
// missing before the handoff) at a head that then stays unchanged: the
// compaction debt at that head is still owed, and fresh work is derived
// from the current head (SYSTEM rule 2) promptly — the next
// reconciliation after compaction.rebuild_after_ms (15 min, the task
// lifetime), well under gc.sweep_interval (1 h),
// enqueues a compaction under a fresh identity that runs and cuts over.
// The rejected result itself is never retried.
func TestRejectedCutoverIsRetriedPromptly(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	clock := newCxClock()
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 4)
	if _, err := env.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	tasks := cxReceive(t, env, resources.QueueCompaction)
	if len(tasks) != 1 {
		t.Fatalf("%d compaction tasks after the first reconciliation, want 1", len(tasks))
	}
	first, err := contract.DecodeTask("test task", []byte(tasks[0]))
	if err != nil {
		t.Fatal(err)
	}
	cxInvoke(t, env, resources.FnCompaction, tasks...)
	done := cxReceive(t, env, resources.QueueHandoff)
	if len(done) != 1 {
		t.Fatalf("%d completions, want 1", len(done))
	}
	c, err := contract.DecodeCompletion("test completion", []byte(done[0]))
	if err != nil {
		t.Fatal(err)
	}
	if c.Coverage == nil || len(c.Coverage.Added) == 0 {
		t.Fatalf("completion without outputs: %+v", c)
	}
	// An output goes missing before the handoff: the publisher rejects.
	if err := env.Bucket.Delete(ctx, c.Coverage.Added[0].Key); err != nil {
		t.Fatal(err)
	}
	if failed, _ := cxInvoke(t, env, resources.FnHandoff, done...); len(failed) > 0 {
		t.Fatalf("handoff failed")
	}
	if n := cxMetric(env, "CutoversRejected"); n != 1 {
		t.Fatalf("CutoversRejected %v, want 1", n)
	}
	head := cxVerify(t, env, "c1")
	if len(cxCutovers(cxLineage(t, env, "c1"))) != 0 {
		t.Fatal("a rejected result was published")
	}

	// compaction.rebuild_after_ms later (well under the sweep interval: the
	// taken task's result can no longer land), the head unchanged.
	sweep := time.Duration(env.Config.Policy.GC.SweepInterval)
	wait := max(time.Duration(env.Config.Policy.Compaction.RebuildAfter), time.Duration(env.Config.Policy.MaxTaskLifetime)) + time.Minute
	if wait >= sweep/2 {
		t.Fatalf("retry after %s, sweep interval %s: the test needs the retry well under the sweep interval", wait, sweep)
	}
	clock.Advance(wait)
	if _, err := env.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	tasks = cxReceive(t, env, resources.QueueCompaction)
	if len(tasks) != 1 {
		t.Fatalf("%d compaction tasks %s after a rejected cutover at unchanged head v%d, want 1 (a fresh identity)", len(tasks), wait, head.Version)
	}
	retry, err := contract.DecodeTask("test task", []byte(tasks[0]))
	if err != nil {
		t.Fatal(err)
	}
	if retry.TaskID == first.TaskID || retry.BaseManifestVersion != head.Version {
		t.Fatalf("retry %s at v%d, want a fresh identity (not %s) at head v%d", retry.TaskID, retry.BaseManifestVersion, first.TaskID, head.Version)
	}
	cxInvoke(t, env, resources.FnCompaction, tasks...)
	cxHandoff(t, env)
	if n := len(cxCutovers(cxLineage(t, env, "c1"))); n != 1 {
		t.Fatalf("%d cutovers after the retry, want 1", n)
	}
	cxVerify(t, env, "c1")
}

// A compaction whose cutover is rejected every time at an unchanged head
// is retried with a doubling delay (compaction.rebuild_after_ms, then 2x,
// ... under the sweep interval), never once per reconciliation pass.
func TestRejectedCutoverRetryBacksOff(t *testing.T) {
	clock := newCxClock()
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 4)
	runReject := func() int {
		tasks := cxReceive(t, env, resources.QueueCompaction)
		if len(tasks) == 0 {
			return 0
		}
		cxInvoke(t, env, resources.FnCompaction, tasks...)
		done := cxReceive(t, env, resources.QueueHandoff)
		for _, b := range done {
			c, err := contract.DecodeCompletion("test completion", []byte(b))
			if err != nil {
				t.Fatal(err)
			}
			if c.Coverage != nil && len(c.Coverage.Added) > 0 {
				if err := env.Bucket.Delete(ctx, c.Coverage.Added[0].Key); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(done) > 0 {
			if failed, _ := cxInvoke(t, env, resources.FnHandoff, done...); len(failed) > 0 {
				t.Fatal("handoff failed")
			}
		}
		// Attempts are the tasks that ran to a result: a copy of a finished
		// identity (re-enqueued once FIFO deduplication has forgotten it,
		// as on moto and on SQS past five minutes) is skipped by its lease.
		return len(done)
	}
	if _, err := env.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := runReject(); n != 1 {
		t.Fatalf("%d first compaction tasks, want 1", n)
	}
	p := env.Config.Policy
	sweep, retry := time.Duration(p.GC.SweepInterval), max(time.Duration(p.Compaction.RebuildAfter), time.Duration(p.MaxTaskLifetime))
	const pass = 5 * time.Minute
	passes, runs := 0, 0
	for elapsed := pass; elapsed < sweep; elapsed += pass {
		clock.Advance(pass)
		if _, err := env.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		passes++
		runs += runReject()
	}
	want := 0
	for step := retry; step < sweep; step *= 2 {
		want++
	}
	t.Logf("%d reconciliation passes %s apart over a sweep interval of %s, every cutover rejected: %d retries (rebuild_after %s, doubling)", passes, pass, sweep, runs, retry)
	if runs != want {
		t.Fatalf("%d retries of a rejected compaction in %d passes, want %d (a doubling backoff)", runs, passes, want)
	}
	if n := cxMetric(env, "CutoversRejected"); n != float64(1+want) {
		t.Fatalf("CutoversRejected %v, want %d", n, 1+want)
	}
	if len(cxCutovers(cxLineage(t, env, "c1"))) != 0 {
		t.Fatal("a rejected result was published")
	}
	cxVerify(t, env, "c1")
}
