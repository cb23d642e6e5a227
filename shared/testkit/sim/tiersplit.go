package sim

import (
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// splitsTiers reports whether a seed's world ends with a level split across
// storage tiers (tierSplit): every fourth seed. Derived from the seed alone,
// as boundedSweeps.
func splitsTiers(seed uint64) bool { return seed%4 == 1 }

// tierSplit drives one live collection, in the quiescent phase, to a head
// whose level 0 is due by the observer's summary (merge_factor objects
// counted across tiers) while no (tier, level) group plans a job. Round 4
// turns a lifecycle transition to warm on (one minute old); after round 5's
// drain moved the level to warm, the transition is switched off and hot
// segments are appended until the level counts merge_factor objects. Rounds
// 6..9 reconcile that head: the executor must plan the full object set and
// record the head idle, or reconciliation re-enqueues it at every pass
// (guard debt_agreement, invariant idle-reenqueue). The faulty phase reaches
// such a head only when a transition moved part of a level and was switched
// off, rarely.
func (w *World) tierSplit(round int) {
	switch round {
	case 4:
		live := w.liveCollections()
		if len(live) == 0 {
			return
		}
		c := live[0]
		w.splitCol = c
		f := w.ccs.facts[c]
		f.Lifecycle.TransitionAfterMs, f.Lifecycle.TransitionToTier = time.Minute.Milliseconds(), contract.TierWarm
		f = w.ccs.put(f)
		w.logf("  tier split: CCS facts of %s -> v%d (transition after 1m to %q)", c, f.FactsVersion, f.Lifecycle.TransitionToTier)
		if warm, other := w.level0(c); warm+other == 0 {
			w.appendTo(c)
		}
	case 5:
		c := w.splitCol
		if c == "" || w.cols[c].tombstoned {
			return
		}
		warm, other := w.level0(c)
		mf := w.pol.Compaction.MergeFactor
		if warm == 0 || other > 0 || warm >= mf {
			w.count("tier-split-skipped")
			w.logf("  tier split of %s skipped: level 0 holds %d warm and %d other objects", c, warm, other)
			return
		}
		f := w.ccs.facts[c]
		f.Lifecycle.TransitionAfterMs, f.Lifecycle.TransitionToTier = 0, ""
		f = w.ccs.put(f)
		w.logf("  tier split: CCS facts of %s -> v%d (no transition); %d hot segments join %d warm ones in level 0", c, f.FactsVersion, mf-warm, warm)
		for range mf - warm {
			w.appendTo(c)
		}
		w.count("tier-split")
	}
}

// level0 counts the level-0 objects of c's head in the warm tier and in
// any other.
func (w *World) level0(c string) (warm, other int) {
	for _, o := range w.cols[c].head().objects {
		switch {
		case o.Level != 0:
		case o.Tier == contract.TierWarm:
			warm++
		default:
			other++
		}
	}
	return warm, other
}
