package gc

import (
	"context"
	"slices"

	"github.com/searchfabric/bcc/shared/core/lineage"
)

// manifests deletes the roots oldest first, each after its parts and
// change parts that no newer root references: the lineage stays a
// contiguous chain from the head, so a crash leaves every remaining root
// findable, and the head's root goes last.
//
// Then every other manifest key of the incarnation goes (strays): a walk
// finds only the committed chain, and a publisher that lost its head CAS
// left a root and parts no head or parent names; after the release nothing
// would ever delete them.
func (r *tombRun) manifests(ctx context.Context) error {
	w, ok, _, err := r.walk(ctx)
	if err != nil {
		return err
	}
	if ok && r.e.cfg.Guards.DroppedHeadPinned && (w.Head.Version != r.p.HeadVersion || w.Head.ManifestChecksum != r.p.HeadChecksum) {
		return r.lineageMoved(w.Head.Version) // not the head whose objects went
	}
	walked := map[string]bool{}
	if ok {
		walked[w.Head.ManifestKey] = true
		for i := 0; i+1 < len(w.Roots); i++ {
			walked[w.Roots[i].ParentKey] = true
		}
	}
	// The objects of the lifetime's committed roots no walk from its head
	// finds (above a restored head, or every root when the head is gone)
	// go before any root does: those roots are their only index.
	if !r.p.StrayObjectsDone {
		if err := r.strayRootObjects(ctx, walked); err != nil {
			return err
		}
		r.p.StrayObjectsDone = true
	}
	if ok {
		if err := r.lineageRoots(ctx, w); err != nil {
			return err
		}
	}
	if err := r.strays(ctx); err != nil {
		return err
	}
	r.p.Phase = PhaseArtifacts
	return nil
}

// lineageRoots deletes the walked roots, after their parts and change
// parts: every part first (shared batches), then the roots oldest first.
// The lineage's objects are gone already (the objects phase), so a crash
// between the two leaves roots whose parts are gone (the next run's walk
// skips them); a root a partial batch leaves behind an older one that went
// is found by the strays listing that follows, which deletes every
// manifest key of the lifetime still there.
//
// The part list is the same at every run of the pinned head until a root
// goes (the walk reads the immutable roots from the head), so the cursor
// (PartsConfirmed) resumes after the parts confirmed gone. It is built
// newest root first: should an oldest root go first all the same, only the
// list's tail goes with it and the confirmed lead stays a lead. Skipping
// is never a delete: whatever a stale cursor skipped is a manifest key of
// the lifetime, which the strays listing deletes through the gate.
func (r *tombRun) lineageRoots(ctx context.Context, w lineage.Walk) error {
	var parts, roots []string
	for i := range w.Roots {
		m := &w.Roots[i]
		for _, p := range m.Parts {
			if !slices.Contains(parts, p.Key) {
				parts = append(parts, p.Key)
			}
		}
		for _, p := range m.Change.Parts {
			if !slices.Contains(parts, p.Key) {
				parts = append(parts, p.Key)
			}
		}
	}
	for i := len(w.Roots) - 1; i >= 0; i-- {
		key := w.Head.ManifestKey
		if i > 0 {
			key = w.Roots[i-1].ParentKey
		}
		roots = append(roots, key)
	}
	skip := min(max(r.p.PartsConfirmed, 0), len(parts))
	left := parts[skip:]
	n, err := r.deleteKeys(ctx, left, r.subjects(kindPart, left))
	r.p.PartsDeleted += int64(n)
	r.p.PartsConfirmed = skip + n
	if err != nil {
		return err
	}
	n, err = r.deleteKeys(ctx, roots, r.subjects(kindRoot, roots))
	r.p.RootsDeleted += int64(n)
	return err
}

// enterManifests starts the manifests phase with its part cursor at the
// start (the head it walks is the one the objects phase cleaned from).
func (r *tombRun) enterManifests() {
	r.p.Phase, r.p.PartsConfirmed = PhaseManifests, 0
}

func (r *tombRun) artifacts(ctx context.Context) error {
	keys := r.facts.ControlArtifacts
	n, err := r.deleteKeys(ctx, keys, r.subjects(kindArtifact, keys))
	r.p.ArtifactsDeleted += int64(n)
	if err != nil {
		return err
	}
	r.p.Phase = PhaseHead
	if r.e.cfg.Guards.RetireFirst {
		r.p.Phase = PhaseWaiting // the head went first
	}
	return nil
}
