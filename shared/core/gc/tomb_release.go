package gc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/searchfabric/bcc/shared/contract"
)

// dependencies evaluates the release dependency graph of the incarnation.
func (r *tombRun) dependencies() []contract.Dependency {
	now := r.e.now().UnixMilli()
	state := func(ok bool) string {
		if ok {
			return contract.DependencyConfirmed
		}
		return contract.DependencyPending
	}
	cleaned := r.p.Phase == PhaseWaiting || r.p.Phase == PhaseDone
	// Confirmed only by what a listing no longer finds: phases that ran to
	// their end say nothing about a key no walk names (a publisher's
	// uncommitted root) or one written after its phase.
	left := r.p.Left
	gone := func(n func(*TombstoneLeft) int64) bool { return cleaned && left != nil && n(left) == 0 }
	leftEvidence := "; nothing of the incarnation listed"
	if left == nil {
		leftEvidence = "; not yet listed"
	} else if !left.none() {
		leftEvidence = fmt.Sprintf("; listed still: %d manifest keys, %d outputs, %d data objects, %d artifacts (%s)", left.Manifests, left.Outputs, left.Data, left.Artifacts, left.First)
	}
	// The horizon is CCS's instant; this function's clock may run up to
	// ClockSkew ahead of it, so the horizon counts as passed only that much
	// later (the sim found releases 7-13 s early with a skewed clock).
	horizon := r.releaseAfter()
	horizonOK := now >= horizon
	if !r.e.cfg.Guards.ReleaseHorizon {
		horizonOK = true // mutation proof only
	}
	pending := slices.Clone(r.facts.PendingPreconditions)
	return []contract.Dependency{
		{Name: contract.DepObjects, State: state(gone(func(l *TombstoneLeft) int64 { return l.Outputs + l.Data })), Evidence: fmt.Sprintf("%d objects and %d never-committed outputs deleted or already gone over %d runs (%d outputs still young)%s", r.p.ObjectsDeleted, r.p.OutputsDeleted, r.p.Runs, r.p.YoungOutputs, leftEvidence)},
		{Name: contract.DepManifests, State: state(gone(func(l *TombstoneLeft) int64 { return l.Manifests })), Evidence: fmt.Sprintf("%d roots, %d parts, %d uncommitted manifest keys deleted; head retired by the publisher: %v%s", r.p.RootsDeleted, r.p.PartsDeleted, r.p.StraysDeleted, r.p.HeadDeleted, leftEvidence)},
		{Name: contract.DepControlArtifacts, State: state(gone(func(l *TombstoneLeft) int64 { return l.Artifacts })), Evidence: fmt.Sprintf("%d of %d named by CCS deleted%s", r.p.ArtifactsDeleted, len(r.facts.ControlArtifacts), leftEvidence)},
		r.retentionDependency(),
		{Name: contract.DepReservationHorizon, State: state(horizonOK), Evidence: fmt.Sprintf("horizon %d, now %d", horizon, now)},
		{Name: contract.DepCCSPreconditions, State: state(len(pending) == 0), Evidence: "pending: [" + strings.Join(pending, ", ") + "]"},
	}
}

// retentionDependency is "lifecycle retention passed": every object of
// the dropped lineage went through the gate, which held each inside its
// lifecycle retention_ms (by its maximum timestamp), so the objects phase
// having run to its end is the evidence; a held object keeps it pending.
func (r *tombRun) retentionDependency() contract.Dependency {
	ret := r.facts.Lifecycle.RetentionMs
	d := contract.Dependency{Name: contract.DepLifecycleRetention, State: contract.DependencyPending}
	switch {
	case ret == 0 || !r.e.cfg.Guards.DroppedRetention:
		d.State, d.Evidence = contract.DependencyConfirmed, "no lifecycle retention"
	case r.held != nil && r.held.Reason == ReasonLifecycle:
		d.Evidence = fmt.Sprintf("retention_ms %d: an object is held until %s", ret, heldUntil(r.held.DueUnixMs))
	case r.p.Phase == PhaseObjects || r.p.Phase == PhaseHead && r.e.cfg.Guards.RetireFirst:
		d.Evidence = fmt.Sprintf("retention_ms %d: the objects are not all judged yet", ret)
	default:
		d.State, d.Evidence = contract.DependencyConfirmed, fmt.Sprintf("retention_ms %d passed for every object of the lineage (each judged by its maximum timestamp)", ret)
	}
	return d
}

// releaseAfter is the first instant of this function's clock at which the
// reservation horizon has surely passed: the horizon plus the clock skew.
func (r *tombRun) releaseAfter() int64 {
	return r.facts.ReservationHorizonUnixMs + r.e.cfg.ClockSkew.Milliseconds()
}

func allConfirmed(deps []contract.Dependency) bool {
	for _, d := range deps {
		if d.State != contract.DependencyConfirmed {
			return false
		}
	}
	return len(deps) > 0
}

// finish evaluates the dependencies after a cleanup that ran to its end:
// all confirmed, the completion is reported, then the cursor is closed.
//
// A listing after the cleanup says what is left of the incarnation first
// (TombstoneLeft): anything left keeps its dependency pending and sends
// the cursor back to the outputs phase, so the next run deletes it.
func (r *tombRun) finish(ctx context.Context, task contract.Task) error {
	left, err := r.leftovers(ctx)
	if err != nil {
		if serr := r.save(ctx); serr != nil {
			r.e.log.Warn("save tombstone progress failed", "collection", task.Collection, "err", serr)
		}
		return err
	}
	r.p.Left = left
	deps := r.dependencies()
	r.p.Dependencies, r.rep.Deps = deps, deps
	if !left.none() {
		r.e.metrics.Add("TombstoneKeysLeftAfterCleanup", 1)
		r.e.log.Warn("keys of the dropped incarnation left after its cleanup; cleaning again", "collection", task.Collection,
			"incarnation", r.p.Incarnation, "manifests", left.Manifests, "outputs", left.Outputs, "data", left.Data, "artifacts", left.Artifacts, "first", left.First)
		r.p.Phase, r.p.NextDueUnixMs, r.p.StrayObjectsDone = PhaseOutputs, r.e.now().Add(r.e.cfg.RetryAfter).UnixMilli(), false
	}
	if !allConfirmed(deps) && r.e.cfg.Guards.ReleaseDependencies { // off: mutation proof only (the handoff's check is the other half)
		r.rep.Outcome, r.rep.Phase = TombWaiting, r.p.Phase
		if at := r.releaseAfter(); at > r.e.now().UnixMilli() {
			r.p.NextDueUnixMs = at
		}
		r.e.metrics.Add("TombstonesWaiting", 1)
		return r.save(ctx)
	}
	if r.e.ports.Completions != nil {
		if err := r.e.ports.Completions.Report(ctx, r.completion(task, deps)); err != nil {
			if serr := r.save(ctx); serr != nil {
				r.e.log.Warn("save tombstone progress failed", "collection", task.Collection, "err", serr)
			}
			return fmt.Errorf("report tombstone cleanup of %s incarnation %d: %w", task.Collection, r.p.Incarnation, err)
		}
	}
	r.p.Phase, r.p.DoneAtUnixMs, r.p.NextDueUnixMs, r.p.DoneFactsVersion = PhaseDone, r.e.now().UnixMilli(), 0, r.facts.FactsVersion
	r.rep.Outcome, r.rep.Phase = TombCompleted, PhaseDone
	r.e.metrics.Add("TombstonesCompleted", 1)
	r.e.log.Info("tombstone cleanup complete", "collection", task.Collection, "incarnation", r.p.Incarnation, "runs", r.p.Runs, "delete_calls", r.p.DeleteCalls)
	return r.save(ctx)
}

func (r *tombRun) completion(task contract.Task, deps []contract.Dependency) contract.Completion {
	inc := r.p.Incarnation
	if inc == 1 {
		inc = 0
	}
	return contract.Completion{
		SchemaVersion: contract.SchemaVersion, TaskID: task.TaskID, Kind: contract.KindTombstoneCleanup, Collection: task.Collection,
		Incarnation: inc, BaseManifestVersion: r.p.HeadVersion, BaseManifestChecksum: r.p.HeadChecksum, CCSFactsVersion: r.facts.FactsVersion,
		CCSFactsDigest: contract.FactsDigest(contract.KindTombstoneCleanup, r.facts),
		Outcome:        contract.OutcomeSucceeded, Reason: "every release dependency confirmed",
		StartedAtUnixMs: r.p.StartedAtUnixMs, FinishedAtUnixMs: r.e.now().UnixMilli(),
		Cleanup: &contract.Cleanup{Deleted: []string{}, AlreadyGone: int(r.p.ObjectsDeleted), Complete: true, Dependencies: deps},
	}
}
