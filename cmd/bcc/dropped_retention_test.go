package main

import (
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/contract/strictjson"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// Issue 23: lifecycle retention on a dropped collection, and the release
// dependency it is, are visible to an operator. A collection keeping its
// objects six hours is dropped; two hours later (past the token lifetime
// and the retention window) its cleanup has run and waits: `bcc status`
// says Stopping with lifecycle_retention pending, in its reasons and in
// the JSON snapshot (GC's plan and the cleanup's cursor), and `bcc
// gc-plan` prints the pending release dependency and holds every object
// as lifecycle. Once the retention passed, the cleanup completes, the
// dependency is confirmed and the collection is Stopped.
func TestDroppedCollectionRetentionInStatusAndGCPlan(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := e.ctx
	retention := 6 * time.Hour
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{RetentionMs: retention.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Workload.Append(ctx, "c1", e.Workload.Random()); err != nil {
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	facts, err := e.CCS.Drop(ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	cleanup := func() {
		if err := e.Watermark.Publish(ctx, e.clk.Now(), e.clk.Now()); err != nil {
			t.Fatal(err)
		}
		head, _ := e.Lineage.Head(ctx, "c1")
		runGC(t, e, contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli()))
	}
	cleanup() // records the first sighting of the tombstone
	e.clk.Advance(2 * time.Hour)
	cleanup()

	state, why := e.stateOf("c1")
	if state != status.Stopping || !strings.Contains(strings.Join(why, "\n"), contract.DepLifecycleRetention+" pending") {
		t.Fatalf("status: %s %v, want Stopping with %s pending", state, why, contract.DepLifecycleRetention)
	}
	s := e.snapshot("--collection", "c1")
	c := s.Collections[0]
	if c.GC == nil || c.GC.LifecycleRetention == nil || c.GC.LifecycleRetention.State != contract.DependencyPending || c.GC.DeferredByReason[gc.ReasonLifecycle] == 0 {
		t.Fatalf("status snapshot's GC view: %+v", c.GC)
	}
	if c.TombstoneCleanup == nil || !pending(c.TombstoneCleanup.Dependencies, contract.DepLifecycleRetention) {
		t.Fatalf("status snapshot's cleanup cursor: %+v", c.TombstoneCleanup)
	}
	out, _, err := e.bcc("gc-plan", "--collection", "c1")
	if err != nil || !strings.Contains(out, "release dependency "+contract.DepLifecycleRetention+": pending") {
		t.Fatalf("gc-plan does not show the pending release dependency (%v):\n%s", err, out)
	}
	js, _, err := e.bcc("gc-plan", "--collection", "c1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var plan gcPlanDoc
	if err := strictjson.Unmarshal([]byte(js), &plan, strictjson.RejectUnknown); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if d := plan.Plan.LifecycleRetention; d == nil || d.State != contract.DependencyPending || len(plan.Plan.Delete) != 0 {
		t.Fatalf("gc-plan -o json: dependency %+v, %d deletable", d, len(plan.Plan.Delete))
	}
	// gc-plan and status name the same state for the dropped collection:
	// Stopping (tombstoned, cleanup outstanding), never Running.
	if plan.State != status.Stopping || !strings.Contains(strings.SplitN(out, "\n", 2)[0], string(status.Stopping)) {
		t.Fatalf("gc-plan says %s for a dropped collection status calls Stopping:\n%s", plan.State, out)
	}
	t.Logf("held: %v; gc-plan:\n%s", why, out)

	e.clk.Advance(retention)
	for range 3 {
		cleanup()
		e.clk.Advance(time.Minute)
	}
	e.expectState("c1", status.Stopped)
	if c := e.snapshot("--collection", "c1").Collections[0]; c.TombstoneCleanup == nil || pending(c.TombstoneCleanup.Dependencies, contract.DepLifecycleRetention) {
		t.Fatalf("after the retention, the cleanup cursor: %+v", c.TombstoneCleanup)
	}
}

// pending reports whether deps holds the named dependency unconfirmed.
func pending(deps []contract.Dependency, name string) bool {
	for _, d := range deps {
		if d.Name == name {
			return d.State != contract.DependencyConfirmed
		}
	}
	return false
}
