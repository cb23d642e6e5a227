package handoff

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
)

// NamespaceReleaser requests a dropped namespace's release intent once
// every child collection's release intent is recorded (seed §8.3), with
// the namespace incarnation's deterministic identity, so any number of
// requests (the handoff after a child's release, every reconciliation of a
// released child) record one intent. It reads CCS's facts each time;
// nothing it keeps decides anything.
type NamespaceReleaser struct {
	ccs     CCS
	ns      NamespaceCCS
	guards  guard.Set
	metrics *metrics.Recorder
	log     *slog.Logger
}

// NewNamespaceReleaser returns a releaser over CCS (facts, release intents)
// and its namespace facts.
func NewNamespaceReleaser(ccs CCS, ns NamespaceCCS, g guard.Set, m *metrics.Recorder, log *slog.Logger) *NamespaceReleaser {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NamespaceReleaser{ccs: ccs, ns: ns, guards: g, metrics: m, log: log}
}

// Release requests namespace's release intent if CCS dropped it, has not
// recorded its release, and has recorded every child collection's release
// (guard.ReleaseDependencies). requested says whether a request was sent
// (CCS answers an already recorded one as such).
func (r *NamespaceReleaser) Release(ctx context.Context, namespace string) (requested bool, err error) {
	nf, err := r.ns.NamespaceFacts(ctx, namespace)
	if err != nil {
		return false, fmt.Errorf("namespace release of %s: read namespace facts: %w", namespace, err)
	}
	if !nf.Tombstoned || nf.ReleaseIntentRecorded {
		return false, nil
	}
	deps := make([]string, 0, len(nf.Collections))
	for _, child := range nf.Collections {
		f, err := r.ccs.Facts(ctx, child)
		if err != nil {
			return false, fmt.Errorf("namespace release of %s: read facts of %s: %w", namespace, child, err)
		}
		if r.guards.ReleaseDependencies && (!f.Tombstoned || !f.ReleaseIntentRecorded) {
			r.metrics.Add("NamespaceReleasesDeferred", 1)
			r.log.Info("namespace release waits for a child", "namespace", namespace, "child", child)
			return false, nil
		}
		deps = append(deps, fmt.Sprintf("collection %s incarnation %d: release intent recorded", child, f.Inc()))
	}
	if len(deps) == 0 {
		deps = append(deps, "no child collections")
	}
	id := contract.ReleaseIntentID(contract.NamespaceReleaseIntent, namespace, nf.Inc())
	req := contract.ReleaseIntentRequest{SchemaVersion: contract.SchemaVersion, IntentID: id, IntentKind: contract.NamespaceReleaseIntent,
		Namespace: namespace, Incarnation: nf.Incarnation, FactsVersion: nf.FactsVersion, Dependencies: deps}
	ans, err := r.ccs.RecordReleaseIntent(ctx, req)
	if err != nil {
		return true, fmt.Errorf("record namespace release intent %s for %s: %w", id, namespace, err)
	}
	r.metrics.Add("NamespaceReleaseIntents", 1)
	r.log.Info("namespace release intent", "namespace", namespace, "intent", id, "status", ans.Status, "reason", ans.Reason)
	return true, nil
}
