package handoff

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Written dates objects: the LastModified S3 gave each key of keys that
// exists (a missing key is absent from the answer). The handoff dates a
// rewrite's outputs with it (guard cutover_from_written).
type Written interface {
	WrittenAt(ctx context.Context, keys []string) (map[string]time.Time, error)
}

// WithWritten gives the handoff its dating of objects (guard
// cutover_from_written: without one no rewrite is handed off).
func (h *Handoff) WithWritten(w Written) *Handoff {
	h.written = w
	return h
}

// workStart is when a rewrite's work counts from (guard
// cutover_from_written; rules 4, 13, 16): the earlier of the task's start,
// as its completion claims it (counted from now when claimed after the
// handoff's clock, guard cutover_deadline), and the earliest LastModified
// S3 gave the outputs it adds. GC reclaims a never-committed output at its
// LastModified + cutover_deadline + 2 x clock_skew (orphan grace); a
// cutover's not_after counted from this start is never later than the
// LastModified of any output it names + cutover_deadline, so the publisher
// stops before GC may reclaim what it would commit, whatever the
// completion claims: a worker's clock running ahead, a retry that kept a
// crashed attempt's outputs (compact.Executor.ours) and reports its own
// start, a corrupt or forged message. A named output that is not in the
// bucket makes the result not worth handing off: missing is its reason
// (GC reclaimed it, or it was never written).
func (h *Handoff) workStart(ctx context.Context, c contract.Completion) (started time.Time, missing string, err error) {
	claimed := c.StartedAtUnixMs
	if now := h.now().UnixMilli(); h.cfg.Guards.CutoverDeadline && claimed > now {
		claimed = now
	}
	started = time.UnixMilli(claimed)
	// The mutation of cutover_deadline switches this refinement off with
	// it (it would mask the cap above), so that each is proven on its own.
	if g := h.cfg.Guards; !g.CutoverFromWritten || !g.CutoverDeadline || len(c.Coverage.Added) == 0 {
		return started, "", nil
	}
	if h.written == nil {
		return started, "no dating of objects configured: when the outputs were written cannot be seen", nil
	}
	keys := make([]string, 0, len(c.Coverage.Added))
	for _, o := range c.Coverage.Added {
		keys = append(keys, o.Key)
	}
	at, err := h.written.WrittenAt(ctx, keys)
	if err != nil {
		return started, "", fmt.Errorf("date the outputs of %s: %w", c.TaskID, err)
	}
	for _, k := range keys {
		w, ok := at[k]
		if !ok {
			return started, fmt.Sprintf("output %s is not in the bucket (reclaimed as never-committed, or never written)", k), nil
		}
		if w.Before(started) {
			started = w
		}
	}
	return started, "", nil
}
