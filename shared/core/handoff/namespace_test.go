package handoff

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
)

// nsCCS serves one dropped namespace whose children are all released.
type nsCCS struct {
	fakeCCS
	nf contract.NamespaceFacts
}

func (f *nsCCS) NamespaceFacts(context.Context, string) (contract.NamespaceFacts, error) {
	return f.nf, nil
}

type releaseQueue struct{ sent []contract.NamespaceRelease }

func (q *releaseQueue) RequestNamespaceRelease(_ context.Context, r contract.NamespaceRelease) error {
	q.sent = append(q.sent, r)
	return nil
}

// Reconciliation's requester writes nothing to CCS: an owed namespace
// release becomes a request on the handoff queue, and the handoff records
// the intent from facts it re-reads. A namespace that owes nothing (live,
// or already released) is neither requested nor recorded.
func TestNamespaceReleaseGoesThroughTheHandoff(t *testing.T) {
	ccs := &nsCCS{fakeCCS: fakeCCS{facts: contract.CollectionFacts{Tombstoned: true, ReleaseIntentRecorded: true}},
		nf: contract.NamespaceFacts{Namespace: "shop", FactsVersion: 4, Tombstoned: true, Collections: []string{"a", "b"}}}
	q := &releaseQueue{}
	m := metrics.New("observer")
	req := NewNamespaceRequester(ccs, ccs, q, func() time.Time { return t0 }, guard.All(), m, nil)
	requested, err := req.Release(context.Background(), "shop")
	if err != nil || !requested || len(q.sent) != 1 {
		t.Fatalf("owed release: requested %v, %v, sent %+v", requested, err, q.sent)
	}
	if len(ccs.reqs) != 0 {
		t.Fatalf("reconciliation recorded %d intents itself", len(ccs.reqs))
	}
	if r := q.sent[0]; r.Namespace != "shop" || r.FactsVersion != 4 || r.MessageKind != contract.MessageNamespaceRelease {
		t.Fatalf("request %+v", r)
	}
	h := New(newLineage(1), nil, ccs, nil, func() time.Time { return t0 }, Config{Guards: guard.All()}, metrics.New("handoff"), nil)
	res, err := h.ReleaseNamespace(context.Background(), q.sent[0])
	if err != nil || res.Outcome != OutcomeIntentRecorded || len(ccs.reqs) != 1 {
		t.Fatalf("handoff: %+v %v, %d intents", res, err, len(ccs.reqs))
	}
	if in := ccs.reqs[0]; in.IntentKind != contract.NamespaceReleaseIntent || in.IntentID != contract.ReleaseIntentID(contract.NamespaceReleaseIntent, "shop", 1) || len(in.Dependencies) != 2 {
		t.Fatalf("intent %+v", in)
	}
	// Released now: nothing owed, nothing requested, a stale request
	// records nothing.
	ccs.nf.ReleaseIntentRecorded = true
	if requested, err := req.Release(context.Background(), "shop"); err != nil || requested || len(q.sent) != 1 {
		t.Fatalf("released namespace: requested %v, %v", requested, err)
	}
	if res, err := h.ReleaseNamespace(context.Background(), q.sent[0]); err != nil || res.Outcome != OutcomeIgnored || len(ccs.reqs) != 1 {
		t.Fatalf("stale request: %+v %v, %d intents", res, err, len(ccs.reqs))
	}
	// A child whose release is not recorded holds the namespace back, on
	// both sides.
	ccs.nf.ReleaseIntentRecorded = false
	ccs.facts.ReleaseIntentRecorded = false
	if requested, err := req.Release(context.Background(), "shop"); err != nil || requested {
		t.Fatalf("child pending: requested %v, %v", requested, err)
	}
	if res, err := h.ReleaseNamespace(context.Background(), q.sent[0]); err != nil || res.Outcome != OutcomeIgnored || len(ccs.reqs) != 1 {
		t.Fatalf("forged request with a child pending: %+v %v, %d intents", res, err, len(ccs.reqs))
	}
}
