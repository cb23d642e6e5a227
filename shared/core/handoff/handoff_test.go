package handoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/store"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func sum(v uint64) string { return fmt.Sprintf("sha256:%064d", v) }

// fakeLineage is a linear lineage of roots, version -> root; every version
// holds the objects in held.
type fakeLineage struct {
	roots map[uint64]contract.Manifest
	held  map[string]contract.ObjectEntry
	// headGone: the head pointer does not exist; headInc: the head's
	// incarnation (0: 1).
	headGone bool
	headInc  uint64
}

// input is the object every test completion removes; the base holds it.
var input = contract.ObjectEntry{Key: "collections/c1/data/l0/a.seg", DocCount: 10, MinRecordKey: "k10", MaxRecordKey: "k20"}

func newLineage(n uint64) *fakeLineage {
	l := &fakeLineage{roots: map[uint64]contract.Manifest{}, held: map[string]contract.ObjectEntry{input.Key: input}}
	for v := uint64(1); v <= n; v++ {
		l.add(contract.Origin{Kind: contract.OriginAppend}, nil)
	}
	return l
}

func (l *fakeLineage) head() uint64 { return uint64(len(l.roots)) }

func (l *fakeLineage) add(o contract.Origin, added []contract.ObjectEntry) {
	v := l.head() + 1
	m := contract.Manifest{Collection: "c1", Version: v, Origin: o, Change: contract.Change{Added: added}}
	if v > 1 {
		m.ParentVersion, m.ParentKey, m.ParentChecksum = v-1, contract.ManifestKey("c1", 1, v-1, sum(v-1)), sum(v-1)
	}
	l.roots[v] = m
}

func (l *fakeLineage) Head(ctx context.Context, c string) (contract.Head, error) {
	if l.headGone {
		return contract.Head{}, fmt.Errorf("head of %s: %w", c, store.ErrNotFound)
	}
	h, _, err := l.HeadRoot(ctx, c)
	h.Incarnation = l.headInc
	return h, err
}

func (l *fakeLineage) HeadRoot(context.Context, string) (contract.Head, contract.Manifest, error) {
	v := l.head()
	return contract.Head{Collection: "c1", Version: v, ManifestChecksum: sum(v)}, l.roots[v], nil
}

func (l *fakeLineage) Lookup(_ context.Context, _ *contract.Manifest, key string) (contract.ObjectEntry, bool, error) {
	o, ok := l.held[key]
	return o, ok, nil
}

func (l *fakeLineage) EachChange(_ context.Context, m *contract.Manifest, kind string, fn func(contract.ObjectEntry) error) error {
	list := m.Change.Added
	if kind == contract.ChangeRemoved {
		list = m.Change.Removed
	}
	for _, o := range list {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (l *fakeLineage) Root(_ context.Context, key, checksum string) (contract.Manifest, error) {
	for v, m := range l.roots {
		if sum(v) == checksum {
			return m, nil
		}
	}
	return contract.Manifest{}, store.ErrNotFound
}

// fakePublisher applies a cutover when the head is its base (strict) and
// can answer ambiguously after applying.
type fakePublisher struct {
	lin       *fakeLineage
	ambiguous int // answer this many calls with ErrAmbiguous (after applying)
	calls     int
}

func (p *fakePublisher) Cutover(_ context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	p.calls++
	ans := contract.CutoverAnswer{RequestID: r.RequestID}
	if p.lin.head() != r.BaseVersion {
		ans.Status = contract.CutoverConflict
	} else {
		p.lin.add(contract.Origin{Kind: contract.OriginCutover, RequestID: r.RequestID}, r.Added)
		ans.Status, ans.CommittedVersion = contract.CutoverAccepted, p.lin.head()
	}
	if p.ambiguous > 0 {
		p.ambiguous--
		return contract.CutoverAnswer{}, fmt.Errorf("timeout: %w", store.ErrAmbiguous)
	}
	return ans, nil
}

func completion(base uint64, started time.Time) contract.Completion {
	in := input
	out := contract.ObjectEntry{Level: 1, DocCount: 10, MinRecordKey: "k10", MaxRecordKey: "k20"}
	c := contract.Completion{Kind: contract.KindCompaction, Collection: "c1", BaseManifestVersion: base,
		BaseManifestChecksum: sum(base), Outcome: contract.OutcomeSucceeded, StartedAtUnixMs: started.UnixMilli(),
		Coverage: &contract.Coverage{Removed: []contract.ObjectEntry{in}, Added: []contract.ObjectEntry{out}}}
	reissue(&c)
	return c
}

// reissue makes c the report of the task its fields name, as an executor
// writes it: the task identity of its kind, base and facts, its outputs
// under that task's keys (a transition's a copy of each input in tier
// warm). Tests that change a completion's kind or facts reissue it.
func reissue(c *contract.Completion) {
	c.TaskID = contract.CompletionTaskID(*c)
	if c.Coverage == nil {
		return
	}
	for n := range c.Coverage.Added {
		o := &c.Coverage.Added[n]
		if c.Kind == contract.KindLifecycleTransition && n < len(c.Coverage.Removed) {
			*o = c.Coverage.Removed[n]
			o.Tier = contract.TierWarm
		}
		o.Key = contract.RewriteOutputKey(c.Collection, o.Level, c.TaskID, n)
	}
}

func newHandoff(lin *fakeLineage, pub Publisher, g guard.Set) (*Handoff, *metrics.Recorder) {
	m := metrics.New("handoff")
	return New(lin, pub, &fakeCCS{}, nil, func() time.Time { return t0.Add(time.Minute) }, Config{MaxTaskLifetime: 15 * time.Minute, Guards: g}, m, nil).WithWritten(writtenAt(t0)), m
}

func TestRewriteDecisions(t *testing.T) {
	deletes := []contract.ObjectEntry{{Key: "collections/c1/data/l0/d.seg", DocCount: 3, DeleteCount: 3, MinRecordKey: "k15", MaxRecordKey: "k16"}}
	disjoint := []contract.ObjectEntry{{Key: "collections/c1/data/l0/e.seg", DocCount: 3, DeleteCount: 3, MinRecordKey: "z1", MaxRecordKey: "z2"}}
	for _, tc := range []struct {
		name      string
		g         guard.Set
		after     [][]contract.ObjectEntry // appends after the base
		ambiguous int
		started   time.Time
		want      Outcome
	}{
		{"accepted", guard.All(), nil, 0, t0, OutcomeAccepted},
		{"head moved", guard.All(), [][]contract.ObjectEntry{disjoint}, 0, t0, OutcomeStale},
		{"delete gain", guard.All(), [][]contract.ObjectEntry{deletes}, 0, t0, OutcomeRejectedDelete},
		{"delete gain, revalidation off", withoutG("base_revalidation"), [][]contract.ObjectEntry{deletes}, 0, t0, OutcomeRejectedDelete},
		{"expired", guard.All(), nil, 0, t0.Add(-time.Hour), OutcomeExpired},
		{"ambiguous applied", guard.All(), nil, 1, t0, OutcomeAccepted},
		{"ambiguous unguarded", withoutG("ambiguous_reread"), nil, 1, t0, OutcomeFailedAmbiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lin := newLineage(5)
			for _, a := range tc.after {
				lin.add(contract.Origin{Kind: contract.OriginAppend}, a)
			}
			pub := &fakePublisher{lin: lin, ambiguous: tc.ambiguous}
			h, _ := newHandoff(lin, pub, tc.g)
			res, err := h.Process(context.Background(), completion(5, tc.started))
			if err != nil || res.Outcome != tc.want {
				t.Fatalf("%s %s %v, want %s", res.Outcome, res.Reason, err, tc.want)
			}
		})
	}
}

// A coverage that does not apply to its base is rejected before the
// publisher is asked (issue 19): removing an object the base does not hold,
// or holds with another entry, naming a key twice, adding a key the base
// already holds. The stand-in publisher refuses these too; a real one
// might not.
func TestCoverageMustApplyToBase(t *testing.T) {
	other := input
	other.Key = "collections/c1/data/l0/b.seg"
	changed := input
	changed.Checksum = sum(99)
	for _, tc := range []struct {
		name  string
		edit  func(*contract.Coverage)
		wantR string
	}{
		{"removes an object the base does not hold", func(c *contract.Coverage) { c.Removed = append(c.Removed, other) }, "does not hold"},
		{"removes an object with another entry", func(c *contract.Coverage) { c.Removed[0] = changed }, "differs"},
		{"removes an object twice", func(c *contract.Coverage) { c.Removed = append(c.Removed, input) }, "twice"},
		{"adds an object the base holds", func(c *contract.Coverage) { c.Added = append(c.Added, input) }, "twice"},
		{"adds an object the base holds under another name", func(c *contract.Coverage) { c.Added[0].Key = other.Key }, "already holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lin := newLineage(5)
			if tc.name == "adds an object the base holds under another name" {
				lin.held[other.Key] = other
			}
			pub := &fakePublisher{lin: lin}
			// Provenance would refuse the two that add a foreign key
			// first: the coverage check stands on its own.
			h, m := newHandoff(lin, pub, withoutG("handoff_provenance"))
			c := completion(5, t0)
			tc.edit(c.Coverage)
			res, err := h.Process(context.Background(), c)
			if err != nil || res.Outcome != OutcomeRejectedCoverage || !strings.Contains(res.Reason, tc.wantR) {
				t.Fatalf("%s %q %v, want %s (%s)", res.Outcome, res.Reason, err, OutcomeRejectedCoverage, tc.wantR)
			}
			if pub.calls != 0 || m.Total("RejectedCoverage") != 1 {
				t.Fatalf("publisher called %d times, metrics %v", pub.calls, m.Counts())
			}
		})
	}
}

// A duplicate completion after acceptance is accepted again without a
// second cutover, even though the head moved (by our own cutover).
func TestDuplicateCompletionIsHarmless(t *testing.T) {
	lin := newLineage(5)
	pub := &fakePublisher{lin: lin}
	h, m := newHandoff(lin, pub, guard.All())
	c := completion(5, t0)
	for range 2 {
		if res, err := h.Process(context.Background(), c); err != nil || res.Outcome != OutcomeAccepted {
			t.Fatalf("%s %v", res.Outcome, err)
		}
	}
	if pub.calls != 1 || lin.head() != 6 {
		t.Fatalf("publisher called %d times, head v%d", pub.calls, lin.head())
	}
	if m.Total("CutoversAccepted") != 2 {
		t.Fatal(m.Counts())
	}
}

type fakeCCS struct {
	reqs     []contract.ReleaseIntentRequest
	facts    contract.CollectionFacts // the current facts of every collection
	factsErr error                    // CCS unreachable
	reads    int
}

func (f *fakeCCS) Facts(_ context.Context, c string) (contract.CollectionFacts, error) {
	f.reads++
	if f.factsErr != nil {
		return contract.CollectionFacts{}, f.factsErr
	}
	g := f.facts
	g.Collection = c
	return g, nil
}

func (f *fakeCCS) RecordReleaseIntent(_ context.Context, r contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	st := contract.IntentRecorded
	for _, p := range f.reqs {
		if p.IntentID == r.IntentID {
			st = contract.IntentAlreadyRecorded
		}
	}
	f.reqs = append(f.reqs, r)
	return contract.ReleaseIntentAnswer{IntentID: r.IntentID, Status: st}, nil
}

// A release intent is requested only for a complete cleanup whose every
// dependency is confirmed and whose incarnation's head is gone; its
// identity is the incarnation's. Without the guard an incomplete cleanup
// releases the name.
func TestReleaseIntentOnlyWhenComplete(t *testing.T) {
	confirmed := []contract.Dependency{{Name: contract.DepObjects, State: contract.DependencyConfirmed}, {Name: contract.DepReservationHorizon, State: contract.DependencyConfirmed}}
	pending := []contract.Dependency{{Name: contract.DepObjects, State: contract.DependencyConfirmed}, {Name: contract.DepReservationHorizon, State: contract.DependencyPending}}
	for _, tc := range []struct {
		name     string
		g        guard.Set
		complete bool
		deps     []contract.Dependency
		headGone bool
		headInc  uint64
		want     int
	}{
		{"complete, head gone", guard.All(), true, confirmed, true, 0, 1},
		{"complete, head is a newer incarnation's", guard.All(), true, confirmed, false, 3, 1},
		{"complete but the incarnation's head remains", guard.All(), true, confirmed, false, 2, 0},
		{"a dependency pending", guard.All(), true, pending, true, 0, 0},
		{"incomplete", guard.All(), false, confirmed, true, 0, 0},
		{"incomplete unguarded", withoutG("release_dependencies"), false, pending, false, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccs := &fakeCCS{facts: contract.CollectionFacts{FactsVersion: 4, Tombstoned: true, Incarnation: 2}}
			lin := newLineage(1)
			lin.headGone, lin.headInc = tc.headGone, tc.headInc
			h := New(lin, nil, ccs, nil, time.Now, Config{Guards: tc.g}, nil, nil).WithRemains(fakeRemains{})
			c := contract.Completion{TaskID: "tc", Kind: contract.KindTombstoneCleanup, Collection: "c1", Incarnation: 2, CCSFactsVersion: 4,
				BaseManifestVersion: 1, BaseManifestChecksum: sum(1),
				Outcome: contract.OutcomeSucceeded, Cleanup: &contract.Cleanup{Complete: tc.complete, Dependencies: tc.deps}}
			for range 2 { // duplicates are harmless
				if _, err := h.Process(context.Background(), c); err != nil {
					t.Fatal(err)
				}
			}
			if got := len(ccs.reqs); got != 2*tc.want {
				t.Fatalf("%d intent requests, want %d", got, 2*tc.want)
			}
			if tc.want > 0 && (ccs.reqs[0].IntentID != ccs.reqs[1].IntentID || ccs.reqs[0].IntentID != contract.ReleaseIntentID(contract.CollectionReleaseIntent, "c1", 2)) {
				t.Fatal("intent id is not the incarnation's deterministic identity")
			}
		})
	}
}

// allConfirmed is a release dependency graph with every dependency confirmed.
var allConfirmed = []contract.Dependency{{Name: contract.DepObjects, State: contract.DependencyConfirmed}, {Name: contract.DepManifests, State: contract.DependencyConfirmed},
	{Name: contract.DepReservationHorizon, State: contract.DependencyConfirmed}}

func withoutG(name string) guard.Set {
	g, ok := guard.Without(name)
	if !ok {
		panic(name)
	}
	return g
}

// The facts a kind depends on decide; other facts changes do not waste the
// result. Without the handoff_facts guard every result is handed off.
func TestFactsCheckedPerKind(t *testing.T) {
	planned := contract.CollectionFacts{Collection: "c1", FactsVersion: 3,
		Lifecycle: contract.Lifecycle{RetentionMs: 1000, TransitionAfterMs: 60000, TransitionToTier: contract.TierCold}}
	tomb := planned
	tomb.Tombstoned, tomb.ReservationHorizonUnixMs = true, 5000
	retention := func(f contract.CollectionFacts) contract.CollectionFacts { f.Lifecycle.RetentionMs = 9999; return f }
	tier := func(f contract.CollectionFacts) contract.CollectionFacts {
		f.Lifecycle.TransitionToTier = contract.TierWarm
		return f
	}
	off := func(f contract.CollectionFacts) contract.CollectionFacts {
		f.Lifecycle.TransitionAfterMs, f.Lifecycle.TransitionToTier = 0, ""
		return f
	}
	dropped := func(f contract.CollectionFacts) contract.CollectionFacts {
		f.Tombstoned, f.ReservationHorizonUnixMs = true, 7000
		return f
	}
	undropped := func(f contract.CollectionFacts) contract.CollectionFacts { f.Tombstoned = false; return f }
	newer := func(f contract.CollectionFacts) contract.CollectionFacts { f.ReservationHorizonUnixMs = 8000; return f }
	for _, tc := range []struct {
		name    string
		kind    contract.TaskKind
		planned contract.CollectionFacts
		change  func(contract.CollectionFacts) contract.CollectionFacts
		stale   bool
	}{
		{"compaction, retention changed", contract.KindCompaction, planned, retention, false},
		{"compaction, transition changed", contract.KindCompaction, planned, tier, false},
		{"compaction, tombstoned", contract.KindCompaction, planned, dropped, true},
		{"transition, retention changed", contract.KindLifecycleTransition, planned, retention, false},
		{"transition, other tier", contract.KindLifecycleTransition, planned, tier, true},
		{"transition, switched off", contract.KindLifecycleTransition, planned, off, true},
		{"transition, tombstoned", contract.KindLifecycleTransition, planned, dropped, true},
		{"cleanup, retention changed (a release is irreversible: any change counts)", contract.KindTombstoneCleanup, tomb, retention, true},
		{"cleanup, re-dropped with the same horizon", contract.KindTombstoneCleanup, tomb, func(f contract.CollectionFacts) contract.CollectionFacts { return f }, true},
		{"cleanup, un-dropped", contract.KindTombstoneCleanup, tomb, undropped, true},
		{"cleanup, newer tombstone", contract.KindTombstoneCleanup, tomb, newer, true},
	} {
		for _, g := range []guard.Set{guard.All(), withoutG("handoff_facts")} {
			t.Run(fmt.Sprintf("%s/guarded=%v", tc.name, g.HandoffFacts), func(t *testing.T) {
				cur := tc.change(tc.planned)
				cur.FactsVersion++
				ccs := &fakeCCS{facts: cur}
				lin := newLineage(5)
				pub := &fakePublisher{lin: lin}
				m := metrics.New("handoff")
				h := New(lin, pub, ccs, nil, func() time.Time { return t0.Add(time.Minute) }, Config{MaxTaskLifetime: 15 * time.Minute, Guards: g}, m, nil).WithRemains(fakeRemains{}).WithWritten(writtenAt(t0))
				c := completion(5, t0)
				c.Kind, c.CCSFactsVersion, c.CCSFactsDigest = tc.kind, tc.planned.FactsVersion, contract.FactsDigest(tc.kind, tc.planned)
				reissue(&c)
				if tc.kind == contract.KindTombstoneCleanup {
					c.Coverage, c.Cleanup = nil, &contract.Cleanup{Complete: true, Dependencies: allConfirmed}
					lin.headGone = true
				}
				res, err := h.Process(context.Background(), c)
				if err != nil {
					t.Fatal(err)
				}
				handedOff := pub.calls+len(ccs.reqs) > 0
				if want := !tc.stale || !g.HandoffFacts; handedOff != want {
					t.Fatalf("handed off = %v (outcome %s: %s), want %v", handedOff, res.Outcome, res.Reason, want)
				}
				if tc.stale && g.HandoffFacts && (res.Outcome != OutcomeFactsChanged || m.Total("StaleFactsDropped") != 1) {
					t.Fatalf("outcome %s (%s), metrics %v", res.Outcome, res.Reason, m.Counts())
				}
			})
		}
	}
}

// A completion without a digest (an older executor) is judged by its
// facts_version: any change counts.
func TestFactsWithoutDigestCompareVersions(t *testing.T) {
	lin := newLineage(5)
	pub := &fakePublisher{lin: lin}
	h := New(lin, pub, &fakeCCS{facts: contract.CollectionFacts{FactsVersion: 4}}, nil, func() time.Time { return t0.Add(time.Minute) },
		Config{MaxTaskLifetime: 15 * time.Minute, Guards: guard.All()}, nil, nil).WithWritten(writtenAt(t0))
	c := completion(5, t0)
	c.CCSFactsVersion = 3
	reissue(&c)
	if res, err := h.Process(context.Background(), c); err != nil || res.Outcome != OutcomeFactsChanged || pub.calls != 0 {
		t.Fatalf("%s %v, %d cutovers", res.Outcome, err, pub.calls)
	}
}

// CCS unreachable: nothing is handed off, the completion is retried later
// (an error wrapping ErrFactsUnavailable); the facts are read before every
// resubmission after an unknown outcome too.
func TestFactsUnavailableFailsClosed(t *testing.T) {
	for _, kind := range []contract.TaskKind{contract.KindCompaction, contract.KindTombstoneCleanup} {
		lin := newLineage(5)
		pub := &fakePublisher{lin: lin}
		ccs := &fakeCCS{facts: contract.CollectionFacts{Tombstoned: true}, factsErr: fmt.Errorf("dial: %w", store.ErrThrottled)}
		m := metrics.New("handoff")
		h := New(lin, pub, ccs, nil, func() time.Time { return t0.Add(time.Minute) }, Config{MaxTaskLifetime: 15 * time.Minute, Guards: guard.All()}, m, nil).WithRemains(fakeRemains{}).WithWritten(writtenAt(t0))
		c := completion(5, t0)
		c.Kind = kind
		reissue(&c)
		if kind == contract.KindTombstoneCleanup {
			c.Coverage, c.Cleanup = nil, &contract.Cleanup{Complete: true, Dependencies: allConfirmed}
			lin.headGone = true
		}
		_, err := h.Process(context.Background(), c)
		if !errors.Is(err, ErrFactsUnavailable) || pub.calls != 0 || len(ccs.reqs) != 0 || m.Counts()["HandoffFactsUnavailable"] != 1 {
			t.Fatalf("%s: err %v, %d cutovers, %d intents, %v", kind, err, pub.calls, len(ccs.reqs), m.Counts())
		}
		ccs.factsErr = nil // CCS is back: the retry hands off
		if res, err := h.Process(context.Background(), c); err != nil || (res.Outcome != OutcomeAccepted && res.Outcome != OutcomeIntentRecorded) {
			t.Fatalf("%s retry: %s %v", kind, res.Outcome, err)
		}
	}
	// Unknown outcome, then the facts change before the resubmission.
	lin := newLineage(5)
	pub := &fakePublisher{lin: lin, ambiguous: 1}
	ccs := &fakeCCS{}
	h := New(lin, &lostPublisher{pub, func() { ccs.facts.FactsVersion = 9 }}, ccs, nil, func() time.Time { return t0.Add(time.Minute) },
		Config{MaxTaskLifetime: 15 * time.Minute, Guards: guard.All()}, nil, nil).WithWritten(writtenAt(t0))
	if res, err := h.Process(context.Background(), completion(5, t0)); err != nil || res.Outcome != OutcomeFactsChanged || ccs.reads != 2 {
		t.Fatalf("%s %v, %d facts reads", res.Outcome, err, ccs.reads)
	}
}

// lostPublisher loses the request (the head stays at the base) and runs
// then before answering ambiguously.
type lostPublisher struct {
	*fakePublisher
	then func()
}

func (p *lostPublisher) Cutover(_ context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	p.calls++
	p.then()
	return contract.CutoverAnswer{}, fmt.Errorf("timeout: %w", store.ErrAmbiguous)
}

// stalePublisher records the request and answers stale_facts: CCS facts
// changed between the handoff's check and its head CAS.
type stalePublisher struct{ reqs []contract.CutoverRequest }

func (p *stalePublisher) Cutover(_ context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	p.reqs = append(p.reqs, r)
	return contract.CutoverAnswer{SchemaVersion: 1, RequestID: r.RequestID, Status: contract.CutoverStaleFacts, Reason: "tombstoned false -> true"}, nil
}

// The cutover request carries the facts the handoff judged it under (the
// version it read, the task's kind and digest) for the publisher's check at
// its head CAS; stale_facts from the publisher drops the result like the
// handoff's own check does. With the guard off no facts are carried.
func TestCutoverCarriesFactsAndStaleFactsDrops(t *testing.T) {
	for _, g := range []guard.Set{guard.All(), mustOff(t, "handoff_facts")} {
		lin := newLineage(5)
		pub := &stalePublisher{}
		m := metrics.New("handoff")
		h := New(lin, pub, &fakeCCS{facts: contract.CollectionFacts{FactsVersion: 7}}, nil, func() time.Time { return t0.Add(time.Minute) },
			Config{MaxTaskLifetime: 15 * time.Minute, Guards: g}, m, nil).WithWritten(writtenAt(t0))
		c := completion(5, t0)
		c.CCSFactsVersion = 3
		c.CCSFactsDigest = contract.FactsDigest(c.Kind, contract.CollectionFacts{Collection: c.Collection, FactsVersion: 7})
		reissue(&c)
		res, err := h.Process(context.Background(), c)
		if err != nil || res.Outcome != OutcomeFactsChanged || m.Counts()["StaleFactsDropped|Kind=compaction"] != 1 || len(pub.reqs) != 1 {
			t.Fatalf("guards %+v: %s %v %v, %d requests", g, res.Outcome, err, m.Counts(), len(pub.reqs))
		}
		got := pub.reqs[0].CCSFacts
		switch {
		case !g.HandoffFacts && got != nil:
			t.Fatalf("guard off: the request carries facts %+v", got)
		case g.HandoffFacts && (got == nil || *got != contract.FactsFence{TaskKind: c.Kind, FactsVersion: 7, Digest: c.CCSFactsDigest}):
			t.Fatalf("the request carries %+v, want the facts v7 it was judged under and the task's digest", got)
		}
	}
}

func mustOff(t *testing.T, name string) guard.Set {
	g, ok := guard.Without(name)
	if !ok {
		t.Fatal(name)
	}
	return g
}
