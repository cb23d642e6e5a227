package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/searchfabric/bcc/shared/contract"
)

// Namespaces: CCS drops namespaces with no child collection at all
// (fault namespace-dropped-empty); nothing but reconciliation's
// derivation from CCS's listing of dropped namespaces asks for their
// release (guard namespace_release_owed). Invariant release-liveness: a
// dropped namespace whose dependencies hold (it has no child) is released
// within releaseBound reconciliations of the quiescent phase.

// releaseBound is how many reconciliations of the quiescent phase an
// incarnation (collection or namespace) whose release dependencies hold
// may wait for its release intent: the pass that derives it owed and hands
// it to the handoff, and one more for a handoff message that met a fault
// left over from the faulty phase.
const releaseBound = 2

// dropEmptyNamespace: CCS creates a namespace and drops it at once, before
// any collection is created in it (its release owes nothing to a child).
func (w *World) dropEmptyNamespace() {
	w.nsN++
	n := fmt.Sprintf("ns%d", w.nsN)
	f := contract.NamespaceFacts{SchemaVersion: contract.SchemaVersion, Namespace: n, Incarnation: 1, FactsVersion: 1, Tombstoned: true,
		TombstonedAtUnixMs: w.t, Collections: []string{}}
	w.ccs.ns[n] = f
	w.nsWait[n] = 0
	w.count("namespace-dropped-empty")
	w.logf("  CCS drops namespace %s (no child collections)", n)
}

// NamespaceFacts implements handoff.NamespaceCCS.
func (c *CCS) NamespaceFacts(_ context.Context, namespace string) (contract.NamespaceFacts, error) {
	if _, err := portErr(c.w.fault("ccs-namespace-facts", namespace, false), "get namespace facts of "+namespace); err != nil {
		return contract.NamespaceFacts{}, err
	}
	f, ok := c.ns[namespace]
	if !ok {
		return contract.NamespaceFacts{Namespace: namespace}, fmt.Errorf("namespace facts of %s: unknown namespace", namespace)
	}
	return f, nil
}

// TombstonedNamespaces implements observe.NamespaceCatalog.
func (c *CCS) TombstonedNamespaces(_ context.Context) ([]contract.NamespaceFacts, error) {
	if _, err := portErr(c.w.fault("ccs-tombstoned-namespaces", "", false), "list tombstoned namespaces"); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(c.ns))
	for n, f := range c.ns {
		if f.Tombstoned {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]contract.NamespaceFacts, 0, len(names))
	for _, n := range names {
		out = append(out, c.ns[n])
	}
	return out, nil
}

// recordNamespaceIntent is RecordReleaseIntent for a namespace: once per
// incarnation, only while it is dropped (its children, none here, all
// released). A second intent for the incarnation is a violation.
func (c *CCS) recordNamespaceIntent(req contract.ReleaseIntentRequest, ans contract.ReleaseIntentAnswer) (contract.ReleaseIntentAnswer, error) {
	f, ok := c.ns[req.Namespace]
	if !ok || !f.Tombstoned || f.Inc() != contract.Lifetime(req.Incarnation) {
		ans.Status, ans.Reason = contract.IntentRejected, fmt.Sprintf("namespace %s incarnation %d is not dropped", req.Namespace, contract.Lifetime(req.Incarnation))
		return ans, nil
	}
	if f.ReleaseIntentRecorded {
		c.w.violate("release-dependencies", "second release intent %s for namespace %s incarnation %d", req.IntentID, req.Namespace, f.Inc())
	}
	c.Intents[req.IntentID] = Intent{Req: req, RecordedAt: c.w.t}
	f.ReleaseIntentRecorded = true
	f.FactsVersion++
	c.ns[req.Namespace] = f
	ans.Status, ans.RecordedAtUnixMs = contract.IntentRecorded, c.w.t
	c.w.logf("  CCS records the release intent of namespace %s", req.Namespace)
	return ans, nil
}

// checkNamespaceLiveness is invariant release-liveness for namespaces,
// after each reconciliation of the quiescent phase.
func (w *World) checkNamespaceLiveness() {
	for _, n := range sortedKeys(w.nsWait) {
		if w.ccs.ns[n].ReleaseIntentRecorded {
			delete(w.nsWait, n)
			continue
		}
		w.nsWait[n]++
		if w.nsWait[n] > releaseBound {
			w.violate("release-liveness", "namespace %s dropped with no child collection is not released after %d reconciliations of the quiescent phase (bound %d)",
				n, w.nsWait[n], releaseBound)
			return
		}
	}
}
