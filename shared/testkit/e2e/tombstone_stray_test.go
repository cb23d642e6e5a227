package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/resources"
)

// strayRoot makes the publisher lose a cutover's head CAS to an append
// (the root and part it wrote stay, named by no head or parent, as a
// publisher that lost a race leaves them) and returns the stray root's key.
func (e *gcEnv) strayRoot(c string) string {
	e.t.Helper()
	in := e.add(c, 2, 0, 0)
	comp, _ := e.lateCutover(c, in)
	n := 0
	e.Publisher.SetBeforeCAS(func() {
		if n++; n == 1 {
			e.add(c, 1, 0, 0) // the append overtakes the cutover between its root write and its CAS
		}
	})
	defer e.Publisher.SetBeforeCAS(nil)
	if _, err := e.handoff().Process(e.ctx, comp); err != nil {
		e.t.Fatal(err)
	}
	head, err := e.Lineage.Head(e.ctx, c)
	if err != nil {
		e.t.Fatal(err)
	}
	ls, err := e.Bucket.List(e.ctx, contract.ManifestsPrefix(c))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range ls {
		if inc, ok := contract.ManifestKeyIncarnation(c, l.Key); ok && inc == head.Inc() && l.Key != head.ManifestKey &&
			l.Key == contract.ManifestKey(c, head.Incarnation, head.Version, l.Key[len(l.Key)-len("0123456789abcdef.json"):len(l.Key)-len(".json")]) {
			return l.Key
		}
	}
	e.t.Fatalf("no stray root of v%d after the lost CAS: %v", head.Version, ls)
	return ""
}

// runTombstone runs the cleanup until it completes (at most runs times).
func (e *gcEnv) runTombstone(ex *gc.Executor, task contract.Task, runs int) gc.TombstoneReport {
	e.t.Helper()
	var rep gc.TombstoneReport
	for range runs {
		var err error
		if rep, err = ex.RunTombstone(e.ctx, task); err != nil {
			e.t.Fatal(err)
		}
		if rep.Outcome == gc.TombCompleted || rep.Outcome == gc.TombDone {
			break
		}
	}
	return rep
}

// A dropped incarnation's cleanup reclaims every manifest key of the
// incarnation, also the root and part a publisher that lost its head CAS
// left (named by no head or parent, so no lineage walk finds them): the
// release says the incarnation's manifests are gone, and after the release
// nothing would ever delete them (found by TestDropReleaseRecreate, about
// one run in fifteen: a cutover overtaken by an append).
func TestTombstoneCleanupReclaimsUncommittedRoots(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	stray := e.strayRoot("c1")
	e.add("c1", 1, 0, 0)
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	ex, _ := e.executor(guard.All(), nil)
	rep := e.runTombstone(ex, task, 10)
	if rep.Outcome != gc.TombCompleted {
		t.Fatalf("cleanup did not complete: %+v", rep)
	}
	ls, err := e.Bucket.List(e.ctx, contract.CollectionPrefix("c1"))
	if err != nil || len(ls) > 0 {
		t.Fatalf("%d keys of the dropped incarnation remain (stray root %s): %v %v", len(ls), stray, ls, err)
	}
	if msgs := receiveAll(t, e, resources.QueueHandoff); len(msgs) != 1 {
		t.Fatalf("%d completions, want 1", len(msgs))
	}
}

// The release dependencies rest on what is left, not on the phases run: a
// root of the incarnation written after its manifests phase (a publisher's
// late write) keeps "manifests" pending, and no completion is reported,
// until a later run has reclaimed it (once no commit can still name it).
func TestTombstoneReleaseWaitsForLateManifestKeys(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	e.add("c1", 2, 0, 0)
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	ex, _ := e.executor(guard.All(), nil)
	late := contract.ManifestKey("c1", 0, head.Version+1, "sha256:0123456789abcdef")
	ex.SetBeforeHeadDelete(func() {
		ex.SetBeforeHeadDelete(nil)
		if _, err := e.Bucket.Put(context.Background(), late, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	})
	rep, err := ex.RunTombstone(e.ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome == gc.TombCompleted || len(receiveAll(t, e, resources.QueueHandoff)) > 0 {
		t.Fatalf("completion reported while %s exists: %+v", late, rep)
	}
	for _, d := range rep.Deps {
		if d.Name == contract.DepManifests && d.State == contract.DependencyConfirmed {
			t.Fatalf("manifests confirmed while %s exists: %+v", late, d)
		}
	}
	e.clk.Advance(time.Hour)
	if rep = e.runTombstone(ex, task, 5); rep.Outcome != gc.TombCompleted || e.exists(late) {
		t.Fatalf("the late root is not reclaimed once old enough: %+v", rep)
	}
	if msgs := receiveAll(t, e, resources.QueueHandoff); len(msgs) != 1 {
		t.Fatalf("%d completions, want 1", len(msgs))
	}
}
