package handoff

import (
	"context"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
)

// oldContractPublisher applies every request on its current head without
// any check, and answers as a publisher on the contract before issue 26:
// no applied_on_version, no conflict_check echo. before runs in its arrival
// window, after on the root it committed.
type oldContractPublisher struct {
	lin    *fakeLineage
	before func(l *fakeLineage)
	after  func(m *contract.Manifest)
}

func (p *oldContractPublisher) Cutover(_ context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	if p.before != nil {
		p.before(p.lin)
	}
	p.lin.add(contract.Origin{Kind: contract.OriginCutover, RequestID: r.RequestID}, r.Added)
	v := p.lin.head()
	if p.after != nil {
		m := p.lin.roots[v]
		p.after(&m)
		p.lin.roots[v] = m
	}
	return contract.CutoverAnswer{SchemaVersion: 1, RequestID: r.RequestID, Status: contract.CutoverAccepted, CommittedVersion: v, CommittedChecksum: sum(v)}, nil
}

// Review 25/26 D2: an acceptance without applied_on_version is judged by
// what the answer and the committed root show. A committed version above
// base + 1, or a committed root whose parent is not the base (another v5),
// was applied on a moved head without the check: PublisherUncheckedRebase,
// never an ordinary acceptance. Applied on its base it is one.
func TestRebaseWithoutAppliedOnVersionIsDetected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pub     oldContractPublisher
		rebased bool
	}{
		{"applied on its base", oldContractPublisher{}, false},
		{"a commit in the arrival window: committed base+2", oldContractPublisher{
			before: func(l *fakeLineage) { l.add(contract.Origin{Kind: contract.OriginAppend}, nil) }}, true},
		{"committed base+1 on another v5 than the base", oldContractPublisher{
			after: func(m *contract.Manifest) { m.ParentChecksum = sum(99) }}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lin := newLineage(5)
			pub := tc.pub
			pub.lin = lin
			h, m := newHandoff(lin, &pub, guard.All())
			res, err := h.Process(context.Background(), completion(5, h.now()))
			if err != nil || res.Outcome != OutcomeAccepted {
				t.Fatalf("%s (%s) %v", res.Outcome, res.Reason, err)
			}
			got := m.Counts()["PublisherUncheckedRebase"] == 1
			if got != tc.rebased || m.Counts()["CutoversRebased|Kind=compaction"] != 0 {
				t.Fatalf("unchecked rebase counted %v, want %v: %v", got, tc.rebased, m.Counts())
			}
		})
	}
}

// countingPublisher counts the requests it is sent, by id.
type countingPublisher struct {
	Publisher
	ids []string
}

func (p *countingPublisher) Cutover(ctx context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	p.ids = append(p.ids, r.RequestID)
	return p.Publisher.Cutover(ctx, r)
}

// The probe of a cold handoff (probe) cannot take effect on a publisher on
// the contract; one that applies it anyway (an expired request, a moved
// head rebased unchecked) has put the result's change in the head: the
// result is taken as accepted, never submitted again (nor its outputs
// reclaimed as never-committed), and the unchecked rebase is counted.
func TestProbeAppliedByAPublisherBreakingTheContract(t *testing.T) {
	lin := newLineage(5)
	lin.add(contract.Origin{Kind: contract.OriginAppend}, nil) // the head moved past the base
	pub := &countingPublisher{Publisher: &oldContractPublisher{lin: lin}}
	h, m := newHandoff(lin, pub, guard.All())
	h.cfg.ConflictChecked = true
	c := completion(5, h.now())
	res, err := h.Process(context.Background(), c)
	if err != nil || res.Outcome != OutcomeAccepted {
		t.Fatalf("%s (%s) %v: want the applied probe taken as the accepted result", res.Outcome, res.Reason, err)
	}
	reqID := contract.CutoverRequestID(c.TaskID, *c.Coverage)
	if len(pub.ids) != 1 || pub.ids[0] != probeRequestID(reqID) {
		t.Fatalf("requests sent %v, want the probe alone", pub.ids)
	}
	if m.Counts()["PublisherUncheckedRebase"] != 1 || h.checkProven() {
		t.Fatalf("PublisherUncheckedRebase %v, proven %v: want the violation counted and no proof", m.Counts()["PublisherUncheckedRebase"], h.checkProven())
	}
	// Redelivered, the completion finds its change applied.
	res, err = h.Process(context.Background(), c)
	if err != nil || res.Outcome != OutcomeAccepted || res.Reason != "already applied" || len(pub.ids) != 1 {
		t.Fatalf("redelivery: %s (%s) %v, requests %v: want already applied, found in the lineage, nothing sent", res.Outcome, res.Reason, err, pub.ids)
	}
}
