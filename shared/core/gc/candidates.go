package gc

import (
	"context"
	"errors"
	"slices"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// candidates streams every object the walked lineage's changes removed
// (inline or in change parts, one part at a time), oldest root first, and for a tombstone every object the head still
// references (evicted by the tombstone). Each is looked up exactly in the
// roots that matter (I/O) and then judged (decide, pure). Memory: the
// eligible candidates, at most twice MaxSweepCandidates (see bound).
func (pl planner) candidates(ctx context.Context, v *view, fr *frame, p *Plan) error {
	roots := v.walk.Roots
	for i := len(roots) - 1; i >= 0; i-- {
		err := pl.lin.EachChange(ctx, &roots[i], contract.ChangeRemoved, func(o contract.ObjectEntry) error {
			if p.Truncated {
				return nil
			}
			cd := Candidate{Entry: o, EvictVersion: roots[i].Version, EvictTsUnixMs: v.commitAt(i)}
			return pl.consider(ctx, v, fr, p, cd, i)
		})
		if trimming(err, fr, i) {
			continue // the trim deletes this root: its change parts went after every object they name
		}
		if err != nil {
			return err
		}
		if p.Truncated {
			return nil
		}
	}
	if !v.facts.Tombstoned {
		return nil
	}
	return pl.lin.Each(ctx, &roots[0], nil, func(o contract.ObjectEntry) error {
		if p.Truncated {
			return nil
		}
		return pl.consider(ctx, v, fr, p, Candidate{Entry: o, EvictVersion: 0, EvictTsUnixMs: fr.sup[0]}, -1)
	})
}

// trimming reports whether err is a change part of walked root i found
// gone while the root is one the trim deletes (no token can open it, not
// the head): the trim deletes a root's parts only after every object its
// change names (and its child's) is confirmed gone, then the root, so a
// crash in between leaves exactly this; anything else fails closed.
func trimming(err error, fr *frame, i int) bool {
	return err != nil && errors.Is(err, store.ErrNotFound) && i > 0 && !fr.retained[i]
}

// consider looks one candidate up and records its verdict. evicted is the
// index of the root that removed it (-1: the tombstone, newer than all).
func (pl planner) consider(ctx context.Context, v *view, fr *frame, p *Plan, cd Candidate, evicted int) error {
	r, err := pl.lookup(ctx, v.walk.Roots, fr, cd.Entry.Key, evicted)
	if err != nil {
		return err
	}
	vd := decide(cd, r, fr, pl.cfg)
	if !r.newer && fr.retentionMs > 0 {
		p.lifecycleDue = max(p.lifecycleDue, satAddMs(cd.Entry.MaxTsUnixMs, satAddMs(fr.retentionMs, pl.cfg.ClockSkew.Milliseconds())))
	}
	switch {
	case vd.skip:
	case vd.reason != "":
		p.deferCandidate(cd, vd.reason, vd.due)
	default:
		p.Delete = append(p.Delete, cd)
		if len(p.Delete) >= 2*pl.cfg.MaxSweepCandidates {
			pl.bound(ctx, v, p)
		}
	}
	return nil
}

// bound keeps the sweep's deletes within MaxSweepCandidates without
// letting candidates that are already gone use up the bound: once twice
// the bound are collected, they are checked against a listing of the data
// prefix (dropGone) and, if more than the bound still exist, the first
// MaxSweepCandidates (stream order) are kept and the rest is left to the
// next sweep (truncate). Without this a backlog whose first
// MaxSweepCandidates eligible candidates an earlier sweep deleted stops
// every later sweep at the same place: nothing is deleted, and the roots
// behind them are never trimmed (their candidates are never all judged in
// one sweep). A check that does not end the stream dropped at least
// MaxSweepCandidates gone candidates, so a sweep lists the prefix once more
// per MaxSweepCandidates candidates already gone, at most.
func (pl planner) bound(ctx context.Context, v *view, p *Plan) {
	if err := pl.dropGone(ctx, v, p); err != nil {
		// Nothing is dropped: the first MaxSweepCandidates are kept (the
		// final scanData reports the listing error).
		p.truncate(v.walk.Roots, pl.cfg.MaxSweepCandidates)
		return
	}
	if len(p.Delete) > pl.cfg.MaxSweepCandidates {
		p.truncate(v.walk.Roots, pl.cfg.MaxSweepCandidates)
	}
}

// dropGone drops the deletes a listing of the data prefix does not show
// (already gone: counted in AlreadyGone, and as confirmed for the trim, as
// scanData does). A listing only ever removes a delete, never adds one.
func (pl planner) dropGone(ctx context.Context, v *view, p *Plan) error {
	lister := pl.lister(v)
	if lister == nil {
		return nil
	}
	exists := make(map[string]bool, len(p.Delete))
	for _, cd := range p.Delete {
		exists[cd.Entry.Key] = false
	}
	err := lister.List(ctx, contract.DataPrefix(v.c), func(page []Listed) error {
		for _, l := range page {
			if _, ok := exists[l.Key]; ok {
				exists[l.Key] = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := len(p.Delete)
	p.Delete = slices.DeleteFunc(p.Delete, func(cd Candidate) bool { return !exists[cd.Entry.Key] })
	p.AlreadyGone += n - len(p.Delete)
	return nil
}

// truncate keeps the first n deletes (stream order: oldest root first)
// and leaves the rest to the next sweep. The versions from the first one
// left behind up to the head (and the tombstone) are not fully judged in
// this sweep, so none of their roots is trimmed, and streaming stops.
func (p *Plan) truncate(roots []contract.Manifest, n int) {
	if len(p.Delete) <= n {
		return
	}
	p.Truncated = true
	first := -1 // the tombstone's eviction: newer than every root
	if v := p.Delete[n].EvictVersion; v != 0 {
		for i := range roots {
			if roots[i].Version == v {
				first = i
			}
		}
	}
	p.holdFrom(roots, first)
	p.Beyond += len(p.Delete) - n
	p.Delete = p.Delete[:n:n]
}

// lookup asks the roots that can tell whether the candidate's eviction is
// its newest event (the roots newer than it: any of them holding the key
// means it was re-added, and a later event decides) and whether a manifest
// a token may still open references it (the retained roots, exact lookups;
// one part read per root, parts cached by checksum).
func (pl planner) lookup(ctx context.Context, roots []contract.Manifest, fr *frame, key string, evicted int) (refs, error) {
	r := refs{pinnedDue: -1}
	for j := range roots {
		newer := j < evicted
		if j == evicted || !newer && (!fr.gates || !fr.retained[j]) {
			continue
		}
		_, found, err := pl.lin.Lookup(ctx, &roots[j], key)
		if err != nil {
			return r, err
		}
		switch {
		case found && newer:
			r.newer = true
			return r, nil
		case found:
			r.pinnedDue = max(r.pinnedDue, pinnedUntil(fr.sup[j], pl.cfg))
		}
	}
	for j := range fr.above {
		if !fr.gates || fr.aboveUntil[j] <= fr.now {
			continue
		}
		_, found, err := pl.lin.Lookup(ctx, &fr.above[j], key)
		if errors.Is(err, store.ErrNotFound) {
			continue // its part is gone: it protects nothing there
		}
		if err != nil {
			return r, err
		}
		if found {
			r.pinnedDue = max(r.pinnedDue, fr.aboveUntil[j])
		}
	}
	return r, nil
}

// holdFrom marks every version from roots[i] to the head (and the
// tombstone) as not fully judged: none of their roots is trimmed.
func (p *Plan) holdFrom(roots []contract.Manifest, i int) {
	for j := i; j >= 0; j-- {
		p.held[roots[j].Version] = true
	}
	p.held[0] = true
}
