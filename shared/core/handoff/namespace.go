package handoff

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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
// (CCS answers an already recorded one as such). Only the handoff calls
// it: it is the one function whose role may POST release intents.
func (r *NamespaceReleaser) Release(ctx context.Context, namespace string) (requested bool, err error) {
	req, owed, err := r.Owed(ctx, namespace)
	if err != nil || !owed {
		return false, err
	}
	ans, err := r.ccs.RecordReleaseIntent(ctx, req)
	if err != nil {
		return true, fmt.Errorf("record namespace release intent %s for %s: %w", req.IntentID, namespace, err)
	}
	r.metrics.Add("NamespaceReleaseIntents", 1)
	r.log.Info("namespace release intent", "namespace", namespace, "intent", req.IntentID, "status", ans.Status, "reason", ans.Reason)
	return true, nil
}

// Owed reads CCS's facts and returns the release intent request namespace
// is owed now (owed false: not dropped, already released, or a child's
// release is not recorded yet). It writes nothing.
func (r *NamespaceReleaser) Owed(ctx context.Context, namespace string) (contract.ReleaseIntentRequest, bool, error) {
	nf, err := r.ns.NamespaceFacts(ctx, namespace)
	if err != nil {
		return contract.ReleaseIntentRequest{}, false, fmt.Errorf("namespace release of %s: read namespace facts: %w", namespace, err)
	}
	if !nf.Tombstoned || nf.ReleaseIntentRecorded {
		return contract.ReleaseIntentRequest{}, false, nil
	}
	deps := make([]string, 0, len(nf.Collections))
	for _, child := range nf.Collections {
		f, err := r.ccs.Facts(ctx, child)
		if err != nil {
			return contract.ReleaseIntentRequest{}, false, fmt.Errorf("namespace release of %s: read facts of %s: %w", namespace, child, err)
		}
		if r.guards.ReleaseDependencies && (!f.Tombstoned || !f.ReleaseIntentRecorded) {
			r.metrics.Add("NamespaceReleasesDeferred", 1)
			r.log.Info("namespace release waits for a child", "namespace", namespace, "child", child)
			return contract.ReleaseIntentRequest{}, false, nil
		}
		deps = append(deps, fmt.Sprintf("collection %s incarnation %d: release intent recorded", child, f.Inc()))
	}
	if len(deps) == 0 {
		deps = append(deps, "no child collections")
	}
	id := contract.ReleaseIntentID(contract.NamespaceReleaseIntent, namespace, nf.Inc())
	return contract.ReleaseIntentRequest{SchemaVersion: contract.SchemaVersion, IntentID: id, IntentKind: contract.NamespaceReleaseIntent,
		Namespace: namespace, Incarnation: nf.Incarnation, FactsVersion: nf.FactsVersion, Dependencies: deps}, true, nil
}

// ReleaseQueue sends a namespace release request to the handoff queue
// (awsio.FIFOQueues).
type ReleaseQueue interface {
	RequestNamespaceRelease(ctx context.Context, r contract.NamespaceRelease) error
}

// NamespaceRequester is reconciliation's side of a namespace release
// (observe.NamespaceReleaser): it reads CCS's facts, and when a release is
// owed it sends a NamespaceRelease to the handoff queue instead of calling
// CCS itself; the handoff re-reads every fact and records the intent. So
// the observer's role needs no CCS write route. It writes nothing but the
// request.
type NamespaceRequester struct {
	owed  *NamespaceReleaser
	queue ReleaseQueue
	now   func() time.Time
}

// NewNamespaceRequester returns reconciliation's namespace release
// requester over CCS's facts and the handoff queue.
func NewNamespaceRequester(ccs CCS, ns NamespaceCCS, queue ReleaseQueue, now func() time.Time, g guard.Set, m *metrics.Recorder, log *slog.Logger) *NamespaceRequester {
	return &NamespaceRequester{owed: NewNamespaceReleaser(ccs, ns, g, m, log), queue: queue, now: now}
}

// Release sends namespace's release request to the handoff when CCS's
// facts say it is owed; requested says whether one was sent.
func (q *NamespaceRequester) Release(ctx context.Context, namespace string) (requested bool, err error) {
	req, owed, err := q.owed.Owed(ctx, namespace)
	if err != nil || !owed {
		return false, err
	}
	msg := contract.NamespaceRelease{SchemaVersion: contract.SchemaVersion, MessageKind: contract.MessageNamespaceRelease, Namespace: namespace,
		FactsVersion: req.FactsVersion, RequestedAtUnixMs: q.now().UnixMilli()}
	if err := q.queue.RequestNamespaceRelease(ctx, msg); err != nil {
		return false, fmt.Errorf("request namespace release of %s from the handoff: %w", namespace, err)
	}
	q.owed.log.Info("namespace release owed; requested from the handoff", "namespace", namespace, "facts_version", req.FactsVersion)
	return true, nil
}
