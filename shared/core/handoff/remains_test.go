package handoff

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
)

// fakeRemains is a bucket listing of fixed keys.
type fakeRemains []string

func (f fakeRemains) Keys(_ context.Context, prefix string, fn func([]string) error) error {
	var page []string
	for _, k := range f {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			page = append(page, k)
		}
	}
	return fn(page)
}

// A release intent is owed only by what the handoff reads itself (guard
// release_rederived): a cleanup completion confirming every dependency is
// one role's word. The horizon is judged by the handoff's clock, what is left by a listing of the collection's prefix (keys of the
// incarnation: manifests, rewrite outputs, the artifacts CCS names);
// another lifetime's keys and writers' uploads do not count. With
// the guard off, the forged "confirmed" graph alone records the intent.
func TestReleaseIsRederivedFromTheBucketAndTheClock(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	deps := []contract.Dependency{}
	for _, n := range []string{contract.DepObjects, contract.DepManifests, contract.DepControlArtifacts, contract.DepLifecycleRetention,
		contract.DepReservationHorizon, contract.DepCCSPreconditions} {
		deps = append(deps, contract.Dependency{Name: n, State: contract.DependencyConfirmed, Evidence: "trust me"})
	}
	artifact := contract.ControlPrefix("c1") + "schema.json"
	other := contract.CollectionPrefix("c1") + "manifests/i3-00000000000000000001-abcd.json" // incarnation 3's root
	for _, tc := range []struct {
		name    string
		g       guard.Set
		horizon time.Time
		pending []string
		left    []string
		want    bool
	}{
		{"nothing left, horizon passed", guard.All(), now.Add(-time.Hour), nil, []string{other, contract.DataPrefix("c1") + "l0/foreign.bin"}, true},
		{"horizon ahead", guard.All(), now.Add(24 * time.Hour), nil, nil, false},
		{"horizon a minute ahead", guard.All(), now.Add(time.Minute), nil, nil, false},
		{"precondition pending", guard.All(), now.Add(-time.Hour), []string{"export"}, nil, false},
		// An append segment of the lifetime left after its manifests (a
		// GC role that deleted them first) is never deleted after the
		// release: the release waits (review2526 D1).
		{"only an append segment of the lifetime left", guard.All(), now.Add(-time.Hour), nil, []string{contract.AppendSegmentKey("c1", 2, 3, 0)}, false},
		{"another lifetime's append segment left", guard.All(), now.Add(-time.Hour), nil, []string{contract.AppendSegmentKey("c1", 1, 3, 0)}, true},
		{"another writer's import left", guard.All(), now.Add(-time.Hour), nil, []string{contract.DataPrefix("c1") + "l1/import-2026-01-01/0000.seg"}, true},
		{"a root left", guard.All(), now.Add(-time.Hour), nil, []string{contract.ManifestKey("c1", 2, 3, sum(3))}, false},
		{"another lifetime's rewrite output left", guard.All(), now.Add(-time.Hour), nil,
			[]string{contract.RewriteOutputKey("c1", 1, contract.NewTask(contract.KindCompaction, "c1", 3, sum(3), 1, 0).TaskID, 0)}, true},
		{"an artifact left", guard.All(), now.Add(-time.Hour), nil, []string{artifact}, false},
		{"guard off: horizon ahead, a root left", withoutG("release_rederived"), now.Add(24 * time.Hour), nil, []string{contract.ManifestKey("c1", 2, 3, sum(3))}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccs := &fakeCCS{facts: contract.CollectionFacts{FactsVersion: 4, Tombstoned: true, Incarnation: 2, ReservationHorizonUnixMs: tc.horizon.UnixMilli(),
				PendingPreconditions: tc.pending, ControlArtifacts: []string{artifact}}}
			lin := newLineage(1)
			lin.headGone = true
			h := New(lin, nil, ccs, nil, func() time.Time { return now }, Config{Guards: tc.g}, nil, nil).WithRemains(fakeRemains(tc.left))
			c := contract.Completion{TaskID: "tc", Kind: contract.KindTombstoneCleanup, Collection: "c1", Incarnation: 2, CCSFactsVersion: 4,
				BaseManifestVersion: 1, BaseManifestChecksum: sum(1), Outcome: contract.OutcomeSucceeded,
				Cleanup: &contract.Cleanup{Complete: true, Dependencies: deps}}
			res, err := h.Process(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(ccs.reqs) > 0; got != tc.want {
				t.Fatalf("intent requested: %v, want %v (%s: %s)", got, tc.want, res.Outcome, res.Reason)
			}
		})
	}
}
