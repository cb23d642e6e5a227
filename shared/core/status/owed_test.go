package status

import (
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/policy"
)

// Status derives what is owed per collection, since when, and who it
// waits on: a dropped incarnation's release waits on CCS once its
// completion was handed off (on the coordinator again once that
// completion's delivery bound passed: it is asked again), on CCS while the
// reservation horizon is pending, on the publisher while the head
// retirement is; GC debt due waits on the coordinator, on an operator
// while GC refuses a regression, on the query plane's watermark when it
// blocks every delete.
func TestStatusShowsWhatIsOwedAndWhoItWaitsOn(t *testing.T) {
	p := policy.Default()
	asOf := time.UnixMilli(10_000_000)
	dropped := &contract.CollectionFacts{Collection: "c1", Incarnation: 2, Tombstoned: true, TombstonedAtUnixMs: 1_000_000}
	one := func(c Collection) Owed {
		t.Helper()
		o := owedOf(c, asOf, p)
		if len(o) != 1 {
			t.Fatalf("want one owed item, got %+v", o)
		}
		return o[0]
	}
	c := Collection{Name: "c1", Desired: Desired{Facts: dropped},
		Current: Current{Cleanup: &gc.TombstoneProgress{Incarnation: 2, Phase: gc.PhaseDone, DoneAtUnixMs: asOf.UnixMilli() - 1000}}}
	if o := one(c); o.Kind != OwedRelease || o.WaitingOn != WaitCCS || o.SinceUnixMs != 1_000_000 {
		t.Fatalf("completion handed off: %+v", o)
	}
	c.Current.Cleanup.DoneAtUnixMs = asOf.Add(-p.ReleaseReaskAfter()).UnixMilli()
	if o := one(c); o.WaitingOn != WaitCoordinator || !strings.Contains(o.Detail, "reports again") {
		t.Fatalf("completion past its delivery bound: %+v", o)
	}
	c.Current.Cleanup = &gc.TombstoneProgress{Incarnation: 2, Phase: gc.PhaseWaiting,
		Dependencies: []contract.Dependency{{Name: contract.DepReservationHorizon, State: contract.DependencyPending, Evidence: "horizon 9"}}}
	if o := one(c); o.WaitingOn != WaitCCS || !strings.Contains(o.Detail, "reservation_horizon pending") {
		t.Fatalf("horizon pending: %+v", o)
	}
	c.Current.Cleanup = &gc.TombstoneProgress{Incarnation: 2, Phase: gc.PhaseHead}
	if o := one(c); o.WaitingOn != WaitPublisher {
		t.Fatalf("head retirement: %+v", o)
	}
	released := *dropped
	released.ReleaseIntentRecorded = true
	c.Desired.Facts = &released
	if o := owedOf(c, asOf, p); len(o) != 0 {
		t.Fatalf("released: %+v", o)
	}

	head := &contract.Head{Collection: "c2", Version: 4}
	ob := &observe.Observed{Collection: "c2", Version: 4, Debt: observe.Debt{GCObjects: 3, GCDueAtUnixMs: 5_000_000}}
	live := Collection{Name: "c2", Desired: Desired{Facts: &contract.CollectionFacts{Collection: "c2"}}, Current: Current{Head: head, Observed: ob, GC: &GCView{}}}
	if o := one(live); o.Kind != OwedGC || o.WaitingOn != WaitCoordinator || o.SinceUnixMs != 5_000_000 {
		t.Fatalf("gc debt due: %+v", o)
	}
	live.Current.GC.Blocked = "watermark unreadable"
	if o := one(live); o.WaitingOn != WaitQueryPlane {
		t.Fatalf("gc blocked by the watermark: %+v", o)
	}
	live.Current.GC = &GCView{Refused: "head_regression"}
	if o := owedOf(live, asOf, p); len(o) != 2 || o[0].Kind != OwedConfirmLineage || o[0].WaitingOn != WaitOperator || o[1].WaitingOn != WaitOperator {
		t.Fatalf("gc refused: %+v", o)
	}
	ob.Debt.GCDueAtUnixMs = asOf.UnixMilli() + 1
	live.Current.GC = &GCView{}
	if o := owedOf(live, asOf, p); len(o) != 0 {
		t.Fatalf("gc debt not due yet: %+v", o)
	}
}
