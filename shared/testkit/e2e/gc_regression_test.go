package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/guard"
)

var withoutHeadRegression = mustWithout("head_regression")

// wipeTable deletes the coordinator's table and creates it empty (rule 1:
// all coordinator state is disposable).
func (e *gcEnv) wipeTable() {
	e.t.Helper()
	def := e.Prov.Def
	if _, err := e.Clients.Dynamo.DeleteTable(e.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(def.Table.Name)}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := localaws.Provision(e.ctx, localaws.Clients{S3: e.Clients.S3, Dynamo: e.Clients.Dynamo, SQS: e.Clients.SQS}, def, localaws.ProvisionOptions{VisibilityTimeout: 2 * time.Second}); err != nil { // as localenv provisions
		e.t.Fatal(err)
	}
}

func (e *gcEnv) reconcile() {
	e.t.Helper()
	if _, err := e.Reconcile(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// Issue 10 item 2: the head is put back to an older version (a restore, a
// rollback) after a compaction committed outputs and a token may have
// opened the newer heads. The outputs are no longer in the head's lineage;
// GC must not reclaim them as never-committed. It refuses (head_regression,
// alarmed through GCRefused) until an operator confirms the new lineage —
// also after the coordinator's table is wiped — and then keeps what the
// abandoned roots reference for a token lifetime.
func TestGCRefusesHeadRegressionUntilConfirmed(t *testing.T) {
	bothWays(t, withoutHeadRegression, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		in := e.add("c1", 2, 0, 0) // v2
		comp, out := e.lateCutover("c1", in)
		if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
			t.Fatalf("compaction cutover: %+v %v", res, err) // v3 holds the output
		}
		e.add("c1", 1, 0, 0) // v4
		e.reconcile()        // the coordinator has observed v4
		if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(48 * time.Hour) // every grace has passed since the output was written
		e.watermark(e.clk.Now())
		sweep := func() (gc.Report, map[string]float64) {
			ex, m := e.executor(g, nil)
			rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
			if err != nil {
				t.Fatal(err)
			}
			return rep, m.Counts()
		}
		var v []string
		rep, counts := sweep()
		if !e.exists(out.Key) {
			return append(v, "an output of an abandoned committed version was reclaimed as never-committed: "+out.Key)
		}
		if rep.Refused != gc.RefusedRegression || counts["GCRefused|Reason=head_regression"] != 1 {
			t.Fatalf("want a head_regression refusal, alarmed through GCRefused: %+v %v", rep, counts)
		}
		// The table is wiped: the roots above the head are evidence enough.
		e.wipeTable()
		if rep, _ = sweep(); rep.Refused != gc.RefusedRegression || !e.exists(out.Key) {
			t.Fatalf("a wiped table must not turn the refusal into deletes: %+v", rep)
		}
		// The operator confirms the new lineage.
		ex, _ := e.executor(g, nil)
		plan, _ := ex.Plan(e.ctx, "c1")
		conf, ok := gc.ConfirmationFor(plan, "test", "restored v2", e.clk.Now())
		if !ok || len(conf.AbandonedRoots) != 2 {
			t.Fatalf("the plan must show the two abandoned roots: %+v", plan)
		}
		if err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).ConfirmLineage(e.ctx, conf); err != nil {
			t.Fatal(err)
		}
		if rep, _ = sweep(); rep.Refused != "" || !e.exists(out.Key) {
			t.Fatalf("after the confirmation GC resumes but keeps the abandoned roots' objects for a token lifetime: %+v", rep)
		}
		e.clk.Advance(20 * time.Minute)
		e.watermark(e.clk.Now())
		if rep, _ = sweep(); e.exists(out.Key) || rep.ObjectsDeleted != 1 {
			t.Fatalf("positive control: a token lifetime after the confirmation the abandoned output is reclaimed (as a committed object, guard abandoned_committed): %+v", rep)
		}
		return v
	})
}

// A root one version above the head whose parent is the head is what a
// publisher leaves when it never made its head CAS: not a regression (GC
// is not refused), but what it references is kept while it is above the
// head. The next commit takes its version and GC reclaims the output.
func TestGCStrayRootAboveHeadIsKeptNotRefused(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0)
	comp, out := e.lateCutover("c1", in)
	// The publisher writes the root, then crashes before its head CAS
	// (here: its clock passes not_after in between, and it never withdraws
	// the root it wrote).
	e.Publisher.SetQueue(func(context.Context, contract.CutoverRequest) {})
	e.Publisher.SetCrashAfterRoot(true)
	n := 0
	e.Publisher.SetBeforeCAS(func() {
		if n++; n == 1 {
			e.clk.Advance(31 * time.Minute)
		}
	})
	if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeExpired {
		t.Fatalf("want expired at the CAS: %+v %v", res, err)
	}
	e.clk.Advance(10 * time.Minute)
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	plan, err := ex.Plan(e.ctx, "c1")
	if err != nil || len(plan.RootsAbove) != 1 || len(plan.Orphans) != 0 {
		t.Fatalf("the stray root is seen, not refused, and protects its output: %+v %v", plan, err)
	}
	if _, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"}); err != nil || !e.exists(out.Key) {
		t.Fatalf("output of the stray root deleted: %v", err)
	}
	e.add("c1", 1, 0, 0) // the next commit takes the stray root's version
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t2", Kind: contract.KindGC, Collection: "c1"})
	if err != nil || e.exists(out.Key) || rep.OrphansDeleted != 1 {
		t.Fatalf("once the head passed the stray root, its never-committed output is reclaimed: %+v %v", rep, err)
	}
}

// After a confirmed restore the new lineage quickly re-reaches the
// abandoned version numbers (restored to v2, confirmed, then new v3 and
// v4): the abandoned v3 and v4 are no longer above the head, yet a token
// opened on them may still read what they reference until a token
// lifetime after the confirmation. Their output stays until then (the
// simulation found it reclaimed as a never-committed orphan: seeds 513 and
// 669 of 1,000); after it, it is reclaimed.
func TestGCKeepsConfirmedAbandonedRootsTheNewLineagePassed(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0) // v2
	comp, out := e.lateCutover("c1", in)
	if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("compaction cutover: %+v %v", res, err) // v3 holds the output
	}
	e.add("c1", 1, 0, 0) // v4
	e.reconcile()
	if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(48 * time.Hour) // every grace has passed since the output was written
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	plan, _ := ex.Plan(e.ctx, "c1")
	conf, ok := gc.ConfirmationFor(plan, "test", "restored v2", e.clk.Now())
	if !ok || len(conf.AbandonedRoots) != 2 {
		t.Fatalf("the plan must show the two abandoned roots: %+v", plan)
	}
	if err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).ConfirmLineage(e.ctx, conf); err != nil {
		t.Fatal(err)
	}
	// The new lineage passes the abandoned versions.
	e.add("c1", 1, 0, 0) // new v3
	e.add("c1", 1, 0, 0) // new v4
	e.add("c1", 1, 0, 0) // new v5
	e.reconcile()
	sweep := func() gc.Report {
		ex, _ := e.executor(guard.All(), nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := sweep(); rep.Refused != "" || !e.exists(out.Key) {
		t.Fatalf("inside a token lifetime after the confirmation the abandoned v3's output must stay (present %v): %+v", e.exists(out.Key), rep)
	}
	e.clk.Advance(20 * time.Minute)
	e.watermark(e.clk.Now())
	if rep := sweep(); e.exists(out.Key) || rep.ObjectsDeleted != 1 {
		t.Fatalf("positive control: a token lifetime after the confirmation the abandoned output is reclaimed (as a committed object, guard abandoned_committed): %+v", rep)
	}
}
