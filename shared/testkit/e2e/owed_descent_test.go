package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/guard"
)

// The head is put back one version (an owner undoes a cutover) and the
// writer commits on at once: the new lineage re-reaches the abandoned
// version number with other content, then passes it, before anyone
// confirms. The coordinator's memory of the abandoned head is the only
// evidence left (no root is above the head any more): the observer must
// not advance its recorded head across a lineage that does not descend
// from it, so GC keeps refusing (head_regression) and keeps what the
// abandoned version references. On the old path the observer advanced
// from the abandoned v3 to the new v4 (versions compared, not lineage),
// the evidence was gone, and the abandoned version's compaction output
// was reclaimed as never-committed a minute after the restore, inside
// the token lifetime a reader of v3 still has.
//
// When the observer sees the new lineage only after it passed the
// abandoned version by more than one (a gap: lost or coalesced
// notifications), it advances but keeps the head it advanced from, and GC
// judges that head against the lineage it walks: refused the same way.
func TestObserverNeverAdvancesAcrossAReplacedLineage(t *testing.T) {
	t.Run("at the parent", func(t *testing.T) { replacedLineage(t, 2) })
	t.Run("over a gap", func(t *testing.T) { replacedLineage(t, 4) })
}

func replacedLineage(t *testing.T, commits int) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0) // v2
	comp, out := e.lateCutover("c1", in)
	if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("compaction cutover: %+v %v", res, err) // v3 holds the output
	}
	e.reconcile() // observed v3
	e.clk.Advance(time.Hour)
	if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	for range commits {
		e.add("c1", 1, 0, 0) // v3, another one, v4, ...
	}
	// Every head event handled (they run concurrently: two observations
	// of a gap that race each other leave it to the next one), then a
	// reconciliation observes the head.
	if err := e.Settle(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	e.clk.Advance(time.Minute)
	e.watermark(e.clk.Now())
	st, err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).Get(e.ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case commits == 2 && st.Version != 3:
		t.Errorf("observed state v%d %s: want the abandoned v3 kept (the new lineage does not descend from it)", st.Version, st.Checksum)
	case commits > 2 && (st.Version != uint64(2+commits) || st.UnverifiedFromVersion != 3):
		t.Errorf("observed state v%d, advanced over a gap from v%d: want v%d from the abandoned v3", st.Version, st.UnverifiedFromVersion, 2+commits)
	}
	ex, m := e.executor(guard.All(), nil)
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if !e.exists(out.Key) {
		t.Fatalf("the abandoned v3's compaction output was reclaimed a minute after the restore: %+v", rep)
	}
	if rep.Refused != gc.RefusedRegression || m.Counts()["GCRefused|Reason=head_regression"] != 1 {
		t.Fatalf("want a head_regression refusal: %+v", rep)
	}
	// The operator confirms: the abandoned head is forgotten, the new
	// lineage is observed and GC resumes (still keeping the output for a
	// token lifetime after the confirmation).
	plan, _ := ex.Plan(e.ctx, "c1")
	conf, ok := gc.ConfirmationFor(plan, "test", "undid the v3 cutover", e.clk.Now())
	if !ok || conf.AbandonedHeadVersion != 3 {
		t.Fatalf("the confirmation names the abandoned head v3: %+v", conf)
	}
	if err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).ConfirmLineage(e.ctx, conf); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if st, err = awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).Get(e.ctx, "c1", 1); err != nil || st.Version != uint64(2+commits) || st.UnverifiedFromVersion != 0 {
		t.Fatalf("after the confirmation: observed %+v %v, want the new v%d", st, err, 2+commits)
	}
	if rep, err = ex.Run(e.ctx, contract.Task{TaskID: "t2", Kind: contract.KindGC, Collection: "c1"}); err != nil || rep.Refused != "" || !e.exists(out.Key) {
		t.Fatalf("after the confirmation: %+v %v (want no refusal, the output kept)", rep, err)
	}
}
