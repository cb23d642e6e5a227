package e2e

import (
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// Issue 16 item 1: at most one pending rewrite per collection. Heads that
// find compaction due while a compaction task waits update the debt, not
// the queue; the worker that takes the task plans against the head it
// finds (a task pinned to that head, leased and fenced as any) and, from
// its take on, the next head with compaction due enqueues again.
func TestHeadsCoalesceIntoOnePendingRewrite(t *testing.T) {
	env := newHeldEnv(t) // merge factor 3: compaction due from the third level-0 object
	for range 6 {        // each head observed before the next commit
		for _, ev := range commitHeld(t, env, "c1", 1) {
			if _, err := deliver(t, env, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	bodies := cxReceive(t, env, resources.QueueCompaction)
	if len(bodies) != 1 {
		t.Fatalf("%d compaction tasks pending after 6 heads with compaction due from the third, want 1", len(bodies))
	}
	if !strings.Contains(env.Metrics.String(), `"RewritesCoalesced"`) {
		t.Fatal("coalesced heads are not counted (RewritesCoalesced)")
	}
	task, err := contract.DecodeTask("pending", []byte(bodies[0]))
	if err != nil || task.BaseManifestVersion >= 7 {
		t.Fatalf("the pending task is the first due head's: %+v %v", task, err)
	}
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, bodies...); len(failed) > 0 {
		t.Fatal("compaction failed")
	}
	done := cxReceive(t, env, resources.QueueHandoff)
	if len(done) != 1 {
		t.Fatalf("%d completions, want the compaction's", len(done))
	}
	c, err := contract.DecodeCompletion("completion", []byte(done[0]))
	if err != nil || c.BaseManifestVersion != 7 {
		t.Fatalf("the worker must plan against the head it finds (v7): %+v %v", c, err)
	}
	// Taken: the next head with compaction due enqueues a task again.
	for _, ev := range commitHeld(t, env, "c1", 1) {
		if _, err := deliver(t, env, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(cxReceive(t, env, resources.QueueCompaction)); n != 1 {
		t.Fatalf("after the take, the next due head enqueued %d tasks, want 1", n)
	}
}
