package e2e

import (
	"context"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
)

// The tests in this file exercise reads that find nothing and rely on the
// answer being 404. On AWS, S3 answers 404 for a missing key only to a
// caller allowed s3:ListBucket on the bucket (403 otherwise), which is why
// compaction, GC and handoff are granted it (infra/iam.go); with the IAM
// checks on (make e2e-iam, make e2e-moto) these reads are judged as needing
// that grant.

// A compaction task whose pinned root cannot be reopened (here: deleted
// behind the head's back) is stale and dropped (rule 2): no output, no
// completion, no retry loop.
func TestCompactionPinnedRootGoneIsStale(t *testing.T) {
	env := cxStart(t, localenv.Options{NoDelivery: true})
	ctx := context.Background()
	cxSetup(t, env, "c1", 4)
	task, body := cxTask(t, env, "c1")
	if err := env.Bucket.Delete(ctx, contract.ManifestKey("c1", 1, task.BaseManifestVersion, task.BaseManifestChecksum)); err != nil {
		t.Fatal(err)
	}
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
		t.Fatalf("a task whose pinned root is gone failed (would be retried) instead of being dropped as stale")
	}
	if n := len(cxReceive(t, env, resources.QueueHandoff)); n != 0 {
		t.Fatalf("%d completions reported for a task whose pinned root is gone", n)
	}
	if cxMetric(env, "StaleTasksSkipped") < 1 {
		t.Fatal("task not counted as stale")
	}
}

// A completion whose lineage up to the head cannot be read in full (a root
// between its base and the head was trimmed) is rejected: handoff cannot
// rule out a delete gain, so it fails closed (rule 7) instead of handing
// the result to the publisher.
func TestHandoffFailsClosedWhenLineageIsTrimmed(t *testing.T) {
	t.Run("coordinator", func(t *testing.T) { trimmedLineage(t, false) })
	t.Run("publisher_conflict_check", func(t *testing.T) { trimmedLineage(t, true) })
}

// trimmedLineage: without the conflict check the handoff rejects the
// result itself (a delete gain it cannot rule out); with it the publisher's
// check cannot read every version since the base and refuses it (clause
// unproven).
func trimmedLineage(t *testing.T, checked bool) {
	pol := cxPolicy(4)
	pol.PublisherConflictCheck = checked
	env := cxStart(t, localenv.Options{NoDelivery: true, Policy: pol})
	ctx := context.Background()
	if checked {
		// The publisher proves its check first, as any cutover's answer
		// echoing conflict_check v1 does: until then the handoff drops a
		// moved-base result itself (guard conflict_check_proven) and the
		// publisher's unproven clause is never asked.
		cxSetup(t, env, "c0", 4)
		_, b0 := cxTask(t, env, "c0")
		cxInvoke(t, env, resources.FnCompaction, b0)
		cxInvoke(t, env, resources.FnHandoff, cxReceive(t, env, resources.QueueHandoff)...)
		if cxLineage(t, env, "c0")[0].Origin.Kind != contract.OriginCutover {
			t.Fatal("the first cutover, which proves the publisher's check, did not land")
		}
	}
	cxSetup(t, env, "c1", 4)
	_, body := cxTask(t, env, "c1")
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
		t.Fatal("compaction failed")
	}
	completions := cxReceive(t, env, resources.QueueHandoff)
	if len(completions) == 0 {
		t.Fatal("compaction reported nothing")
	}
	cxAppend(t, env, "c1", 2)
	roots := cxLineage(t, env, "c1")
	// the head's parent: between the completion's base and the head
	if err := env.Bucket.Delete(ctx, roots[0].ParentKey); err != nil {
		t.Fatal(err)
	}
	head := roots[0].Version
	cxInvoke(t, env, resources.FnHandoff, completions...)
	if got := cxLineage(t, env, "c1")[0].Version; got != head {
		t.Fatalf("head moved to v%d: a result whose lineage could not be checked was cut over", got)
	}
	if checked {
		if cxMetricDim(env, "CutoversRefusedByCheck", "Clause", contract.ClauseUnproven) != 1 {
			t.Fatal("completion not refused by the publisher's check (unproven)")
		}
		return
	}
	if cxMetric(env, "RejectedDeleteGain") < 1 {
		t.Fatal("completion not rejected")
	}
}
