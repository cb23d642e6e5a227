package observe

import (
	"context"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
)

// Owed work that no completion, cursor or record may be the only memory
// of (rule 17): reconciliation derives it again from durable truth on
// every pass and hands it to its owner's path. A lost message, a cursor
// that says "done" or a record kept too briefly then costs at most one
// reconciliation interval.
//
// Releases are derived here and go to the handoff queue like any
// completion (the NamespaceReleaser sends a request, never a CCS write):
// the handoff is the only function that calls CCS's write routes, and it
// judges every dependency again from CCS's facts before it requests the
// intent, whose identity is the incarnation's, so repeats record one
// intent.

// NamespaceCatalog lists the namespaces CCS dropped, with their facts
// (GET {ccs}/namespaces/tombstoned, events/CCS.md).
type NamespaceCatalog interface {
	TombstonedNamespaces(ctx context.Context) ([]contract.NamespaceFacts, error)
}

// OwedNamespaces is the namespaces whose release CCS's listing of dropped
// namespaces says is owed (a pure function): every dropped namespace whose
// release intent CCS has not recorded, with or without child collections.
// Whether its children are all released is judged from the facts read
// when the release is requested, and again by the handoff.
func OwedNamespaces(dropped []contract.NamespaceFacts) []string {
	var out []string
	for _, n := range dropped {
		if n.Tombstoned && !n.ReleaseIntentRecorded && contract.ValidCollection(n.Namespace) {
			out = append(out, n.Namespace)
		}
	}
	return out
}

// deriveNamespaceReleases is the scheduled pass's derivation of the
// namespace releases owed (guard.NamespaceReleaseOwed): a namespace CCS
// dropped with no child at all has no child release or reconciliation to
// ask for its own, so only this asks. A failure is counted with the
// pass's reconcile failures (alarmed) and retried at the next pass; the
// collections' chunks were already sent. It returns how many releases it
// requested from the handoff.
func (o *Observer) deriveNamespaceReleases(ctx context.Context, catalog Catalog) int {
	nc, ok := catalog.(NamespaceCatalog)
	if !ok || o.releaser == nil || !o.guards.NamespaceReleaseOwed {
		return 0
	}
	// A listing that failed part way, or rejected entries alone, still
	// lists the namespaces it read: their releases are derived now; the
	// rejected entries are counted and logged (never released), the rest
	// of a failed listing is derived at the next pass.
	dropped, err := nc.TombstonedNamespaces(ctx)
	if err := o.rejectedEntries(err); err != nil {
		o.metrics.Add("ReconcileFailures", 1)
		o.log.Warn("list tombstoned namespaces failed; the releases of those not listed are derived at the next pass", "listed", len(dropped), "err", err)
	}
	n := 0
	for _, ns := range OwedNamespaces(dropped) {
		requested, err := o.releaser.Release(ctx, ns)
		if err != nil {
			o.metrics.Add("ReconcileFailures", 1)
			o.log.Warn("namespace release owed; request failed, derived again at the next pass", "namespace", ns, "err", fmt.Sprint(err))
			continue
		}
		if requested {
			n++
		}
	}
	if n > 0 {
		o.metrics.Add("NamespaceReleasesByReconcile", float64(n))
	}
	return n
}
