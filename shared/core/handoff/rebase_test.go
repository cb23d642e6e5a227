package handoff

import (
	"context"
	"strings"
	"testing"
	"time"

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

// checkingPublisher is a publisher with the conflict check that judges a
// moved head before not_after, as the stand-in does (cutover.go: the check,
// then the expiry): a moved head is refused by clause (input_gone); on its
// base a request is refused as expired past not_after, else applied. It
// echoes conflict_check v1 on every answer to a request that asks for it.
// ignoreNotAfter makes it apply an expired request (on any head, checked).
type checkingPublisher struct {
	lin            *fakeLineage
	now            func() time.Time
	refuseMoved    bool
	ignoreNotAfter bool
	ids            []string
}

func (p *checkingPublisher) Cutover(_ context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	p.ids = append(p.ids, r.RequestID)
	ans := contract.CutoverAnswer{SchemaVersion: 1, RequestID: r.RequestID, HeadVersion: p.lin.head()}
	if r.ConflictCheck == contract.ConflictCheckV1 {
		ans.ConflictCheck = contract.ConflictCheckV1
	}
	on := p.lin.head()
	if on != r.BaseVersion && p.refuseMoved {
		ans.Status, ans.ConflictClause, ans.Reason = contract.CutoverConflict, contract.ClauseInputGone, "input gone"
		return ans, nil
	}
	if p.now().UnixMilli() > r.NotAfterUnixMs && !p.ignoreNotAfter {
		ans.Status, ans.Reason = contract.CutoverExpired, "not_after passed"
		return ans, nil
	}
	p.lin.add(contract.Origin{Kind: contract.OriginCutover, RequestID: r.RequestID}, r.Added)
	ans.Status, ans.CommittedVersion, ans.CommittedChecksum, ans.AppliedOnVersion = contract.CutoverAccepted, p.lin.head(), sum(p.lin.head()), on
	return ans, nil
}

// Review D4 (1): a cold handoff's probe of a result the publisher's check
// refuses is answered conflict by clause (the stand-in judges the moved
// head before not_after): that answer is the probe's, not the result's.
// One result refused by the check counts one CutoversRefusedByCheck.
func TestProbeRefusedByTheCheckCountsOnce(t *testing.T) {
	lin := newLineage(5)
	lin.add(contract.Origin{Kind: contract.OriginAppend}, nil) // the head moved past the base
	h, m := newHandoff(lin, nil, guard.All())
	pub := &checkingPublisher{lin: lin, now: h.now, refuseMoved: true}
	h.pub = pub
	h.cfg.ConflictChecked = true
	res, err := h.Process(context.Background(), completion(5, h.now()))
	if err != nil || res.Outcome != OutcomeStale {
		t.Fatalf("%s (%s) %v: want the refused result dropped", res.Outcome, res.Reason, err)
	}
	if n := m.Counts()["CutoversRefusedByCheck|Clause=input_gone"]; n != 1 {
		t.Fatalf("CutoversRefusedByCheck %v for one result refused by the check (requests sent %v): the probe's refusal was counted as the result's", n, pub.ids)
	}
}

// Review D4 (2): the probe is the result's request; it must not be sent
// for a result the handoff itself refuses without the publisher (judgeMoved:
// coverage that does not apply to its base, a base that cannot be
// reopened, a head of another lifetime). The handoff "does not rely on"
// the publisher for these; with the probe sent first, a publisher that
// applies an expired request puts a result the handoff would have
// refused into the head, and the handoff reports it accepted.
func TestProbeNotSentForAResultTheHandoffRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(l *fakeLineage, c *contract.Completion)
		want Outcome
	}{
		{"coverage does not apply to the base", func(l *fakeLineage, c *contract.Completion) { delete(l.held, input.Key) }, OutcomeRejectedCoverage},
		{"the base cannot be reopened", func(l *fakeLineage, c *contract.Completion) {
			c.BaseManifestChecksum = "sha256:" + strings.Repeat("e", 64) // no v5 root has it
			reissue(c)
		}, OutcomeStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lin := newLineage(5)
			lin.add(contract.Origin{Kind: contract.OriginAppend}, nil) // the head moved past the base
			pub := &countingPublisher{Publisher: &oldContractPublisher{lin: lin}}
			h, _ := newHandoff(lin, pub, guard.All())
			h.cfg.ConflictChecked = true
			c := completion(5, h.now())
			tc.mod(lin, &c)
			res, err := h.Process(context.Background(), c)
			if err != nil || res.Outcome != tc.want || len(pub.ids) != 0 {
				t.Fatalf("%s (%s) %v, requests sent %v: want %s with nothing sent", res.Outcome, res.Reason, err, pub.ids, tc.want)
			}
		})
	}
}

// Review D4 (3): a probe applied by a publisher that runs the check and
// echoes it but ignores not_after is no checked rebase the coordinator
// asked for: it is an expired request applied, the one contract GC's
// never-committed reclaim relies on (rule 4: an output is reclaimed once
// its cutover's not_after passed). The probe is the only place the
// coordinator sees it; it must be counted as a violation, not as
// CutoversRebased.
func TestProbeAppliedPastNotAfterIsAViolation(t *testing.T) {
	lin := newLineage(5)
	lin.add(contract.Origin{Kind: contract.OriginAppend}, nil) // the head moved past the base
	h, m := newHandoff(lin, nil, guard.All())
	h.pub = &checkingPublisher{lin: lin, now: h.now, ignoreNotAfter: true}
	h.cfg.ConflictChecked = true
	res, err := h.Process(context.Background(), completion(5, h.now()))
	if err != nil || res.Outcome != OutcomeAccepted {
		t.Fatalf("%s (%s) %v: want the applied probe taken as the accepted result", res.Outcome, res.Reason, err)
	}
	c := m.Counts()
	if c["CutoversRebased|Kind=compaction"] != 0 || c["PublisherUncheckedRebase"] != 1 {
		t.Fatalf("CutoversRebased %v, PublisherUncheckedRebase %v: an expired probe applied was counted as a checked rebase and raised nothing (%v)",
			c["CutoversRebased|Kind=compaction"], c["PublisherUncheckedRebase"], c)
	}
}

// Review D4 (4): a probe the publisher applied is one acceptance: probe
// finishes it (answered) and rewrite finishes judge's verdict again, so
// CutoversAccepted (and the "cutover accepted" log) count it twice.
func TestAppliedProbeCountsOneAcceptance(t *testing.T) {
	lin := newLineage(5)
	lin.add(contract.Origin{Kind: contract.OriginAppend}, nil) // the head moved past the base
	h, m := newHandoff(lin, &oldContractPublisher{lin: lin}, guard.All())
	h.cfg.ConflictChecked = true
	res, err := h.Process(context.Background(), completion(5, h.now()))
	if err != nil || res.Outcome != OutcomeAccepted {
		t.Fatalf("%s (%s) %v", res.Outcome, res.Reason, err)
	}
	if n := m.Counts()["CutoversAccepted|Kind=compaction"]; n != 1 {
		t.Fatalf("CutoversAccepted %v for one applied probe: %v", n, m.Counts())
	}
}
