package status

import (
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
)

// A dropped collection's state shows its cleanup's dependency graph: each
// dependency with its state and evidence, Stopping until the completion
// is handed off, then Stopped.
func TestTombstoneShowsTheDependencyGraph(t *testing.T) {
	deps := []contract.Dependency{{Name: contract.DepObjects, State: contract.DependencyConfirmed, Evidence: "40 deleted"},
		{Name: contract.DepReservationHorizon, State: contract.DependencyPending, Evidence: "horizon 9, now 5"}}
	c := Collection{Name: "c1", Desired: Desired{Facts: &contract.CollectionFacts{Collection: "c1", Incarnation: 2, Tombstoned: true}, KnownToCCS: true},
		Current: Current{Cleanup: &gc.TombstoneProgress{Collection: "c1", Incarnation: 2, Phase: gc.PhaseWaiting, Runs: 3, Dependencies: deps}}}
	st, why := judge(c, true)
	if st != Stopping || !strings.Contains(strings.Join(why, "\n"), "reservation_horizon pending (horizon 9, now 5)") {
		t.Fatalf("waiting: %s %v", st, why)
	}
	c.Current.Cleanup.Phase = gc.PhaseDone
	if st, why = judge(c, true); st != Stopped || !strings.Contains(strings.Join(why, "\n"), "release intent requested") {
		t.Fatalf("done: %s %v", st, why)
	}
}
