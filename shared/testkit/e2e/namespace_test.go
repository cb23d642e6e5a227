package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// A namespace CCS drops after every child collection's release was already
// recorded has no child release left to trigger its own (the handoff asks
// only when it records a child's release). Reconciliation asks instead: a
// released child, reconciled, requests its namespace's release once the
// namespace is dropped and every child is released. Exactly one namespace
// intent (the namespace incarnation's identity), only after the namespace
// was dropped and after every child's intent, and repeats record nothing
// new.
func TestNamespaceDroppedAfterEveryChildWasReleased(t *testing.T) {
	e := startInc(t)
	if _, err := e.CCS.CreateNamespace(e.ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	children := []string{"carts", "orders", "returns"}
	for _, c := range children {
		f, err := e.CCS.Create(e.ctx, c, "shop", contract.Lifecycle{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Publisher.CreateIncarnation(e.ctx, c, f.Inc()); err != nil {
			t.Fatal(err)
		}
		if _, err := dropSeen(t, e.Env, e.ctx, c, 0); err != nil {
			t.Fatal(err)
		}
	}
	nsIntent := contract.ReleaseIntentID(contract.NamespaceReleaseIntent, "shop", 1)
	count := func() (cols, ns int) {
		for _, in := range e.intents() {
			switch {
			case in.IntentID == nsIntent:
				ns++
			case in.IntentKind == contract.CollectionReleaseIntent:
				cols++
			}
		}
		return cols, ns
	}
	e.clk.Advance(time.Hour)
	if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	e.reconcile()
	if cols, ns := count(); cols != 3 || ns != 0 {
		t.Fatalf("every child released, namespace live: %d collection intents, %d namespace intents (want 3, 0)", cols, ns)
	}
	// Now the namespace is dropped: no child release is left to come.
	if _, err := e.CCS.DropNamespace(e.ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Minute)
	e.reconcile()
	if cols, ns := count(); cols != 3 || ns != 1 {
		t.Fatalf("namespace dropped after its children's release: %d collection intents, %d namespace intents (want 3, 1)", cols, ns)
	}
	nf, err := e.CCS.NamespaceFacts(e.ctx, "shop")
	if err != nil || !nf.ReleaseIntentRecorded {
		t.Fatalf("namespace facts after the reconciliation: %+v %v", nf, err)
	}
	for _, in := range e.intents() {
		if in.IntentID == nsIntent && (in.Namespace != "shop" || len(in.Dependencies) != len(children)) {
			t.Fatalf("namespace intent %+v: want shop with one confirmed dependency per child", in)
		}
	}
	// Reconciliation found the namespace release owed and asked the
	// handoff: every CCS write came from the handoff's identity.
	e.releasesSignedByHandoff()
	// Further reconciliations: the namespace is released, nothing new.
	e.clk.Advance(10 * time.Minute)
	e.reconcile()
	if cols, ns := count(); cols != 3 || ns != 1 {
		t.Fatalf("after another reconciliation: %d collection intents, %d namespace intents (want 3, 1)", cols, ns)
	}
	if n := cxMetric(e.Env, "ReconcileFailures"); n != 0 {
		t.Fatalf("%v reconciliations failed", n)
	}
	if n := cxMetric(e.Env, "NamespaceReleasesByReconcile"); n < 1 {
		t.Fatalf("NamespaceReleasesByReconcile %v: the release did not come from reconciliation", n)
	}
}
