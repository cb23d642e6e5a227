package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// capabilitySetup is the scenario of TestConflictCheckRefusesDeleteSinceBase:
// a late upload built on an older head (deleting doc-a, writing doc-k
// "zombie") that, committed after the compaction's base, a rewrite
// applied unchecked on the newer head would resurrect.
func capabilitySetup(t *testing.T, late *workload.Upload) func(env *localenv.Env) {
	return func(env *localenv.Env) {
		ctx := context.Background()
		if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
		appendWrites(t, env, "c1", workload.Write{Key: "doc-a", Payload: []byte("a")})
		var err error
		*late, err = env.Workload.Upload(ctx, "c1", contract.DataPrefix("c1")+"l0/ingest-late.seg", 0,
			[]workload.Write{{Key: "doc-a", Delete: true}, {Key: "doc-k", Payload: []byte("zombie")}})
		if err != nil {
			t.Fatal(err)
		}
		appendWrites(t, env, "c1", workload.Write{Key: "doc-b", Payload: []byte("b")}, workload.Write{Key: "doc-k", Payload: []byte("k")},
			workload.Write{Key: "doc-x", Payload: []byte("x")}, workload.Write{Key: "doc-k", Delete: true})
		appendWrites(t, env, "c1", workload.Write{Key: "doc-c", Payload: []byte("c")})
		appendWrites(t, env, "c1", workload.Write{Key: "doc-d", Payload: []byte("d")})
		cxSettle(t, env)
	}
}

// A publisher that never proved the conflict check gets no result whose
// base the head moved past, whatever the policy declares (default
// publisher_conflict_check true): the handoff drops it as stale, as
// before issue 26, and fresh work is planned from the head. The publisher
// here has no check and accepts a moved head (NoConflictCheck +
// AcceptRebase). Guard conflict_check_proven off (the declaration taken
// as the proof): the stale result is submitted, applied unchecked, and a
// deleted key reads again (rules 2, 7).
func TestUnprovenPublisherGetsNoMovedBaseResult(t *testing.T) {
	guardVariants(t, "conflict_check_proven", func(t *testing.T, g guard.Set) string {
		o := checkedPolicy(true)
		o.Publisher = publisher.Options{NoConflictCheck: true, AcceptRebase: true}
		env := cxStart(t, o)
		cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
		var late workload.Upload
		capabilitySetup(t, &late)(env)
		_, body := cxTask(t, env, "c1")
		if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
			t.Fatal("compaction failed")
		}
		bodies := cxReceive(t, env, resources.QueueHandoff)
		if len(bodies) != 1 {
			t.Fatalf("%d completions reported, want the compaction's", len(bodies))
		}
		// The head moves past the result's base before the handoff looks.
		if _, err := env.Workload.CommitUpload(context.Background(), late); err != nil {
			t.Fatal(err)
		}
		run := checkRun{env: env, before: reads(t, env, "c1")}
		if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
			t.Fatal("handoff failed")
		}
		run.after = reads(t, env, "c1")
		if d := run.readsChanged(); d != "" {
			return "a publisher that never proved the conflict check was handed a moved-base result and applied it: " + d
		}
		if n := len(cxCutovers(cxLineage(t, env, "c1"))); n != 0 {
			t.Fatalf("%d cutovers in the lineage, want the stale result dropped", n)
		}
		return ""
	})
}

// An acceptance on a head that moved past the request's base, from a
// publisher that did not echo conflict_check, is a contract violation: the
// head moved in the publisher's arrival window (after the handoff looked),
// and a publisher without the check accepted the moved head anyway. The
// coordinator cannot undo an owner's write; it counts
// PublisherUncheckedRebase (alarm bcc-publisher-unchecked-rebase), logs an
// error, forgets the capability, and never counts it as CutoversRebased.
// Guard conflict_check_proven off: the violation is believed and counted
// as a checked rebase.
func TestUncheckedRebaseIsAContractViolation(t *testing.T) {
	guardVariants(t, "conflict_check_proven", func(t *testing.T, g guard.Set) string {
		var late workload.Upload
		o := checkedPolicy(true)
		o.Publisher = publisher.Options{NoConflictCheck: true, AcceptRebase: true}
		r := runChecked(t, o, capabilitySetup(t, &late), func(env *localenv.Env, c contract.Completion) {
			if _, err := env.Workload.CommitUpload(context.Background(), late); err != nil {
				t.Fatal(err)
			}
		}, func(env *localenv.Env) { cxRegisterHandoff(env, app.HandoffOptions{Guards: &g}) })
		if !r.cutover {
			t.Fatal("the permissive publisher did not apply the request: the scenario proves nothing")
		}
		v := cxMetric(r.env, "PublisherUncheckedRebase")
		rb := cxMetricDim(r.env, "CutoversRebased", "Kind", string(r.completion.Kind))
		if v != 1 || rb != 0 {
			return fmt.Sprintf("an unchecked acceptance on a moved head was not reported as a contract violation (PublisherUncheckedRebase %v, CutoversRebased %v)", v, rb)
		}
		return ""
	})
}

// A cold handoff (a new instance: no answer has proven the check to it
// yet) that finds the head moved past its result's base asks the
// publisher to prove the check first, on a probe that cannot take effect
// (the result's request under another id, its not_after long past), then
// submits the result for the check. On a hot collection every result's
// base has moved by the handoff's look, so without the probe a cold
// instance never learns the capability and drops every merge.
func TestColdHandoffProvesTheCheckOnAMovedBase(t *testing.T) {
	env := cxStart(t, checkedPolicy(true))
	cxRegisterHandoff(env, app.HandoffOptions{})
	cxSetup(t, env, "c1", 4)
	_, body := cxTask(t, env, "c1")
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
		t.Fatal("compaction failed")
	}
	bodies := cxReceive(t, env, resources.QueueHandoff)
	if len(bodies) != 1 {
		t.Fatalf("%d completions reported, want the compaction's", len(bodies))
	}
	// A conflict-free append moves the head before the handoff looks.
	appendWrites(t, env, "c1", workload.Write{Key: "doc-new", Payload: []byte("new")})
	before := reads(t, env, "c1")
	if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
		t.Fatal("handoff failed")
	}
	if cxMetric(env, "CutoversRebased") != 1 || cxMetric(env, "StaleResultsDropped") != 0 {
		t.Fatalf("CutoversRebased %v, StaleResultsDropped %v: a cold handoff dropped a conflict-free result whose base moved (the publisher's check was never asked for)",
			cxMetric(env, "CutoversRebased"), cxMetric(env, "StaleResultsDropped"))
	}
	run := checkRun{env: env, before: before, after: reads(t, env, "c1")}
	if d := run.readsChanged(); d != "" {
		t.Fatalf("reads changed: %s", d)
	}
	for _, r := range cxLineage(t, env, "c1") {
		if r.Origin.Kind == contract.OriginCutover && strings.Contains(r.Origin.RequestID, "probe") {
			t.Fatalf("the probe was applied (v%d): it must never take effect", r.Version)
		}
	}
	cxVerify(t, env, "c1")
}

// Review D4: a cold handoff whose moved-base result the publisher's check
// refuses (the late upload of capabilitySetup, committed before the
// handoff looks: clause delete_since_base) probes first; the stand-in
// judges the moved head before not_after (cutover.go), so the probe is
// refused by the clause too, and then the result itself. One result
// refused by the check is one CutoversRefusedByCheck.
func TestColdHandoffRefusedByTheCheckCountsOnce(t *testing.T) {
	env := cxStart(t, checkedPolicy(true))
	cxRegisterHandoff(env, app.HandoffOptions{})
	var late workload.Upload
	capabilitySetup(t, &late)(env)
	_, body := cxTask(t, env, "c1")
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
		t.Fatal("compaction failed")
	}
	bodies := cxReceive(t, env, resources.QueueHandoff)
	if len(bodies) != 1 {
		t.Fatalf("%d completions reported, want the compaction's", len(bodies))
	}
	if _, err := env.Workload.CommitUpload(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	before := reads(t, env, "c1")
	if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
		t.Fatal("handoff failed")
	}
	run := checkRun{env: env, before: before, after: reads(t, env, "c1")}
	if d := run.readsChanged(); d != "" {
		t.Fatalf("reads changed: %s", d)
	}
	if n := cxMetricDim(env, "CutoversRefusedByCheck", "Clause", contract.ClauseDeleteSinceBase); n != 1 {
		t.Fatalf("CutoversRefusedByCheck{Clause=%s} %v for one refused result, StaleResultsDropped %v", contract.ClauseDeleteSinceBase, n, cxMetric(env, "StaleResultsDropped"))
	}
}
