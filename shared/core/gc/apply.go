package gc

import (
	"context"
	"maps"
)

// applyRun is the accounting of one Apply: what is still deferred, what
// is confirmed, and what each trim step still waits for.
type applyRun struct {
	pl            *Plan
	rep           Report
	deferredCount int64
	deferredBytes int64
	nextDue       int64 // earliest due of debt other than a retention window
	retention     int64 // candidates held by lifecycle retention alone
	retentionDue  int64
	pending       map[uint64]int // eligible candidates per evict version not yet confirmed gone
	gates         gateProof      // the last time gates (b) and (c) were read
	fence         *fence
}

func (e *Executor) startApply(pl *Plan) *applyRun {
	a := &applyRun{pl: pl, deferredCount: int64(pl.DeferredCount), deferredBytes: pl.DeferredBytes, nextDue: pl.sweepDueUnixMs(),
		retention: int64(pl.RetentionDeferred), retentionDue: pl.RetentionDueUnixMs,
		pending: map[uint64]int{},
		fence:   &fence{lin: e.lin, c: pl.Collection, version: pl.HeadVersion, checksum: pl.HeadChecksum}}
	a.rep = Report{Collection: pl.Collection, Incarnation: pl.Incarnation, HeadVersion: pl.HeadVersion, Tombstoned: pl.Tombstoned, Blocked: pl.Blocked, AlreadyGone: pl.AlreadyGone,
		DeferredByReason: maps.Clone(pl.DeferredByReason), Deleted: []string{}}
	if a.rep.DeferredByReason == nil {
		a.rep.DeferredByReason = map[string]int{}
	}
	for _, cd := range pl.Delete {
		a.pending[cd.EvictVersion]++
	}
	return a
}

// deferAt records a candidate withdrawn at execution time.
func (a *applyRun) deferAt(cd Candidate, reason string, due int64) {
	a.rep.DeferredByReason[reason]++
	a.deferredCount++
	a.deferredBytes += cd.Entry.Size
	if reason == ReasonLifecycle {
		a.retention++
		a.retentionDue = earliest(a.retentionDue, due)
		return
	}
	a.nextDue = earliest(a.nextDue, due)
}

// finish fills in what the sweep leaves behind.
func (a *applyRun) finish(now int64) Report {
	rep := a.rep
	rep.RemainingObjects = a.deferredCount + int64(len(rep.Unconfirmed)) + int64(a.pl.OrphansYoung) + int64(a.pl.Beyond)
	rep.RemainingBytes = a.deferredBytes
	rep.NextDueUnixMs = a.nextDue
	rep.RetentionObjects, rep.RetentionDueUnixMs = a.retention, a.retentionDue
	rep.More = a.pl.Truncated && a.pl.Blocked == ""
	if (len(rep.Unconfirmed) > 0 || a.pl.Truncated) && (rep.NextDueUnixMs == 0 || rep.NextDueUnixMs > now) {
		rep.NextDueUnixMs = now // more to do at once
	}
	return rep
}

// Apply executes a plan. The plan is a proposal; the checks at the moment
// of deletion are the authority: the watermark and CCS facts are re-read
// and the time gates re-judged, and every delete call (retries included)
// rests on a proof taken at most ProofMaxAge before it: the head re-read,
// every root committed since the plan treated as retained, every key of
// the call looked up in it.
func (e *Executor) Apply(ctx context.Context, pl Plan) (Report, error) {
	a := e.startApply(&pl)
	if pl.Blocked != "" {
		return a.finish(e.now().UnixMilli()), nil
	}
	todo, ok, err := e.recheckGates(ctx, a)
	if err != nil || !ok {
		return a.finish(e.now().UnixMilli()), err
	}
	err = e.execute(ctx, a, todo)
	rep := a.finish(e.now().UnixMilli())
	if err == nil && pl.Tombstoned {
		rep.Complete = a.pendingTotal() == 0 && a.deferredCount == 0 && len(rep.Unconfirmed) == 0 && pl.OrphansYoung == 0 &&
			pl.ListingError == "" && !pl.Truncated && rep.ManifestsDeleted == pl.Roots-1 && len(a.fence.extra) == 0
		if !e.cfg.Guards.ReleaseDependencies {
			rep.Complete = true // mutation proof only
		}
	}
	return rep, err
}

func (a *applyRun) pendingTotal() int {
	n := 0
	for _, c := range a.pending {
		n += c
	}
	return n
}

// execute deletes objects, then never-committed outputs, then trims
// manifest roots oldest first (guard.ManifestBeforeObjects; with it off,
// for the mutation proof only, the trim runs first and checks nothing).
func (e *Executor) execute(ctx context.Context, a *applyRun, todo []Candidate) error {
	if !e.cfg.Guards.ManifestBeforeObjects {
		if err := e.trim(ctx, a, false); err != nil {
			return err
		}
	}
	if err := e.deleteObjects(ctx, a, todo); err != nil {
		return err
	}
	if err := e.deleteOrphans(ctx, a); err != nil {
		return err
	}
	if e.cfg.Guards.ManifestBeforeObjects {
		return e.trim(ctx, a, true)
	}
	return nil
}

// deleteObjects deletes the eligible candidates in calls of up to
// BatchSize keys, each call on a fresh proof.
func (e *Executor) deleteObjects(ctx context.Context, a *applyRun, todo []Candidate) error {
	for start := 0; start < len(todo); start += e.cfg.BatchSize {
		batch := todo[start:min(start+e.cfg.BatchSize, len(todo))]
		byKey := make(map[string]Candidate, len(batch))
		keys := make([]string, len(batch))
		for i, cd := range batch {
			byKey[cd.Entry.Key], keys[i] = cd, cd.Entry.Key
		}
		done, err := e.deleteProven(ctx, a, keys, func(ctx context.Context, keys []string) ([]string, error) {
			return e.proveObjects(ctx, a, byKey, keys)
		})
		for _, k := range done {
			a.pending[byKey[k].EvictVersion]--
		}
		a.rep.ObjectsDeleted += len(done)
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteOrphans reclaims the coordinator's never-committed outputs, each
// call on a fresh proof that no root committed since the plan names them.
func (e *Executor) deleteOrphans(ctx context.Context, a *applyRun) error {
	keys := make([]string, len(a.pl.Orphans))
	for i, o := range a.pl.Orphans {
		keys[i] = o.Key
	}
	for start := 0; start < len(keys); start += e.cfg.BatchSize {
		done, err := e.deleteProven(ctx, a, keys[start:min(start+e.cfg.BatchSize, len(keys))], func(ctx context.Context, keys []string) ([]string, error) {
			return e.proveUnreferenced(ctx, a, keys)
		})
		a.rep.OrphansDeleted += len(done)
		if err != nil {
			return err
		}
	}
	return nil
}

// trim deletes roots oldest first: for each, the parts no newer root
// references, then the root. It stops at the first root whose candidates
// are not all confirmed gone (when checkObjects) or whose deletes fail.
func (e *Executor) trim(ctx context.Context, a *applyRun, checkObjects bool) error {
	for _, st := range a.pl.Trim {
		if checkObjects && (a.pending[st.NeedsVersions[0]] > 0 || a.pending[st.NeedsVersions[1]] > 0) {
			a.rep.TrimStoppedAt = st.Version
			return nil
		}
		ok, err := e.trimStep(ctx, a, st)
		if err != nil || !ok {
			a.rep.TrimStoppedAt = st.Version
			return err
		}
	}
	return nil
}

// trimStep deletes one root's unshared parts, then the root; ok is false
// when a delete was not confirmed.
func (e *Executor) trimStep(ctx context.Context, a *applyRun, st TrimStep) (bool, error) {
	proveParts := func(ctx context.Context, keys []string) ([]string, error) {
		// A root committed since the plan may reuse a part.
		if err := a.fence.refresh(ctx); err != nil {
			return nil, err
		}
		var out []string
		for _, k := range keys {
			if !a.fence.partReferenced(k) {
				out = append(out, k)
			}
		}
		return out, nil
	}
	for start := 0; start < len(st.Parts); start += e.cfg.BatchSize {
		done, err := e.deleteProven(ctx, a, st.Parts[start:min(start+e.cfg.BatchSize, len(st.Parts))], proveParts)
		a.rep.PartsDeleted += len(done)
		if err != nil || len(a.rep.Unconfirmed) > 0 {
			return false, err
		}
	}
	done, err := e.deleteProven(ctx, a, []string{st.RootKey}, proveParts)
	a.rep.ManifestsDeleted += len(done)
	return err == nil && len(done) == 1, err
}
