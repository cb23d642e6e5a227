package observe

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// The retention_reclaim class: a recorded lifecycle retention window is
// scheduled by reconciliation exactly when due, as one sweep that also
// takes whatever GC debt is due (one gc-queue sweep per pass).
func TestPlanReconcileSchedulesRetentionReclaimWhenDue(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GCSweepInterval = 24 * time.Hour
	const due = int64(10_000_000)
	cur := Observed{Collection: "c1", Version: 3, ObservedAtUnixMs: due - 1000,
		Debt: Debt{RetentionObjects: 4, RetentionDueAtUnixMs: due, GCSweptAtUnixMs: due - 1000}}
	res := Result{Outcome: OutcomeDuplicate, Collection: "c1", Version: 3}
	kinds := func(ds []Due) map[contract.TaskKind]int {
		m := map[contract.TaskKind]int{}
		for _, d := range ds {
			m[d.Task.Kind]++
		}
		return m
	}
	if got := kinds(PlanReconcile(cfg, cur, res, due-1)); len(got) != 0 {
		t.Fatalf("before due: %v, want nothing", got)
	}
	ds := PlanReconcile(cfg, cur, res, due)
	if got := kinds(ds); len(got) != 1 || got[contract.KindRetentionReclaim] != 1 {
		t.Fatalf("at due: %v, want one retention_reclaim", got)
	}
	if ds[0].Task.DueUnixMs != due || ds[0].Task.SweepUnixMs != contract.SweepMinute(due) {
		t.Fatalf("task %+v: want due %d, sweep minute of now", ds[0].Task, due)
	}
	// GC debt due as well: still one sweep, of the retention class.
	withGC := cur
	withGC.Debt.GCObjects, withGC.Debt.GCDueAtUnixMs = 2, due-5
	if got := kinds(PlanReconcile(cfg, withGC, res, due)); len(got) != 1 || got[contract.KindRetentionReclaim] != 1 {
		t.Fatalf("retention and gc due: %v, want one retention_reclaim sweep", got)
	}
	// GC debt due alone: a gc sweep.
	gcOnly := withGC
	gcOnly.Debt.RetentionObjects, gcOnly.Debt.RetentionDueAtUnixMs = 0, 0
	if got := kinds(PlanReconcile(cfg, gcOnly, res, due)); len(got) != 1 || got[contract.KindGC] != 1 {
		t.Fatalf("gc due alone: %v, want one gc sweep", got)
	}
	// A tombstoned collection: its cleanup, never a retention sweep.
	tomb := cur
	tomb.Debt.TombstoneActive = true
	if got := kinds(PlanReconcile(cfg, tomb, res, due)); got[contract.KindRetentionReclaim] != 0 {
		t.Fatalf("tombstoned: %v, want no retention_reclaim", got)
	}
}
