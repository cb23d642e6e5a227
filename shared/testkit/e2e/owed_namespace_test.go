package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// A namespace dropped with no child collection at all has no child whose
// release or reconciliation could ask for its own release. CCS lists its
// tombstoned namespaces with their facts (GET /namespaces/tombstoned,
// events/CCS.md), and every reconciliation derives the namespace releases
// owed from that list: each goes to the handoff queue like a completion,
// and the handoff (the only function that calls CCS's write routes)
// re-reads the namespace's facts and requests the intent with the
// namespace incarnation's identity. One intent, none before the drop, none
// more after; nothing but the handoff POSTs to CCS.
func TestEmptyNamespaceDroppedIsReleased(t *testing.T) {
	e := startInc(t)
	if _, err := e.CCS.CreateNamespace(e.ctx, "scratch"); err != nil {
		t.Fatal(err)
	}
	// A live namespace with a live child, for contrast: nothing owed.
	if _, err := e.CCS.CreateNamespace(e.ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	f, err := e.CCS.Create(e.ctx, "orders", "shop", contract.Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Publisher.CreateIncarnation(e.ctx, "orders", f.Inc()); err != nil {
		t.Fatal(err)
	}
	intent := contract.ReleaseIntentID(contract.NamespaceReleaseIntent, "scratch", 1)
	count := func() (ns, all int) {
		for _, in := range e.intents() {
			all++
			if in.IntentID == intent {
				ns++
			}
		}
		return ns, all
	}
	e.reconcile()
	if ns, all := count(); ns != 0 || all != 0 {
		t.Fatalf("before the drop: %d intents for scratch, %d in all (want none)", ns, all)
	}
	if _, err := e.CCS.DropNamespace(e.ctx, "scratch"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Minute)
	e.reconcile()
	if ns, all := count(); ns != 1 || all != 1 {
		t.Fatalf("after the drop and one reconciliation: %d intents for scratch, %d in all (want 1, 1)", ns, all)
	}
	nf, err := e.CCS.NamespaceFacts(e.ctx, "scratch")
	if err != nil || !nf.ReleaseIntentRecorded {
		t.Fatalf("namespace facts after the reconciliation: %+v %v", nf, err)
	}
	for range 2 {
		e.clk.Advance(10 * time.Minute)
		e.reconcile()
	}
	if ns, all := count(); ns != 1 || all != 1 {
		t.Fatalf("after more reconciliations: %d intents for scratch, %d in all (want 1, 1)", ns, all)
	}
	e.releasesSignedByHandoff()
	if n := cxMetric(e.Env, "NamespaceReleasesByReconcile"); n < 1 {
		t.Fatalf("NamespaceReleasesByReconcile %v: the release was not derived by reconciliation", n)
	}
}
