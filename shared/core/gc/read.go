package gc

import (
	"context"
	"fmt"
	"math"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// view is what the read phase of one sweep saw: CCS facts, the committed
// lineage from the head (every root verified and strictly decoded) and
// the watermark.
type view struct {
	c         string
	facts     contract.CollectionFacts
	walk      lineage.Walk
	safe      int64 // global_safe_ts, when wmErr is nil
	wmErr     error
	above     []contract.Manifest // roots that exist above the head (regression.go)
	aboveKeys []string            // ... and their keys
	highest   uint64              // the highest head version the coordinator remembers
	highSum   string              // ... and its checksum
	conf      *contract.LineageConfirmation
}

// read is the sweep's read phase. Unreadable facts refuse the collection
// (fail closed); so does any root that cannot be opened, verified or
// understood. An unreadable watermark is recorded: it blocks every delete.
//
// A view that shows a head regression is judged only once the head, read
// again after the memory and the roots above it, is still the walked one
// (headMovedSince): otherwise the read phase starts again on the new head.
func (pl planner) read(ctx context.Context, c string) (view, error) {
	for attempt := 1; ; attempt++ {
		v, err := pl.readOnce(ctx, c)
		if err != nil {
			return v, err
		}
		moved, err := pl.headMovedSince(ctx, v)
		if err != nil || !moved {
			return v, err
		}
		if attempt == maxReads {
			return v, fmt.Errorf("gc of %s: the head moved during each of %d read phases: %w", c, maxReads, ErrHeadMoving)
		}
	}
}

// readOnce is one read phase: facts, the walk from the head, what exists
// above it and the memory, the watermark.
func (pl planner) readOnce(ctx context.Context, c string) (view, error) {
	v := view{c: c}
	facts, err := pl.ports.Facts.Facts(ctx, c)
	switch {
	case err != nil && pl.cfg.Guards.DeleteGates:
		return v, refuse(c, RefusedFacts, err)
	case err != nil:
		facts = contract.CollectionFacts{Collection: c}
	}
	v.facts = facts
	if v.walk, err = pl.lin.WalkFrom(ctx, c, 1); err != nil {
		return v, lineageErr(c, err)
	}
	if err := pl.readAbove(ctx, &v); err != nil {
		return v, err
	}
	wm, err := pl.ports.Watermark.Watermark(ctx)
	v.safe, v.wmErr = wm.GlobalSafeTsUnixMs, err
	return v, nil
}

// frame is what the pure decisions of a sweep work with: when each walked
// root was superseded, which roots a token may still open, and whether the
// watermark blocks deletes.
type frame struct {
	now            int64
	gates          bool
	sup            []int64 // sup[i]: when roots[i] was superseded (MaxInt64: never)
	retained       []bool  // retained[i]: a token may still open roots[i]
	safe           int64   // global_safe_ts (MaxInt64 when unread and gates are off)
	blocked        string  // non-empty: the watermark blocks every delete
	retentionMs    int64   // lifecycle retention (0: none)
	tombstoneEvict int64   // when the head's objects count as evicted (tombstone)
	// above are the roots that exist above the head; what they reference
	// is protected (as if retained) until aboveUntil.
	above      []contract.Manifest
	aboveUntil []int64
}

// newFrame decides retention and refusals from a view (pure). A root is
// superseded when its child commits; the head only by a tombstone, at the
// CCS reservation horizon. A token may open a superseded root for
// TokenLifetime on the clocks of the query plane and the publisher; judged
// on this worker's clock that is TokenLifetime plus the clock-skew
// allowance.
func newFrame(v view, cfg Config, now int64) (frame, error) {
	roots := v.walk.Roots
	n := len(roots)
	fr := frame{now: now, gates: cfg.Guards.DeleteGates, sup: make([]int64, n), retained: make([]bool, n),
		safe: math.MaxInt64, retentionMs: v.facts.Lifecycle.RetentionMs}
	fr.sup[0] = math.MaxInt64
	if v.facts.Tombstoned && v.facts.ReservationHorizonUnixMs > 0 {
		fr.sup[0], fr.tombstoneEvict = v.facts.ReservationHorizonUnixMs, v.facts.ReservationHorizonUnixMs
	}
	for i := 1; i < n; i++ {
		fr.sup[i] = roots[i-1].CommitTsUnixMs
	}
	retain := (cfg.TokenLifetime + cfg.ClockSkew).Milliseconds()
	for i := range roots {
		fr.retained[i] = fr.sup[i] > now-retain
	}
	switch {
	case v.wmErr == nil:
		fr.safe = v.safe
	case fr.gates:
		fr.blocked = "watermark unreadable: " + v.wmErr.Error()
	}
	var err error
	if fr.aboveUntil, err = judgeLineage(v, cfg, now); err != nil {
		return fr, err
	}
	fr.above = v.above
	if fr.tombstoneEvict > 0 {
		// The tombstone supersedes every version of the collection at the
		// horizon, a root above the head included.
		for i := range fr.aboveUntil {
			fr.aboveUntil[i] = min(fr.aboveUntil[i], pinnedUntil(fr.tombstoneEvict, cfg))
		}
	}
	if !v.walk.Complete && fr.gates && roots[n-1].CommitTsUnixMs > now-retain {
		// The missing parent of the oldest root is still inside the token
		// lifetime: a retained manifest is gone. Delete nothing.
		return fr, refuse(v.c, RefusedManifest, fmt.Errorf("retained manifest v%d (parent of v%d) is missing: %w", roots[n-1].ParentVersion, roots[n-1].Version, store.ErrNotFound))
	}
	return fr, nil
}
