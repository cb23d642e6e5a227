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

// maxRootsAbove bounds the roots above the head a sweep reads.
const maxRootsAbove = 64

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

// readAbove reads every root that exists above the head, and the memory.
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
		}
	}
	keys, err := pl.rootKeysAbove(ctx, v.c, v.walk.Head.Inc(), v.walk.Head.Version)
	if err != nil {
		return err
	}
	for _, k := range keys {
		m, err := pl.rootAt(ctx, v.c, k)
		if err != nil {
			return refuse(v.c, RefusedManifest, err)
		}
		v.above, v.aboveKeys = append(v.above, m), append(v.aboveKeys, k)
	}
	return pl.readPassedAbandoned(ctx, v)
}

// readPassedAbandoned reads the confirmed abandoned roots the new lineage
// has since passed: restored to v2 and confirmed, the lineage commits a new
// v3 and v4, so the abandoned v3's root is no longer above the head, yet a
// token opened on it may still read what it references until a token
// lifetime after the confirmation (judgeLineage protects every root in
// v.above that the confirmation names until then). Without this, an
// abandoned version's rewrite output was reclaimed as a never-committed
// orphan inside that window (found by the simulation, seeds 513 and 669 of
// 1,000, restores of re-created lifetimes). A root already gone (trimmed)
// is skipped; one of another incarnation is not this lineage's.
func (pl planner) readPassedAbandoned(ctx context.Context, v *view) error {
	if v.conf == nil {
		return nil
	}
	for _, k := range v.conf.AbandonedRoots {
		inc, ver, ok := contract.RootOf(v.c, k)
		if !ok || inc != v.walk.Head.Inc() || ver > v.walk.Head.Version || slices.Contains(v.aboveKeys, k) {
			continue // above the head: listed already
		}
		m, err := pl.rootAt(ctx, v.c, k)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return refuse(v.c, RefusedManifest, err)
		}
		v.above, v.aboveKeys = append(v.above, m), append(v.aboveKeys, k)
	}
	return nil
}

// rootKeysAbove lists the root keys of c whose version is above head (roots
// sort before change parts and parts under the manifests prefix, so the
// listing stops at the first key that is not a root).
//
// Only roots of the head's incarnation count (listed under its tag): a
// root of another lifetime of the name is never above this one.
func (pl planner) rootKeysAbove(ctx context.Context, c string, incarnation, head uint64) ([]string, error) {
	if pl.ports.Lister == nil {
		return nil, nil
	}
	var keys []string
	err := pl.ports.Lister.List(ctx, contract.ManifestsPrefix(c)+contract.IncarnationTag(incarnation), func(page []Listed) error {
		for _, l := range page {
			inc, ver, ok := contract.RootOf(c, l.Key)
			if !ok {
				return ErrStopListing // roots sort before changes/ and parts/
			}
			if inc == incarnation && ver > head {
				keys = append(keys, l.Key)
			}
		}
		if len(keys) > maxRootsAbove {
			return refuse(c, RefusedRegression, fmt.Errorf("more than %d roots exist above head v%d", maxRootsAbove, head))
		}
		return nil
	})
	if errors.Is(err, ErrStopListing) {
		err = nil
	}
	if err != nil && !errors.Is(err, ErrRefused) {
		err = fmt.Errorf("list the roots of %s: %w", c, err)
	}
	return keys, err
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
// until when what each root above the head references is protected.
func judgeLineage(v view, cfg Config, now int64) (until []int64, err error) {
	head := v.walk.Head
	remembered := v.highest > head.Version || v.highest > 0 && !agrees(v, v.highest, v.highSum)
	var evidence []string // root keys above the head no publisher crash explains
	for i, m := range v.above {
		stray := m.Version == head.Version+1 && m.ParentVersion == head.Version && m.ParentChecksum == head.ManifestChecksum
		if !stray {
			evidence = append(evidence, v.aboveKeys[i])
		}
	}
	until = make([]int64, len(v.above))
	for i := range until {
		until[i] = math.MaxInt64 // while it exists: it may have been committed
	}
	if !remembered && len(evidence) == 0 {
		return until, nil
	}
	c := v.conf
	covered := c != nil && (!remembered || c.AbandonedHeadVersion == v.highest && c.AbandonedHeadChecksum == v.highSum)
	for _, k := range evidence {
		covered = covered && slices.Contains(c.AbandonedRoots, k)
	}
	if !covered {
		return nil, refuse(v.c, RefusedRegression, fmt.Errorf("head v%d is not the newest head this collection had (highest observed v%d, roots above the head %v); "+
			"no deletes until an operator confirms the new lineage (bcc confirm-lineage)", head.Version, v.highest, evidence))
	}
	for i, k := range v.aboveKeys {
		if slices.Contains(c.AbandonedRoots, k) {
			until[i] = pinnedUntil(c.ConfirmedAtUnixMs, cfg)
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
