package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Issue 25 (least authority): "no single role can release" (guard
// release_rederived, and CCS's own horizon check). A holder of the GC role alone (no other role, no owner answer spoofed)
// gets a release intent recorded for a dropped collection whose data is
// still in the bucket and whose reservation horizon is a day away: it asks
// the publisher to retire the head (POST /retire, the one publisher route
// its role may call; the publisher checks only that CCS dropped the
// collection), then sends the handoff a tombstone cleanup completion whose
// dependency graph says "confirmed" everywhere. The handoff checks the
// sender (GC may send cleanups), the facts (still the tombstone) and that
// the head is gone, and takes every dependency on GC's word: nothing it
// reads itself says the objects are deleted (what is left in the bucket,
// rule 17) or that CCS's reservation horizon has passed (its own clock,
// rule 16). Rule 8: a release intent only after every cleanup dependency
// is confirmed. The handoff now lists what is left of the lifetime and
// judges the horizon by its own clock, and CCS refuses an intent before
// its horizon (TestReleaseIsRederivedFromTheBucketAndTheClock holds the
// guard's mutation proof).
func TestGCRoleAloneGetsNoReleaseBeforeCleanupAndHorizon(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	data := e.add("c1", 3, 0, 0)
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	// The GC role's own publisher client: retire the live head.
	ports := app.GCPorts(e.Config, e.FunctionClients(resources.FnGC))
	if ans, err := ports.Heads.Retire(e.ctx, contract.NewRetireRequest(head)); err != nil || ans.Status != contract.RetireAccepted {
		t.Fatalf("retire as GC: %+v %v", ans, err)
	}
	deps := []contract.Dependency{}
	for _, n := range []string{contract.DepObjects, contract.DepManifests, contract.DepControlArtifacts, contract.DepLifecycleRetention,
		contract.DepReservationHorizon, contract.DepCCSPreconditions} {
		deps = append(deps, contract.Dependency{Name: n, State: contract.DependencyConfirmed, Evidence: "trust me"})
	}
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	forged := contract.Completion{SchemaVersion: contract.SchemaVersion, TaskID: task.TaskID, Kind: contract.KindTombstoneCleanup, Collection: "c1",
		Incarnation: facts.Incarnation, BaseManifestVersion: head.Version, BaseManifestChecksum: head.ManifestChecksum,
		CCSFactsVersion: facts.FactsVersion, CCSFactsDigest: contract.FactsDigest(contract.KindTombstoneCleanup, facts),
		SweepUnixMs: task.SweepUnixMs, Outcome: contract.OutcomeSucceeded, StartedAtUnixMs: e.clk.Now().UnixMilli(), FinishedAtUnixMs: e.clk.Now().UnixMilli(),
		Cleanup: &contract.Cleanup{Deleted: []string{}, Complete: true, Dependencies: deps}}
	forgeSend(t, e.Env, resources.FnGC, 0, forged)
	forgeDeliver(t, e.Env)

	left := 0
	for _, o := range data {
		if e.exists(o.Key) {
			left++
		}
	}
	in, err := e.CCS.Intents(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 0 {
		t.Fatalf("release intent recorded on the GC role's word alone: %d of %d data objects still in the bucket, reservation horizon %s away (intents %v)",
			left, len(data), time.Until(time.UnixMilli(facts.ReservationHorizonUnixMs)).Round(time.Minute), in)
	}
}

// Issue 25: "no single role can wipe" (guard retire_tombstoned). The GC
// role may call the publisher's POST /retire (for a dropped incarnation's
// head); the publisher asks CCS at the retirement whether it dropped the
// head's incarnation, so a holder of the GC role cannot retire the head of
// a live collection. With the guard off (the stand-in's RetireLive), the
// request alone removes the live head.
func TestGCRoleCannotRetireALiveHead(t *testing.T) {
	bothWays(t, mustWithout("retire_tombstoned"), func(t *testing.T, g guard.Set) []string {
		e := startGCWith(t, nil, localenv.Options{Publisher: publisher.Options{RetireLive: !g.RetireTombstoned}})
		e.create("c1", contract.Lifecycle{})
		e.add("c1", 3, 0, 0)
		head, err := e.Lineage.Head(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		ports := app.GCPorts(e.Config, e.FunctionClients(resources.FnGC))
		ans, err := ports.Heads.Retire(e.ctx, contract.NewRetireRequest(head))
		if err != nil {
			t.Fatal(err)
		}
		if ans.Status == contract.RetireAccepted || !e.exists(contract.HeadKey("c1")) {
			return []string{fmt.Sprintf("the GC role retired the head of live collection c1 (v%d): answer %s %q; head present: %v",
				head.Version, ans.Status, ans.Reason, e.exists(contract.HeadKey("c1")))}
		}
		return nil
	})
}
