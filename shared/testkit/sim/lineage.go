package sim

import (
	"context"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/testkit/naive"
)

// lineageMemory is the coordinator's lineage memory as GC reads it and
// the operator's `bcc confirm-lineage` writes it.
type lineageMemory interface {
	gc.Memory
	ConfirmLineage(ctx context.Context, c contract.LineageConfirmation) error
}

// memory is the shipped table, or with guard lineage_incarnation off the
// naive store that keeps one confirmation per name (as before
// confirmations named their incarnation): the mutation the guard exists
// against, injected as the e2e test injects it.
func (w *World) memory() lineageMemory {
	if !w.cfg.Guards.LineageIncarnation {
		return naive.NewNameKeyedConfirmations(w.ddb, w.def.Table.Name)
	}
	return w.state
}

func (w *World) recordConfirmation(conf contract.LineageConfirmation) {
	byInc := w.confirmed[conf.Collection]
	if byInc == nil {
		byInc = map[uint64][]contract.LineageConfirmation{}
		w.confirmed[conf.Collection] = byInc
	}
	byInc[conf.Inc()] = append(byInc[conf.Inc()], conf)
}

// recordLateConfirmation records a confirmation planned for a lifetime
// that has since been dropped, released and re-created: an operator's
// command that ran late. It must not answer (or disturb) the new lifetime.
func (w *World) recordLateConfirmation() {
	if len(w.lateConfs) == 0 {
		return
	}
	conf := w.lateConfs[0]
	w.lateConfs = w.lateConfs[1:]
	c := conf.Collection
	if err := w.memory().ConfirmLineage(w.ctx, conf); err != nil {
		w.violate("workload", "a late lineage confirmation of %s incarnation %d failed without faults: %v", c, conf.Inc(), err)
		return
	}
	w.count("lineage-confirmed-late")
	w.logf("  operator's confirmation of %s incarnation %d (head v%d) is recorded late", c, conf.Inc(), conf.HeadVersion)
	if w.cols[c] != nil {
		w.checkLineageOf(c)
	}
}

// checkLineageOf judges c's GC plan now (read-only) by invariant
// lineage-incarnation.
func (w *World) checkLineageOf(c string) {
	pl, _ := gc.PlanSweep(w.ctx, w.gcReadPorts(), w.gcConfig(), c, time.UnixMilli(w.t))
	w.checkConfirmation(c, pl)
}

// checkConfirmation: invariant lineage-incarnation. The confirmation GC
// judges a head by is one the operator recorded for that head's
// incarnation: a confirmation never crosses lifetimes of a name.
func (w *World) checkConfirmation(c string, pl gc.Plan) {
	conf := pl.Confirmation
	if conf == nil {
		return
	}
	inc := contract.Lifetime(pl.Incarnation)
	if conf.Inc() != inc {
		w.violate("lineage-incarnation", "GC judges %s incarnation %d (head v%d) by the confirmation recorded for incarnation %d (head v%d, confirmed at %d)",
			c, inc, pl.HeadVersion, conf.Inc(), conf.HeadVersion, conf.ConfirmedAtUnixMs)
		return
	}
	for _, r := range w.confirmed[c][inc] {
		if r.HeadVersion == conf.HeadVersion && r.HeadChecksum == conf.HeadChecksum && r.ConfirmedAtUnixMs == conf.ConfirmedAtUnixMs {
			return
		}
	}
	w.violate("lineage-incarnation", "GC judges %s incarnation %d by a confirmation never recorded for it (head v%d, confirmed at %d)", c, inc, conf.HeadVersion, conf.ConfirmedAtUnixMs)
}
