package gc

import (
	"context"
	"maps"
	"slices"
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
	gates         readings       // the last reading of gates (b) and (c)
	t             tally          // what the gate's sender did
	fence         *fence
}

func (e *Executor) startApply(pl *Plan) *applyRun {
	a := &applyRun{pl: pl, deferredCount: int64(pl.DeferredCount), deferredBytes: pl.DeferredBytes, nextDue: pl.sweepDueUnixMs(),
		retention: int64(pl.RetentionDeferred), retentionDue: pl.RetentionDueUnixMs,
		pending: map[uint64]int{},
		fence:   &fence{lin: e.lin, c: pl.Collection, version: pl.HeadVersion, checksum: pl.HeadChecksum, pinned: pl.Tombstoned && e.cfg.Guards.DroppedHeadPinned}}
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
	rep.DeleteCalls, rep.KeysSent, rep.Retries, rep.Proofs, rep.StaleProofs = a.t.calls, a.t.keysSent, a.t.retries, a.t.proofs, a.t.stale
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
// manifest roots oldest first: the gate holds a part or root while an
// object it indexes is not confirmed gone (subject.needs, set by
// proveManifests; guard.ManifestBeforeObjects; with it off, for the
// mutation proof only, the trim runs first and the gate checks nothing).
func (e *Executor) execute(ctx context.Context, a *applyRun, todo []Candidate) error {
	if !e.cfg.Guards.ManifestBeforeObjects {
		if err := e.trim(ctx, a); err != nil {
			return err
		}
	}
	if err := e.deleteObjects(ctx, a, todo); err != nil {
		return err
	}
	if e.cfg.Guards.ManifestBeforeObjects {
		return e.trim(ctx, a)
	}
	return nil
}

// deleteObjects deletes the eligible candidates and the never-committed
// outputs, batched together (calls of up to BatchSize keys, one budget
// take and one proof per batch).
func (e *Executor) deleteObjects(ctx context.Context, a *applyRun, todo []Candidate) error {
	byKey := make(map[string]Candidate, len(todo))
	keys := make([]string, 0, len(todo)+len(a.pl.Orphans))
	for _, cd := range todo {
		byKey[cd.Entry.Key] = cd
		keys = append(keys, cd.Entry.Key)
	}
	written := make(map[string]int64, len(a.pl.Orphans))
	for _, o := range a.pl.Orphans {
		if _, dup := byKey[o.Key]; !dup {
			written[o.Key] = o.LastModifiedUnixMs
			keys = append(keys, o.Key)
		}
	}
	prove := func(ctx context.Context, keys []string) ([]string, *Proof, error) {
		var objs, outs []string
		for _, k := range keys {
			if _, ok := byKey[k]; ok {
				objs = append(objs, k)
			} else {
				outs = append(outs, k)
			}
		}
		okObjs, p1, err := e.proveObjects(ctx, a, byKey, objs)
		if err != nil {
			return nil, nil, err
		}
		okOuts, p2, err := e.proveOutputs(ctx, a, written, outs)
		if err != nil {
			return nil, nil, err
		}
		return append(okObjs, okOuts...), older(p1, p2), nil
	}
	done, err := e.deleteAll(ctx, a, keys, prove)
	for _, k := range done {
		if cd, ok := byKey[k]; ok {
			a.pending[cd.EvictVersion]--
			a.rep.ObjectsDeleted++
		} else {
			a.rep.OrphansDeleted++
		}
	}
	return err
}

// older is the proof resting on the older readings.
func older(p, q *Proof) *Proof {
	if q.at.Before(p.at) {
		return q
	}
	return p
}

// deleteAll deletes keys in batches of up to BatchSize through the gate's
// sender and records what was not confirmed.
func (e *Executor) deleteAll(ctx context.Context, a *applyRun, keys []string, prove prover) ([]string, error) {
	var done []string
	for start := 0; start < len(keys); start += e.cfg.BatchSize {
		b := batch{collection: a.pl.Collection, keys: keys[start:min(start+e.cfg.BatchSize, len(keys))], prove: prove, t: &a.t}
		ok, unconfirmed, err := e.deleteProven(ctx, b)
		done = append(done, ok...)
		a.rep.Deleted = append(a.rep.Deleted, ok...)
		a.unconfirmed(unconfirmed)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func (a *applyRun) unconfirmed(m map[string]string) {
	if len(m) == 0 {
		return
	}
	if a.rep.Unconfirmed == nil {
		a.rep.Unconfirmed = map[string]string{}
	}
	maps.Copy(a.rep.Unconfirmed, m)
}

// trim deletes roots oldest first, each after its parts that no newer root
// references, in a pipeline: call i carries the parts of step i and the
// root of step i-1 (whose parts the call before confirmed), so a root is
// gone only after every older one, and parts are gone only from the oldest
// roots (the next walk reads every newer root whole). One budget take
// covers the trim. It stops at the first root the gate holds — one whose
// candidates (or an older step's) are not all confirmed gone
// (trimNeeds), one still referenced — whose parts are not confirmed, or
// whose delete fails.
func (e *Executor) trim(ctx context.Context, a *applyRun) error {
	steps := a.pl.Trim
	if len(steps) == 0 {
		return nil
	}
	total := len(steps)
	for _, st := range steps {
		total += len(st.Parts)
	}
	err := e.pacer.Wait(ctx, a.pl.Collection, total)
	e.waited()
	if err != nil {
		return err
	}
	for i := 0; i <= len(steps); i++ {
		if stop, err := e.trimCall(ctx, a, steps, i); err != nil || stop {
			return err
		}
	}
	return nil
}

// trimCall deletes the parts of steps[i] (if any) and the root of
// steps[i-1] (if any); stop is true when one of them was not confirmed.
func (e *Executor) trimCall(ctx context.Context, a *applyRun, steps []TrimStep, i int) (stop bool, err error) {
	kinds := map[string]keyKind{}
	step := map[string]int{} // the step whose objects (and every older step's) a key waits for
	var keys []string
	if i > 0 {
		keys = append(keys, steps[i-1].RootKey)
		kinds[steps[i-1].RootKey], step[steps[i-1].RootKey] = kindRoot, i-1
	}
	if i < len(steps) {
		for _, k := range steps[i].Parts {
			if _, dup := kinds[k]; !dup {
				keys, kinds[k], step[k] = append(keys, k), kindPart, i
			}
		}
	}
	prove := func(ctx context.Context, keys []string) ([]string, *Proof, error) {
		return e.proveManifests(ctx, a, kinds, keys, func(k string) int { return a.trimNeeds(steps, step[k]) })
	}
	var done []string
	for start := 0; start < len(keys); start += e.cfg.BatchSize {
		b := batch{collection: a.pl.Collection, keys: keys[start:min(start+e.cfg.BatchSize, len(keys))], prove: prove, t: &a.t, prepaid: true}
		ok, unconfirmed, err := e.deleteProven(ctx, b)
		done = append(done, ok...)
		a.rep.Deleted = append(a.rep.Deleted, ok...)
		a.unconfirmed(unconfirmed)
		if err != nil {
			return true, err
		}
	}
	for _, k := range done {
		if kinds[k] == kindRoot {
			a.rep.ManifestsDeleted++
		} else {
			a.rep.PartsDeleted++
		}
	}
	if i > 0 && !slices.Contains(done, steps[i-1].RootKey) {
		a.rep.TrimStoppedAt = steps[i-1].Version
		return true, nil
	}
	if i < len(steps) && len(done)-min(i, 1) < countUnique(steps[i].Parts) {
		a.rep.TrimStoppedAt = steps[i].Version
		return true, nil
	}
	return false, nil
}

// trimNeeds is how many candidates the parts and root of steps[i] wait
// for: those not yet confirmed gone that steps[0..i] alone index or
// reference (a root goes only after every older one, so an older step's
// objects hold it too). The gate holds a key while it is not 0
// (judgeManifest, guard.ManifestBeforeObjects).
func (a *applyRun) trimNeeds(steps []TrimStep, i int) int {
	n := 0
	seen := map[uint64]bool{}
	for _, st := range steps[:i+1] {
		for _, v := range st.NeedsVersions {
			if !seen[v] {
				seen[v] = true
				n += a.pending[v]
			}
		}
	}
	return n
}

func countUnique(keys []string) int {
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	return len(seen)
}
