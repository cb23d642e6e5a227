package gc

import (
	"context"
	"errors"
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
	aboveKeys []string                     // the regression evidence: roots above the head and abandoned ones below it (regression.go)
	stray     map[string]bool              // ... of them: a lone publisher's crash root one version above the head
	read      map[string]contract.Manifest // ... of them: those read so far
	highest   uint64                       // the highest head version the coordinator remembers
	highSum   string                       // ... and its checksum
	fromV     uint64                       // the head the observer advanced from over a gap (UnverifiedMemory)
	fromSum   string                       // ... and its checksum
	conf      *contract.LineageConfirmation
	// listedAbove are the root keys a listing found above the head;
	// written[i] is when S3 wrote walk.Roots[i] (0: not listed);
	// firstSeen is when the coordinator first saw the tombstone (rule 16).
	listedAbove []string
	aboveCount  int             // how many roots are above the head, exactly (listedAbove keeps at most MaxRootsAbove+1)
	listedRoots map[string]bool // every root key of the incarnation the listing found
	written     []int64
	firstSeen   int64
	confSeen    int64    // when the coordinator first saw conf (rule 16)
	page        []Listed // the whole collection prefix, when it fits one page (listonce.go)
}

// commitAt is when walk.Roots[i] committed, as far as its eviction is
// concerned (rule 16): the later of its commit_ts and its root's
// LastModified.
func (v *view) commitAt(i int) int64 {
	w := int64(0)
	if i < len(v.written) {
		w = v.written[i]
	}
	return evictedAt(v.walk.Roots[i].CommitTsUnixMs, w)
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
		w, ok, rerr := pl.retiredWalk(ctx, facts, err)
		if rerr != nil {
			return v, lineageErr(c, rerr)
		}
		if !ok {
			return v, lineageErr(c, err)
		}
		v.walk = w
	}
	if err := pl.readRoots(ctx, &v); err != nil {
		return v, err
	}
	if err := pl.readAbove(ctx, &v); err != nil {
		return v, err
	}
	wm, err := pl.ports.Watermark.Watermark(ctx)
	v.safe, v.wmErr = wm.GlobalSafeTsUnixMs, err
	return v, nil
}

// readRoots lists the incarnation's roots (their write times, the keys
// above the head) and reads when the coordinator first saw a tombstone.
func (pl planner) readRoots(ctx context.Context, v *view) error {
	var err error
	if v.page, err = pl.onePage(ctx, v.c); err != nil {
		return fmt.Errorf("list %s: %w", v.c, err)
	}
	above, written, err := pl.listRoots(ctx, v, v.walk.Head.Inc(), v.walk.Head.Version)
	if err != nil {
		return err
	}
	v.listedAbove = above
	v.listedRoots = make(map[string]bool, len(written))
	for k := range written {
		v.listedRoots[k] = true
	}
	v.written = make([]int64, len(v.walk.Roots))
	key := v.walk.Head.ManifestKey
	for i := range v.walk.Roots {
		v.written[i] = written[key]
		key = v.walk.Roots[i].ParentKey
	}
	if v.facts.Tombstoned {
		v.firstSeen = pl.now.UnixMilli() // without a record: seen now
		if pl.seen != nil {
			at, err := pl.seen(ctx, v.facts)
			if err != nil {
				return fmt.Errorf("read the first sighting of the tombstone of %s: %w", v.c, err)
			}
			v.firstSeen = at
		}
	}
	return nil
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
	// untilByKey says until when what each root of the evidence
	// references is protected; above are those protecting now (read by
	// readProtected), protected (as if retained) until aboveUntil.
	untilByKey map[string]int64
	above      []contract.Manifest
	aboveUntil []int64
	moment     moment // what the gate judges the sweep's keys at
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
	if te := tombstoneEvict(cfg, v.facts, v.firstSeen, v.commitAt(0)); te > 0 {
		fr.sup[0], fr.tombstoneEvict = te, te
	}
	for i := 1; i < n; i++ {
		fr.sup[i] = v.commitAt(i - 1)
	}
	retain := (cfg.TokenLifetime + cfg.ClockSkew).Milliseconds()
	for i := range roots {
		fr.retained[i] = fr.sup[i] > now-retain
	}
	switch {
	case v.wmErr == nil:
		fr.safe = v.safe
	case fr.gates:
		fr.blocked = BlockedWatermark + v.wmErr.Error()
	}
	fr.moment = moment{now: now, collection: v.c, incarnation: v.walk.Head.Inc(), safe: fr.safe, blocked: fr.blocked, retentionMs: fr.retentionMs}
	var err error
	if fr.untilByKey, err = judgeLineage(v, cfg, now); err != nil {
		return fr, err
	}
	if fr.tombstoneEvict > 0 {
		// The tombstone supersedes every version of the collection at the
		// horizon, a root above the head included.
		for k, u := range fr.untilByKey {
			fr.untilByKey[k] = min(u, pinnedUntil(fr.tombstoneEvict, cfg))
		}
	}
	if !v.walk.Complete && fr.gates && v.commitAt(n-1) > now-retain {
		// The missing parent of the oldest root is still inside the token
		// lifetime: a retained manifest is gone. Delete nothing.
		return fr, refuse(v.c, RefusedManifest, fmt.Errorf("retained manifest v%d (parent of v%d) is missing: %w", roots[n-1].ParentVersion, roots[n-1].Version, store.ErrNotFound))
	}
	return fr, nil
}

// retiredWalk is, for a plan only (PlanSweep: `bcc gc-plan`, the status
// snapshot), the lineage of a dropped lifetime whose head the publisher
// retired at the start of its cleanup (guard retire_first): walked from
// the newest root of the incarnation a listing finds, so the plan still
// shows what the cleanup holds (lifecycle retention) after the pointer is
// gone. ok is false when that is not the case (a head error other than
// "gone", a live collection, no root left): the plan is refused as before.
// A sweep never plans from it: its deletes rest on a head (the fence).
func (pl planner) retiredWalk(ctx context.Context, f contract.CollectionFacts, headErr error) (lineage.Walk, bool, error) {
	if !pl.retired || !f.Tombstoned || pl.ports.Lister == nil || !errors.Is(headErr, store.ErrNotFound) {
		return lineage.Walk{}, false, nil
	}
	c, inc := f.Collection, f.Inc()
	var newest []string
	var top uint64
	err := pl.ports.Lister.List(ctx, contract.ManifestsPrefix(c), func(page []Listed) error {
		for _, l := range page {
			got, ok := contract.RootKeyIncarnation(c, l.Key)
			v, vok := contract.RootKeyVersion(c, l.Key)
			switch {
			case !ok || got != inc || !vok || v < top:
			case v > top:
				top, newest = v, []string{l.Key}
			default:
				newest = append(newest, l.Key)
			}
		}
		return nil
	})
	if err != nil {
		return lineage.Walk{}, false, fmt.Errorf("list the roots of dropped %s incarnation %d: %w", c, inc, err)
	}
	for _, key := range newest {
		m, sum, err := pl.lin.RootAtSum(ctx, c, key)
		if err != nil {
			continue // not a root its key names, or gone: another candidate, or no plan
		}
		h := contract.Head{SchemaVersion: contract.SchemaVersion, Collection: c, Incarnation: m.Incarnation, Version: m.Version,
			ManifestKey: key, ManifestChecksum: sum, CommittedAtUnixMs: m.CommitTsUnixMs}
		w, err := pl.lin.WalkFromHead(ctx, h, 1)
		if err != nil {
			return w, false, err
		}
		return w, true, nil
	}
	return lineage.Walk{}, false, nil
}
