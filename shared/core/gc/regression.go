package gc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// Head regression (guard.HeadRegression). A head whose version is below
// the highest version ever seen for the collection was put back (a
// restore, a rollback, a mistake): the newer versions' objects are not in
// the walked lineage, yet a token opened on a newer head may still read
// them. "Highest ever seen" lives in two places, so that losing the
// coordinator's disposable memory never turns a refusal into deletes:
//
//   - the memory: the highest head version the observer recorded;
//   - the bucket: roots that exist above the head (listed from the
//     manifests prefix, each read and checked against its key).
//
// The memory also tells a regression the head has caught up with again: a
// remembered head whose version the walked lineage holds with other
// content (the lineage was replaced below it).
//
// One root exactly one version above the head whose parent is the head is
// what a publisher leaves when it wrote a root and then lost or never made
// its head CAS; it alone is not a regression, but what it references is
// protected while it exists. Anything else above the head is a regression:
// GC deletes nothing for the collection until an operator confirms the new
// lineage (contract.LineageConfirmation names every root and the
// remembered head it abandons, so a later regression needs a new
// confirmation), and then still keeps what the abandoned roots reference
// for a token lifetime after the confirmation.

// MaxRootsAbove is the real bound of a regression's evidence: the roots
// of the head's lifetime that exist above the head, plus the abandoned
// roots the new lineage has passed, counted exactly over every listing
// page. A confirmation names every one of them
// (contract.MaxAbandonedRoots), so more than this cannot be confirmed:
// GC refuses, naming the count, until the owner removes abandoned roots.
const MaxRootsAbove = contract.MaxAbandonedRoots

// maxReads bounds the read phases of one sweep (a head that moves under
// every one of them fails the task, which is retried; nothing is deleted).
const maxReads = 4

// ErrHeadMoving: the head moved during every read phase of a sweep. The
// sweep deleted nothing and is not a refusal: its task is retried.
var ErrHeadMoving = errors.New("head moving during the sweep's reads")

// headMovedSince reports whether a view that shows a head regression was
// read on a head that has since moved: the head is read again (after the
// memory and the listing of the roots above the walked head).
//
// A sweep reads the head (the walk) before the memory and the roots above
// it, and the head may move forward in between: the publisher commits v6
// and the observer records it after the sweep read v5, or two commits
// leave roots v6 and v7 above v5 (v7's parent is not the walked head). The
// view then looks like a regression that never happened, and refusing it
// would page an operator for nothing. What the view holds was recorded
// before the second head read, so if that read still finds the walked
// head, the head really is below what was seen (or below roots that
// exist): a regression, refused. If the head moved, the view is stale and
// is read again on the new head, whose judgement is that of any fresh
// sweep: nothing is decided on the stale view.
//
// A head that cannot be read again answers like the walk's read would: a
// definite failure refuses (manifest), a transient one fails the task.
func (pl planner) headMovedSince(ctx context.Context, v view) (bool, error) {
	if !pl.cfg.Guards.HeadRegression {
		return false, nil
	}
	if _, err := judgeLineage(v, pl.cfg, 0); err == nil {
		return false, nil // no regression shown: judged as read
	}
	h, err := pl.lin.Head(ctx, v.c)
	if err != nil {
		return false, lineageErr(v.c, err)
	}
	w := v.walk.Head
	return h.ManifestKey != w.ManifestKey || h.Version != w.Version || h.ManifestChecksum != w.ManifestChecksum || h.Inc() != w.Inc(), nil
}

// readAbove reads the memory and the regression evidence: the key of
// every root of the head's lifetime above the head (listed, every page),
// the roots one version above it (read: a lone one whose parent is the
// head is a publisher's crash, not a regression), and the abandoned roots
// the new lineage passed (below the head: read along the abandoned
// lineage, from the remembered head and from the lowest roots above the
// head down to where it meets the walked lineage, and the confirmed ones
// that still exist). Nothing else is read here: roots above the head are
// read later only while they protect what they reference (readProtected).
func (pl planner) readAbove(ctx context.Context, v *view) error {
	if !pl.cfg.Guards.HeadRegression {
		return nil
	}
	if m := pl.ports.Memory; m != nil {
		var err error
		if v.highest, v.highSum, err = m.HighestObserved(ctx, v.c, v.walk.Head.Inc()); err != nil {
			return fmt.Errorf("read the highest observed version of %s: %w", v.c, err)
		}
		conf, ok, err := m.LineageConfirmation(ctx, v.c, v.walk.Head.Inc())
		if err != nil {
			return fmt.Errorf("read the lineage confirmation of %s: %w", v.c, err)
		}
		// A confirmation of another lifetime of the name answers nothing
		// this one shows (guard.LineageIncarnation): as if none existed.
		if ok && (conf.Inc() == v.walk.Head.Inc() || !pl.cfg.Guards.LineageIncarnation) {
			v.conf = &conf
			if v.confSeen, err = pl.confirmationSeen(ctx, conf); err != nil {
				return fmt.Errorf("read the first sighting of the lineage confirmation of %s: %w", v.c, err)
			}
		}
		if um, ok := m.(UnverifiedMemory); ok {
			fv, fs, err := um.UnverifiedFrom(ctx, v.c, v.walk.Head.Inc())
			if err != nil {
				return fmt.Errorf("read the unverified lineage of %s: %w", v.c, err)
			}
			v.fromV, v.fromSum = fv, fs
			// A recorded head that agrees with the walked lineage, advanced
			// from over a gap the lineage does not hold: that head is the
			// one the coordinator remembers and the lineage abandoned.
			if fv > 0 && (v.highest == 0 || v.highest <= v.walk.Head.Version && agrees(*v, v.highest, v.highSum)) && !agrees(*v, fv, fs) {
				v.highest, v.highSum = fv, fs
			}
		}
	}
	v.read = map[string]contract.Manifest{}
	v.stray = map[string]bool{}
	head := v.walk.Head
	lowest := uint64(0)
	for _, k := range v.listedAbove {
		if _, ver, _ := contract.RootOf(v.c, k); lowest == 0 || ver < lowest {
			lowest = ver
		}
	}
	var starts []string
	for _, k := range v.listedAbove {
		if _, ver, _ := contract.RootOf(v.c, k); ver != lowest {
			continue
		}
		m, err := pl.rootAt(ctx, v.c, k)
		if err != nil {
			return refuse(v.c, RefusedManifest, err)
		}
		v.read[k] = m
		if m.Version == head.Version+1 && m.ParentVersion == head.Version && m.ParentChecksum == head.ManifestChecksum {
			v.stray[k] = true
			continue
		}
		starts = append(starts, m.ParentKey)
	}
	if v.highest > 0 && v.highest <= head.Version && !agrees(*v, v.highest, v.highSum) {
		starts = append(starts, contract.ManifestKey(v.c, head.Inc(), v.highest, v.highSum))
	}
	v.aboveKeys = slices.Clone(v.listedAbove)
	passed, err := pl.passedChain(ctx, v, starts)
	if err != nil {
		return err
	}
	v.aboveKeys = appendNew(v.aboveKeys, passed...)
	if v.conf != nil {
		// The confirmed abandoned roots the new lineage has passed, while
		// they exist (listed): they protect what they reference for a
		// token lifetime after the confirmation.
		for _, k := range v.conf.AbandonedRoots {
			if inc, ver, ok := contract.RootOf(v.c, k); ok && inc == head.Inc() && ver <= head.Version && v.listedRoots[k] {
				v.aboveKeys = appendNew(v.aboveKeys, k)
			}
		}
	}
	if n := len(v.aboveKeys); n > MaxRootsAbove || v.aboveCount > MaxRootsAbove {
		return refuse(v.c, RefusedRegression, fmt.Errorf("%d roots exist above head v%d (and %d abandoned roots below it): more than the %d a lineage confirmation can name; "+
			"no deletes until the owner removes abandoned roots", v.aboveCount, head.Version, len(passed), MaxRootsAbove))
	}
	return nil
}

// confirmationSeen is when the coordinator first saw conf (now when the
// planner has no way to know).
func (pl planner) confirmationSeen(ctx context.Context, conf contract.LineageConfirmation) (int64, error) {
	if pl.confSeen == nil {
		return pl.now.UnixMilli(), nil
	}
	return pl.confSeen(ctx, conf)
}

// confirmedAt is when a confirmation's protection of the abandoned roots
// starts (rule 16): the later of the time the operator's machine wrote
// into it and when the coordinator first saw it
// (guard.ConfirmationSighting; off: the operator's time alone).
func confirmedAt(cfg Config, c *contract.LineageConfirmation, seen int64) int64 {
	if !cfg.Guards.ConfirmationSighting {
		return c.ConfirmedAtUnixMs
	}
	return max(c.ConfirmedAtUnixMs, seen)
}

// appendNew appends the keys not in keys yet.
func appendNew(keys []string, more ...string) []string {
	for _, k := range more {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// passedChain walks the abandoned lineage down from each start key while
// it is not the walked lineage's (nor older than the walk reaches): those
// roots are abandoned versions the new lineage has passed. A root gone
// (removed) ends its chain. Reads are bounded by MaxRootsAbove.
func (pl planner) passedChain(ctx context.Context, v *view, starts []string) ([]string, error) {
	inWalk := map[string]bool{v.walk.Head.ManifestKey: true}
	for _, m := range v.walk.Roots {
		inWalk[m.ParentKey] = true
	}
	oldest := v.walk.Roots[len(v.walk.Roots)-1].Version
	var out []string
	seen := map[string]bool{}
	for _, k := range starts {
		for k != "" && !inWalk[k] && !seen[k] {
			inc, ver, ok := contract.RootOf(v.c, k)
			if !ok || inc != v.walk.Head.Inc() || ver < oldest || ver > v.walk.Head.Version {
				break
			}
			seen[k] = true
			if len(out) >= MaxRootsAbove {
				return out, refuse(v.c, RefusedRegression, fmt.Errorf("more than %d abandoned roots below head v%d: more than a lineage confirmation can name", MaxRootsAbove, v.walk.Head.Version))
			}
			m, err := pl.rootAt(ctx, v.c, k)
			if errors.Is(err, store.ErrNotFound) {
				break
			}
			if err != nil {
				return out, refuse(v.c, RefusedManifest, err)
			}
			v.read[k] = m
			out = append(out, k)
			k = m.ParentKey
		}
	}
	return out, nil
}

// listRoots lists the root keys of c of the head's incarnation (roots
// sort before change parts and parts under the manifests prefix, so the
// listing stops at the first key that is not a root; every page is read up
// to there, whatever its size): the keys above the head, counted exactly
// (v.aboveCount), and when S3 wrote every root listed (rule 16: a commit's
// eviction time is never before its root exists).
//
// Only roots of the head's incarnation count (listed under its tag): a
// root of another lifetime of the name is never above this one.
func (pl planner) listRoots(ctx context.Context, v *view, incarnation, head uint64) (above []string, written map[string]int64, err error) {
	c := v.c
	lister := pl.lister(v)
	if lister == nil {
		return nil, nil, nil
	}
	written = map[string]int64{}
	err = lister.List(ctx, contract.ManifestsPrefix(c)+contract.IncarnationTag(incarnation), func(page []Listed) error {
		for _, l := range page {
			inc, ver, ok := contract.RootOf(c, l.Key)
			if !ok {
				return ErrStopListing // roots sort before changes/ and parts/
			}
			written[l.Key] = l.LastModified.UnixMilli()
			if inc == incarnation && ver > head {
				// Every one is counted; at most one past the bound is
				// kept (readAbove refuses beyond it).
				v.aboveCount++
				if len(above) <= MaxRootsAbove {
					above = append(above, l.Key)
				}
			}
		}
		if len(above) > 64 && pl.cfg.Guards.HeadRegression && !pl.cfg.Guards.RegressionAtScale {
			// The old bound (mutation proof only): refused before any
			// confirmation is judged, naming no roots.
			return refuse(c, RefusedRegression, fmt.Errorf("more than %d roots exist above head v%d", 64, head))
		}
		return nil
	})
	if errors.Is(err, ErrStopListing) {
		err = nil
	}
	if err != nil && !errors.Is(err, ErrRefused) {
		err = fmt.Errorf("list the roots of %s: %w", c, err)
	}
	return above, written, err
}

// readProtected reads the roots of the evidence that protect what they
// reference now (fr.aboveUntil > now: a publisher's crash root while it
// exists, a confirmed abandoned root for a token lifetime after the
// confirmation) into fr.above. A root gone protects nothing.
func (pl planner) readProtected(ctx context.Context, v *view, fr *frame) error {
	for _, k := range v.aboveKeys {
		until := fr.untilByKey[k]
		if until <= fr.now {
			continue
		}
		m, ok := v.read[k]
		if !ok {
			var err error
			m, err = pl.rootAt(ctx, v.c, k)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return refuse(v.c, RefusedManifest, err)
			}
		}
		fr.above, fr.aboveUntil = append(fr.above, m), append(fr.aboveUntil, until)
	}
	return nil
}

// rootAt reads a root no head or parent names: its key must be the root
// key of its own content.
func (pl planner) rootAt(ctx context.Context, c, key string) (contract.Manifest, error) {
	b, err := lineage.GetLimited(ctx, pl.ports.Objects, "manifest", key, contract.MaxRootBytes)
	if err != nil {
		return contract.Manifest{}, fmt.Errorf("read root %s above the head: %w", key, err)
	}
	m, err := contract.DecodeManifest(key, b)
	if err != nil {
		return m, err
	}
	if want := contract.ManifestKey(c, m.Inc(), m.Version, contract.Checksum(b)); m.Collection != c || want != key {
		return m, fmt.Errorf("root %s above the head is not the root of its content (%s): %w", key, want, contract.ErrChecksumMismatch)
	}
	return m, nil
}

// judgeLineage decides from a view whether the head regressed (pure), and
// until when what each root of the evidence references is protected (by
// key; a root not named is not protected).
func judgeLineage(v view, cfg Config, now int64) (until map[string]int64, err error) {
	head := v.walk.Head
	remembered := v.highest > head.Version || v.highest > 0 && !agrees(v, v.highest, v.highSum)
	var evidence []string // root keys no publisher crash explains
	until = make(map[string]int64, len(v.aboveKeys))
	for _, k := range v.aboveKeys {
		until[k] = math.MaxInt64 // while it exists: it may have been committed
		if !v.stray[k] {
			evidence = append(evidence, k)
		}
	}
	if !remembered && len(evidence) == 0 {
		return until, nil
	}
	c := v.conf
	covered := c != nil && (!remembered || c.AbandonedHeadVersion == v.highest && c.AbandonedHeadChecksum == v.highSum)
	named := map[string]bool{}
	if c != nil {
		for _, k := range c.AbandonedRoots {
			named[k] = true
		}
	}
	missing := 0
	for _, k := range evidence {
		if !named[k] {
			missing++
		}
	}
	if !covered || missing > 0 {
		first := evidence[:min(len(evidence), 3)]
		return nil, refuse(v.c, RefusedRegression, fmt.Errorf("head v%d is not the newest head this collection had (highest observed v%d, %d roots above the head or abandoned below it, %d not confirmed, the first %v); "+
			"no deletes until an operator confirms the new lineage (bcc confirm-lineage)", head.Version, v.highest, len(evidence), missing, first))
	}
	for _, k := range v.aboveKeys {
		if named[k] {
			until[k] = pinnedUntil(confirmedAt(cfg, c, v.confSeen), cfg)
		}
	}
	return until, nil
}

// agrees reports whether the walked lineage holds version with checksum,
// or does not reach back to it (nothing to compare).
func agrees(v view, version uint64, checksum string) bool {
	sum := v.walk.Head.ManifestChecksum
	for _, m := range v.walk.Roots {
		if m.Version == version {
			return sum == checksum
		}
		sum = m.ParentChecksum
	}
	return true
}

// ConfirmationFor is the confirmation an operator records for what a plan
// saw (`bcc confirm-lineage`): the plan's head is the truth; every root
// above it and the highest observed head, unless it is the head's own
// lineage, are abandoned. It is for the plan's incarnation (the head's).
// ok is false when there is nothing to confirm.
func ConfirmationFor(p Plan, by, reason string, now time.Time) (contract.LineageConfirmation, bool) {
	inc := p.Incarnation
	if contract.Lifetime(inc) == 1 {
		inc = 0 // the first lifetime is written as absent
	}
	c := contract.LineageConfirmation{SchemaVersion: contract.SchemaVersion, Collection: p.Collection, Incarnation: inc, HeadVersion: p.HeadVersion,
		HeadChecksum: p.HeadChecksum, AbandonedRoots: p.RootsAbove, ConfirmedBy: by, ConfirmedAtUnixMs: now.UnixMilli(), Reason: reason}
	if c.AbandonedRoots == nil {
		c.AbandonedRoots = []string{}
	}
	if p.HighestObserved > 0 && (p.HighestObserved != p.HeadVersion || p.HighestObservedChecksum != p.HeadChecksum) {
		c.AbandonedHeadVersion, c.AbandonedHeadChecksum = p.HighestObserved, p.HighestObservedChecksum
	}
	return c, p.HeadVersion > 0 && (len(c.AbandonedRoots) > 0 || c.AbandonedHeadVersion > 0)
}
