package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Review of 6832328 (canName): "a rewrite commits above its base" holds for
// a publisher that keeps the contract, but the suite's and the simulation's
// permissive owner (AcceptRebase: validates by file presence, like
// Iceberg's RewriteFiles; "the coordinator's own guards hold even against
// a permissive owner") applies a moved-base cutover on whatever head it
// finds, a head restored BELOW the base included. The result is a
// committed root v3 naming the output of a task based on v4. Once that
// root is abandoned (a second restore, confirmed) and its part is gone,
// canName says v3 "cannot name" the output (base 4 >= 3) and GC reclaims
// committed data as a never-committed output after the orphan grace, days
// before its lifecycle retention (rule 3: retention_ms by the maximum
// timestamp; rule 15). Before 6832328 the key was held (max_ts unknown).
func TestGCAbandonedRootWithAPartGoneNamingARewriteCommittedBelowItsBase(t *testing.T) {
	e := startGCWith(t, func(p *policy.Policy) { p.PublisherConflictCheck = false },
		localenv.Options{Publisher: publisher.Options{AcceptRebase: true}})
	retention := 7 * 24 * time.Hour
	e.create("c1", contract.Lifecycle{RetentionMs: retention.Milliseconds()})
	in := e.add("c1", 2, 0, 0)           // v2
	e.add("c1", 1, 0, 0)                 // v3
	e.add("c1", 1, 0, 0)                 // v4
	comp, out := e.lateCutover("c1", in) // a compaction based on v4 of v2's objects
	restored := false
	e.Publisher.SetOnArrival(func(ctx context.Context, req contract.CutoverRequest) {
		if restored {
			return
		}
		restored = true
		// An operator's restore lands after the handoff's last look.
		if _, err := e.Publisher.Restore(ctx, "c1", 2); err != nil {
			t.Error(err)
		}
	})
	res, err := e.handoff().Process(e.ctx, comp)
	if err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("compaction cutover: %+v %v", res, err)
	}
	e.Publisher.SetOnArrival(nil)
	h, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 3 || !e.exists(out.Key) {
		t.Fatalf("the permissive owner did not apply the v4-based result on the restored v2: head v%d", h.Version)
	}
	if _, base, _ := contract.ParseTaskID(contract.KindCompaction, "c1", comp.TaskID); base != 4 {
		t.Fatalf("task %s is not based on v4", comp.TaskID)
	}
	e.add("c1", 1, 0, 0) // v4' (shares the part that names the output)
	e.reconcile()
	if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(48 * time.Hour)
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	plan, _ := ex.Plan(e.ctx, "c1")
	conf, ok := gc.ConfirmationFor(plan, "test", "restored v2", e.clk.Now())
	if !ok || len(conf.AbandonedRoots) == 0 {
		t.Fatalf("the plan must show the abandoned roots: %+v", plan)
	}
	if err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).ConfirmLineage(e.ctx, conf); err != nil {
		t.Fatal(err)
	}
	sweep := func() gc.Report {
		ex, _ := e.executor(guard.All(), nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil || rep.Refused != "" {
			t.Fatalf("sweep: %+v %v", rep, err)
		}
		return rep
	}
	sweep() // the coordinator sees the confirmation
	e.clk.Advance(30 * time.Minute)
	e.watermark(e.clk.Now())
	// The abandoned roots' parts that would name the output are gone (as
	// in TestGCAbandonedRootWithAPartGoneHoldsOnlyWhatItCanName).
	named := 0
	for _, k := range conf.AbandonedRoots {
		m, err := e.Lineage.RootAt(e.ctx, "c1", k)
		if err != nil {
			t.Fatal(err)
		}
		if i := m.PartFor(out.Key); i >= 0 {
			named++
			if err := e.Bucket.Delete(e.ctx, m.Parts[i].Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if named == 0 {
		t.Fatalf("no abandoned root covers %s", out.Key)
	}
	// Every grace has passed; the output's lifecycle retention (7 days
	// from its maximum timestamp) has not.
	e.clk.Advance(2 * time.Hour)
	e.watermark(e.clk.Now())
	sweep()
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	rep := sweep()
	if !e.exists(out.Key) {
		t.Errorf("committed output %s (named by the abandoned v3 the permissive owner wrote on the restored v2) was deleted as never-committed before its lifecycle retention: %+v", out.Key, rep)
	}
}

// The same acceptance is a contract violation (events/PUBLISHER.md: a
// publisher without the check refuses every moved head; with it, a head
// restored below the base fails the incarnation clause), but the handoff
// counts PublisherUncheckedRebase only for applied_on_version ABOVE the
// base (handoff/rebase.go appliedOn): a result applied on a head restored
// below its base goes unreported, no alarm, no error log, though reads
// changed (the v4-based merge replaced v2's objects in the restored
// lineage).
func TestUncheckedCutoverOnAHeadRestoredBelowItsBaseIsReported(t *testing.T) {
	e := startGCWith(t, func(p *policy.Policy) { p.PublisherConflictCheck = false },
		localenv.Options{Publisher: publisher.Options{AcceptRebase: true}})
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0) // v2
	e.add("c1", 1, 0, 0)       // v3
	e.add("c1", 1, 0, 0)       // v4
	comp, _ := e.lateCutover("c1", in)
	e.Publisher.SetOnArrival(func(ctx context.Context, req contract.CutoverRequest) {
		e.Publisher.SetOnArrival(nil)
		if _, err := e.Publisher.Restore(ctx, "c1", 2); err != nil {
			t.Error(err)
		}
	})
	uc, m := app.HandoffUseCase(e.Config, e.FunctionClients(resources.FnHandoff), app.Runtime{Now: e.clk.Now, Out: e.Metrics, Log: e.Log}, app.HandoffOptions{})
	res, err := uc.Process(e.ctx, comp)
	if err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("compaction cutover: %+v %v", res, err)
	}
	if err := m.Flush(e.Metrics, e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if h, _ := e.Lineage.Head(e.ctx, "c1"); h.Version != 3 {
		t.Fatalf("head v%d: the permissive owner did not apply the v4-based result on the restored v2", h.Version)
	}
	if v := cxMetric(e.Env, "PublisherUncheckedRebase"); v < 1 {
		t.Errorf("a cutover based on v4 applied unchecked on the head restored to v2 was not reported as a contract violation (PublisherUncheckedRebase %v)", v)
	}
}
