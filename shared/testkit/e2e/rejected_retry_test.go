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
// reconciliation, a few minutes later and well under gc.sweep_interval,
// enqueues a compaction under a fresh identity that runs and cuts over.
// The rejected result itself is never retried.
func TestRejectedCutoverIsRetriedPromptly(t *testing.T) {
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

	// A few minutes later (well under the sweep interval), the head unchanged.
	sweep := time.Duration(env.Config.Policy.GC.SweepInterval)
	clock.Advance(5 * time.Minute)
	if 5*time.Minute >= sweep {
		t.Fatalf("sweep interval %s: the test needs it longer than 5m", sweep)
	}
	if _, err := env.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	tasks = cxReceive(t, env, resources.QueueCompaction)
	if len(tasks) != 1 {
		t.Fatalf("%d compaction tasks 5m after a rejected cutover at unchanged head v%d, want 1 (a fresh identity)", len(tasks), head.Version)
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
