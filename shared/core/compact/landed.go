package compact

import (
	"context"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Landing reasons (the RewriteResultWait metric's Why dimension).
const (
	LandedInLineage = "landed"  // the result's cutover is in the head's lineage
	LandedTimeout   = "timeout" // ResultWait passed (refused, or a slow handoff)
	LandedOther     = "other"   // the head is gone or of another lifetime
)

// landedPoll is the first pause between two looks at the head while a
// worker waits for its result to land; each pause doubles, up to
// landedPollMax (a result lands within a few hundred milliseconds when the
// handoff is prompt; a refused one costs a handful of head reads).
const (
	landedPoll    = 50 * time.Millisecond
	landedPollMax = 400 * time.Millisecond
)

// awaitLanded holds the collection's queue group (the task's message stays
// in flight) after a rewrite reported, until its cutover is in the head's
// lineage or ResultWait passed. The collection's next rewrite task is in
// the same FIFO group: it then plans on a head without this one's inputs.
// Without the wait it would merge the same objects while this result waits
// for the handoff, and the publisher's conflict check would refuse one of
// the two (input_gone): with a collection committing every 100 ms every
// other merge was wasted. The wait changes nothing but timing: a result
// refused, or a handoff slower than the bound, ends it at the bound.
func (e *Executor) awaitLanded(ctx context.Context, task contract.Task, c contract.Completion) {
	if e.cfg.ResultWait <= 0 || c.Coverage == nil {
		return
	}
	reqID := contract.CutoverRequestID(c.TaskID, *c.Coverage)
	began := e.now()
	why := LandedTimeout
	var slept time.Duration
	var seen uint64 // the head version last walked
	for pause := landedPoll; ; pause = min(2*pause, landedPollMax) {
		landed, other := e.landed(ctx, task, reqID, &seen)
		if landed || other {
			why = map[bool]string{true: LandedInLineage, false: LandedOther}[landed]
			break
		}
		// Bounded by the sleeps, not the clock: a clock that jumps (the
		// benchmarks' jumping clock, a skewed worker) neither cuts the wait
		// short nor stretches it.
		if slept >= e.cfg.ResultWait {
			break
		}
		pause = min(pause, e.cfg.ResultWait-slept)
		if e.sleep(ctx, pause) != nil {
			break
		}
		slept += pause
	}
	e.metrics.AddDim("RewriteResultWait", "Why", why, 1)
	e.metrics.Duration("RewriteResultWaitMs", min(e.now().Sub(began), slept))
}

// landed reads the head and, when it moved since the last look (*seen),
// walks its lineage down to the task's base: landed when a cutover of
// reqID is there; other when the head cannot be read or is of another
// lifetime (nothing to wait for).
func (e *Executor) landed(ctx context.Context, task contract.Task, reqID string, seen *uint64) (landed, other bool) {
	head, err := e.lin.Head(ctx, task.Collection)
	if err != nil || head.Inc() != task.Inc() {
		return false, true
	}
	if head.Version == *seen {
		return false, false
	}
	*seen = head.Version
	root, err := e.lin.Root(ctx, head.ManifestKey, head.ManifestChecksum)
	if err != nil {
		return false, true
	}
	for m := root; m.Version > task.BaseManifestVersion; {
		if m.Origin.Kind == contract.OriginCutover && m.Origin.RequestID == reqID {
			return true, false
		}
		if m.ParentVersion <= task.BaseManifestVersion {
			break
		}
		parent, err := e.lin.Root(ctx, m.ParentKey, m.ParentChecksum)
		if err != nil {
			return false, false
		}
		m = parent
	}
	return false, false
}
