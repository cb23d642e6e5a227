package sim

import (
	"context"

	"github.com/searchfabric/bcc/shared/adapters/awsio"

	"github.com/searchfabric/bcc/shared/core/gc"
)

// Steady writes: in the quiescent phase of steadyWrites worlds one live
// collection commits during every GC sweep of it, right before every
// write of the sweep's record (fault commit-during-sweep: the workload
// appends and the observer records the new head at once), so that every
// attempt of every sweep's record meets an observed state that moved past
// the head it is for (a writer faster than any bounded number of
// attempts). Invariant gc-debt-bounded: the collection's recorded GC debt is
// never due for longer than debtAgeBound (guard sweep_record_moved: the
// record is carried forward to the observed head; without it the debt and
// its oldest due time stay for good).

// steadyWrites reports whether seed's world has a steadily written
// collection (every fourth seed; derived from the seed alone).
func steadyWrites(seed uint64) bool { return seed%4 == 3 }

// steadyRounds are the rounds of the quiescent phase with steady writes
// (the rest converge).
const steadyRounds = 7

// debtAgeBound is how long recorded GC debt may stay due for the steadily
// written collection: three rounds of the quiescent phase (each round
// reconciles and drains the gc queue once).
const debtAgeBound = 60 * 60000

// steadySweeps commits to the steady collection before every write of
// a sweep's record of it, after the sweep read its head and planned (the
// sweep's first listing may come before its head read, so a commit there
// would not move the head under it).
type steadySweeps struct {
	*awsio.ObservedTable
	w *World
	c string
}

func (s *steadySweeps) RecordGCSweep(ctx context.Context, sw gc.SweepRecord) error {
	if sw.Collection == s.c {
		w := s.w
		w.count("commit-during-sweep")
		w.logf("   >> the workload appends to %s during its sweep", s.c)
		w.appendTo(s.c)
		for len(w.notes) > 0 {
			w.deliver(0, false)
		}
	}
	return s.ObservedTable.RecordGCSweep(ctx, sw)
}

// checkDebtAge is invariant gc-debt-bounded, after each round of the
// quiescent phase with steady writes from round 4 on.
func (w *World) checkDebtAge() {
	c := w.steadyCol
	if c == "" || w.round < 4 || w.round >= steadyRounds || w.cols[c] == nil || w.cols[c].tombstoned {
		return
	}
	st, err := w.state.Get(w.ctx, c, w.cols[c].inc)
	if err != nil || st.Debt.GCObjects <= 0 || st.Debt.GCDueAtUnixMs <= 0 {
		return
	}
	if age := w.t - st.Debt.GCDueAtUnixMs; age > debtAgeBound {
		w.violate("gc-debt-bounded", "%s (written during every sweep) records %d objects of GC debt due for %dm (bound %dm): the sweeps' records never land",
			c, st.Debt.GCObjects, age/60000, debtAgeBound/60000)
	}
}
