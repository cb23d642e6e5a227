package sim

import (
	"context"
	"slices"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
)

// Large restores: in the quiescent phase of bigRestores worlds one live
// collection commits hundreds to a thousand versions (changing nothing)
// and its owner then puts the head back below all of them (fault
// restore-large): that many roots are left above the head, far past one
// listing page. The operator confirms at round 3 as for any regression.
// Invariant regression-resumed: from round 5 on GC never refuses that
// collection (guard regression_at_scale: the evidence is listed exactly
// and the confirmation names all of it; without it GC refused as soon as
// 64 roots were listed, before any confirmation could count).

// bigRestores reports whether seed's world restores a collection over
// hundreds of versions (every tenth seed; derived from the seed alone).
func bigRestores(seed uint64) bool { return seed%10 == 6 }

// bigRestoreVersions is how many versions seed's large restore abandons:
// 200 to 1,000.
func bigRestoreVersions(seed uint64) int { return 200 * (1 + int(seed/10%5)) }

// bigRestore commits n versions to c and restores the head below them.
func (w *World) bigRestore(c string, n int) {
	col := w.cols[c]
	to := col.head().v
	for range n {
		if _, err := w.invokeOwner(func() error {
			_, err := w.pub.Commit(w.ctx, c, func(context.Context, publisher.Snapshot) (publisher.Change, error) {
				return publisher.Change{Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
			})
			return err
		}); err != nil {
			w.violate("workload", "commit to %s failed without faults: %v", c, err)
			return
		}
	}
	// The observer saw the last of them (notifications coalesce).
	head := contract.HeadKey(c)
	keep := w.notes[:0]
	seen := false
	for i := len(w.notes) - 1; i >= 0; i-- {
		if w.notes[i].key == head {
			if seen {
				continue
			}
			seen = true
		}
		keep = append(keep, w.notes[i])
	}
	slices.Reverse(keep)
	w.notes = keep
	for len(w.notes) > 0 {
		w.deliver(0, false)
	}
	w.count("restore-large")
	w.logf("  owner restores %s from v%d to v%d (%d versions abandoned)", c, col.head().v, to, n)
	if _, err := w.invokeOwner(func() error { _, err := w.pub.Restore(w.ctx, c, to); return err }); err != nil {
		w.violate("workload", "restore of %s to v%d failed without faults: %v", c, to, err)
		return
	}
	w.resetExpected(c)
	w.bigCol, w.bigInc = c, col.inc
}

// checkResumed is invariant regression-resumed, judged at every refusal
// while the restored lifetime lives: once CCS dropped it (or the name
// lives again as another incarnation) its sweeps are no longer the
// restore's to answer (the tombstone cleanup deletes the lineage, the
// head's root before the head, and a late sweep task finds the head's
// root gone).
func (w *World) checkResumed(c, reason string) {
	col := w.cols[c]
	if col == nil || col.tombstoned || col.inc != w.bigInc {
		return
	}
	if c == w.bigCol && w.quiet && w.round >= 5 {
		w.violate("regression-resumed", "GC still refuses %s (%s) two rounds after the operator confirmed its restore over %d versions", c, reason, bigRestoreVersions(w.cfg.Seed))
	}
}
