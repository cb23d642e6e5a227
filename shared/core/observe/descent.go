package observe

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Lineage descent (guard.LineageDescent). The recorded head is the
// coordinator's memory of the newest head a collection had: GC refuses a
// head regression while the head is below it or the lineage holds its
// version with other content. The observer therefore advances the record
// only to a head whose lineage descends from the recorded one: an owner
// that puts the head back and commits on at once re-reaches the abandoned
// version numbers with other content and then passes them, and a record
// advanced by version alone would forget the abandoned head (no root is
// above the head any more: the memory was the only evidence left), so GC
// would reclaim what a reader of the abandoned version still reads.
//
// The advance is conditional on the record holding the head's parent
// (free: the head's root names it), the common case of one observation
// per commit. A record at the parent's version with other content means
// the lineage was replaced: a regression, nothing is recorded, a GC sweep
// is enqueued (it refuses, alarmed) until an operator confirms the new
// lineage, which forgets the abandoned record. A record further behind (a
// gap: lost or coalesced notifications, a lagging reconciliation) is
// advanced on the condition that it still holds that head, and the head
// advanced from is kept in the record (Observed.UnverifiedFrom*, kept
// until cleared) without reading the roots in between: GC walks the
// whole lineage at every sweep anyway, refuses the collection when that
// lineage does not hold the head advanced from (the memory then names it
// as the abandoned head), and clears it once it does. So a gap of any
// length costs no reads here and loses no evidence.

// ErrLineageReplaced: the head's lineage does not hold the recorded head.
var ErrLineageReplaced = errors.New("the head's lineage does not descend from the recorded head")

// advance records st if the head (its root) descends from the recorded
// state, or keeps the head it advanced from across a gap (guard
// LineageDescent; without it: by version alone). It returns the previous
// state, an error wrapping ErrLineageReplaced (and
// store.ErrConditionFailed) when the lineage was replaced, or the
// StateStore's answer.
func (o *Observer) advance(ctx context.Context, st Observed, root contract.Manifest) (Observed, error) {
	if !o.guards.LineageDescent {
		return o.state.Advance(ctx, st)
	}
	st.Expect = &Expect{Version: root.ParentVersion, Checksum: root.ParentChecksum}
	prev, err := o.state.Advance(ctx, st)
	if !errors.Is(err, store.ErrConditionFailed) || prev.Version >= st.Version || o.guards.OwnWrite && ownAdvance(prev, st) {
		return prev, err
	}
	if prev.Version != 0 && prev.Version == root.ParentVersion {
		// The record is at the parent's version with other content.
		return prev, fmt.Errorf("%s v%d: %w (recorded v%d %s): %w", st.Collection, st.Version, ErrLineageReplaced, prev.Version, prev.Checksum, store.ErrConditionFailed)
	}
	// A gap: advance from exactly the recorded head, and keep it.
	st.Expect = &Expect{Version: prev.Version, Checksum: prev.Checksum, KeepFrom: prev.Version != 0}
	if prev.Version != 0 {
		o.metrics.Add("HeadsAdvancedOverGap", 1)
	}
	again, err := o.state.Advance(ctx, st)
	if errors.Is(err, store.ErrConditionFailed) && !(o.guards.OwnWrite && ownAdvance(again, st)) && again.Version < st.Version {
		// Another observation moved the record meanwhile: this event is
		// retried (or the next reconciliation observes the head).
		return again, fmt.Errorf("advance observed state of %s to v%d: the record moved from v%d to v%d during the advance: %w", st.Collection, st.Version, prev.Version, again.Version, store.ErrAmbiguous)
	}
	return again, err
}

// replaced answers an observation whose head's lineage does not descend
// from the recorded head: a head regression (HeadLineageReplaced). GC
// re-reads the head and refuses it (GCRefused head_regression, alarmed);
// a sweep now makes that prompt. Nothing is recorded.
func (o *Observer) replaced(ctx context.Context, res Result, prev Observed, head contract.Head, read contract.CollectionFacts) (Result, error) {
	o.metrics.Add("HeadLineageReplaced", 1)
	o.log.Warn("head's lineage does not descend from the recorded head: a regression; GC refuses until an operator confirms",
		"collection", head.Collection, "version", head.Version, "recorded_version", prev.Version, "recorded_checksum", prev.Checksum)
	t := contract.NewSweepTask(contract.KindGC, head.Collection, head.Version, head.ManifestChecksum, res.FactsVersion, o.now().UnixMilli()).In(head.Inc())
	if err := o.enqueue(ctx, []contract.Task{t}, read); err != nil {
		return res, fmt.Errorf("enqueue a gc sweep of %s (lineage replaced below recorded v%d): %w", head.Collection, prev.Version, err)
	}
	res.Tasks = append(res.Tasks, t)
	res.Outcome = OutcomeStale
	return res, nil
}
