package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Tombstone cleanup phases, in order. The cursor only moves forward. With
// guard.RetireFirst the head phase comes first: the publisher retires the
// head (asking CCS itself) before anything is deleted, and the objects and
// manifests phases walk the lineage from the head the cleanup recorded
// (HeadKey); without it (mutation proof only) the head goes last.
const (
	PhaseObjects   = "objects"   // data objects of the lineage (head parts, every root's removals)
	PhaseOutputs   = "outputs"   // the coordinator's never-committed rewrite outputs of the incarnation
	PhaseManifests = "manifests" // roots with their parts and change parts, oldest first; then every other manifest key of the incarnation
	PhaseArtifacts = "artifacts" // the control artifacts CCS names
	PhaseHead      = "head"      // the head pointer, while it names the incarnation
	PhaseWaiting   = "waiting"   // cleaned; a dependency (horizon, CCS precondition) still pending
	PhaseDone      = "done"      // completion handed to the release workflow: nothing more, ever
)

// TombstoneProgress is the resumable cursor of one dropped incarnation's
// cleanup, kept in the coordinator table under (collection, incarnation)
// and written only by conditional writes on Seq. It is disposable: wiped,
// the cleanup starts over from the head and repeats deletes (a key already
// gone counts as deleted); nothing is deleted that a fresh start would not
// delete.
type TombstoneProgress struct {
	Collection  string `json:"collection"`
	Incarnation uint64 `json:"incarnation"`
	Phase       string `json:"phase"`
	// The objects phase walks units newest root first: for the head's root
	// its parts, then for every root its removed change (inline: one unit;
	// in parts: one unit per part). CursorVersion/CursorUnit name the next
	// unit; the head it was computed under pins it (a moved head restarts).
	CursorVersion uint64 `json:"cursor_version,omitempty"`
	CursorUnit    int    `json:"cursor_unit,omitempty"`
	CursorOffset  int    `json:"cursor_offset,omitempty"` // keys of the unit already confirmed
	// PartsConfirmed is the manifests phase's cursor: how many leading
	// keys of the lineage's part list (parts and change parts of the roots
	// walked from the pinned head, newest root first) are confirmed gone.
	// A run stopped at its budget among the parts resumes after them
	// instead of deleting them all again (with more parts than one run
	// deletes, no run would reach the roots).
	PartsConfirmed int `json:"parts_confirmed,omitempty"`
	// StalledRuns counts the runs in a row that stopped at their budget
	// without moving the cursor (the budget went on waiting for the
	// fleet's delete budget: a clock behind the bucket's, a saturated
	// fleet). The first is continued at once like a run that advanced;
	// the next waits for reconciliation (TombstoneContinuation).
	StalledRuns  int    `json:"stalled_runs,omitempty"`
	HeadVersion  uint64 `json:"head_version,omitempty"`
	HeadChecksum string `json:"head_checksum,omitempty"`
	// HeadKey and HeadCommittedAtUnixMs record the head the publisher
	// retired (its root key, and when its commit counts from: rule 16):
	// the lineage is walked from it once the pointer is gone.
	HeadKey               string `json:"head_key,omitempty"`
	HeadCommittedAtUnixMs int64  `json:"head_committed_at_unix_ms,omitempty"`
	// StrayObjectsDone: the manifests phase deleted the objects of the
	// roots no walk reaches (strayRootObjects); a run resumed in the phase
	// does not spend its budget on them again. Cleared whenever the phases
	// before it run again.
	StrayObjectsDone bool  `json:"stray_objects_done,omitempty"`
	Runs             int   `json:"runs"`
	DeleteCalls      int64 `json:"delete_calls"`
	ObjectsDeleted   int64 `json:"objects_deleted"`
	OutputsDeleted   int64 `json:"outputs_deleted"`
	YoungOutputs     int64 `json:"young_outputs,omitempty"`
	RootsDeleted     int64 `json:"roots_deleted"`
	PartsDeleted     int64 `json:"parts_deleted"`
	// StraysDeleted counts manifest keys of the incarnation no lineage walk
	// finds (a publisher that lost its head CAS left a root and its parts,
	// named by no head or parent); YoungStrays those still inside the
	// window a commit could name them in.
	StraysDeleted int64 `json:"stray_manifests_deleted,omitempty"`
	YoungStrays   int64 `json:"young_stray_manifests,omitempty"`
	// Left is what the listing after the cleanup still found of the
	// incarnation (the release dependencies rest on it, not on the
	// phases run); nil before a cleanup ran to its end.
	Left             *TombstoneLeft `json:"left,omitempty"`
	ArtifactsDeleted int64          `json:"artifacts_deleted"`
	HeadDeleted      bool           `json:"head_deleted"`
	// Holding is why the last run stopped at a key the gate holds (a
	// dropped collection's object inside its lifecycle retention): the
	// cleanup waits for it (NextDueUnixMs), the release with it.
	Holding         *Hold `json:"holding,omitempty"`
	StartedAtUnixMs int64 `json:"started_at_unix_ms"`
	UpdatedAtUnixMs int64 `json:"updated_at_unix_ms"`
	DoneAtUnixMs    int64 `json:"done_at_unix_ms,omitempty"`
	// DoneFactsVersion is the CCS facts version the completion was
	// reported under: the handoff releases only under exactly those facts,
	// so a cursor closed under older facts is reopened (nothing is left to
	// delete; the dependencies are judged and reported again).
	DoneFactsVersion uint64                `json:"done_facts_version,omitempty"`
	NextDueUnixMs    int64                 `json:"next_due_unix_ms,omitempty"`
	Dependencies     []contract.Dependency `json:"dependencies,omitempty"`
	// Seq fences writes: a save succeeds only over the Seq it read (or,
	// for Seq 1, over no record). Run names the run that wrote it, so a
	// save whose answer was lost is recognised as our own.
	Seq uint64 `json:"seq"`
	Run string `json:"run,omitempty"`
}

// TombstoneLeft is what a listing of the collection's prefix found of a
// dropped incarnation after its cleanup ran to its end (contract.OfLifetime):
// its manifest keys (roots, parts, change parts, by incarnation tag), the
// coordinator's own rewrite outputs of its tasks, the data objects its
// writers committed (append segments, by incarnation tag), and the control
// artifacts CCS names. Other writers' keys are not the cleanup's and are
// not counted.
type TombstoneLeft struct {
	Manifests int64  `json:"manifests"`
	Outputs   int64  `json:"outputs"`
	Data      int64  `json:"data"`
	Artifacts int64  `json:"artifacts"`
	First     string `json:"first,omitempty"` // one of them, for the evidence
}

func (l *TombstoneLeft) none() bool {
	return l != nil && l.Manifests == 0 && l.Outputs == 0 && l.Data == 0 && l.Artifacts == 0
}

// ProgressStore keeps tombstone cleanup progress.
type ProgressStore interface {
	// LoadProgress returns the progress of (collection, incarnation);
	// Seq 0 when there is none.
	LoadProgress(ctx context.Context, collection string, incarnation uint64) (TombstoneProgress, error)
	// SaveProgress writes p if the stored Seq is p.Seq-1 (none for 1);
	// otherwise an error wrapping store.ErrConditionFailed.
	SaveProgress(ctx context.Context, p TombstoneProgress) error
}

// HeadRetirer is the Manifest Publisher's head retirement: only the
// publisher moves (and so removes) a head. It removes the head only while
// the head is exactly the one the request names, by a conditional delete on
// the head's ETag (contract.RetireRequest, events/PUBLISHER.md).
type HeadRetirer interface {
	Retire(ctx context.Context, req contract.RetireRequest) (contract.RetireAnswer, error)
}

// TombstoneReport is what one bounded run did.
type TombstoneReport struct {
	Collection  string `json:"collection"`
	Incarnation uint64 `json:"incarnation"`
	Outcome     string `json:"outcome"` // progressed | waiting | completed | done | stale | deferred
	Reason      string `json:"reason,omitempty"`
	Phase       string `json:"phase"`
	Calls       int    `json:"calls"` // delete calls this run
	Deleted     int    `json:"deleted"`
	Bounded     bool   `json:"bounded"` // the run stopped at its time or call budget
	// Advanced: the run moved the cursor (TombstoneProgress.AdvancedFrom):
	// a bounded run that advanced is continued at once
	// (TombstoneContinuation).
	Advanced bool                  `json:"advanced,omitempty"`
	Progress TombstoneProgress     `json:"progress"`
	Deps     []contract.Dependency `json:"dependencies,omitempty"`
}

// Tombstone run outcomes.
const (
	TombProgressed = "progressed"
	TombWaiting    = "waiting"
	TombCompleted  = "completed"
	TombDone       = "done"
	TombStale      = "stale"
	TombDeferred   = "deferred"
)

// errBudget stops a run at its time or call budget.
var errBudget = errors.New("run budget spent")

// errFactsMoved stops a run whose CCS facts changed under it (an un-drop,
// a new drop): the next run judges the gates again.
var errFactsMoved = errors.New("CCS facts changed during the run")

type tombRun struct {
	e        *Executor
	task     contract.Task
	facts    contract.CollectionFacts
	p        TombstoneProgress
	rep      TombstoneReport
	deadline time.Time
	maxCalls int
	rd       tombReadings      // what the run's proofs rest on
	t        tally             // what the gate's sender did this run
	retires  int               // head retirements asked for this run
	held     *Hold             // the first key the gate held this run
	calls0   int64             // the cursor's DeleteCalls when the run began
	start    TombstoneProgress // the cursor the run resumed from
}

// RunTombstone runs one bounded step of the cleanup of the dropped
// incarnation a tombstone_cleanup task names, resuming from the stored
// cursor. It never acts on another incarnation (guard.IncarnationFence):
// the CCS facts must say the task's incarnation is tombstoned, and the head
// pointer is deleted only while it names that incarnation, re-read just
// before the delete. The release dependencies are evaluated after the
// cleanup; when all are confirmed (the reservation horizon passed:
// guard.ReleaseHorizon) the completion goes to the handoff once and the
// cursor is closed (PhaseDone): nothing schedules the incarnation again.
func (e *Executor) RunTombstone(ctx context.Context, task contract.Task) (TombstoneReport, error) {
	r := &tombRun{e: e, task: task, rep: TombstoneReport{Collection: task.Collection, Incarnation: task.Inc()},
		deadline: e.now().Add(e.cfg.TombstoneRunBudget), maxCalls: e.cfg.TombstoneMaxCalls}
	defer func() {
		e.log.Info("tombstone cleanup run", "collection", task.Collection, "incarnation", task.Inc(), "outcome", r.rep.Outcome,
			"phase", r.rep.Phase, "reason", r.rep.Reason, "calls", r.calls(), "deleted", r.rep.Deleted)
	}()
	if open, err := r.open(ctx); err != nil || !open {
		return r.rep, err
	}
	if reason, due, err := r.gates(ctx); err != nil {
		return r.rep, err
	} else if reason != "" {
		r.rep.Outcome, r.rep.Reason, r.rep.Phase = TombDeferred, reason, r.p.Phase
		r.p.NextDueUnixMs = due
		return r.rep, r.save(ctx)
	}
	return r.rep, r.ended(ctx, r.clean(ctx))
}

// open reads the CCS facts and the cursor of the task's incarnation; open
// is false when the run has nothing to do (stale task, cleanup closed).
func (r *tombRun) open(ctx context.Context) (bool, error) {
	e, c, inc := r.e, r.task.Collection, r.task.Inc()
	facts, err := e.ports.Facts.Facts(ctx, c)
	if err != nil {
		return false, fmt.Errorf("tombstone cleanup of %s: read CCS facts: %w", c, err)
	}
	r.facts, r.rd.factsAt = facts, e.stamp()
	if e.cfg.Guards.IncarnationFence && (!facts.Tombstoned || facts.Inc() != inc) {
		r.rep.Outcome, r.rep.Reason = TombStale, fmt.Sprintf("CCS facts are incarnation %d (tombstoned %v); the task is for dropped incarnation %d", facts.Inc(), facts.Tombstoned, inc)
		e.metrics.Add("TombstoneTasksStale", 1)
		e.log.Info("tombstone cleanup stale", "collection", c, "incarnation", inc, "reason", r.rep.Reason)
		return false, nil
	}
	if !facts.Tombstoned {
		r.rep.Outcome, r.rep.Reason = TombStale, "not tombstoned"
		return false, nil
	}
	if e.ports.Progress == nil {
		return false, errors.New("tombstone cleanup: no progress store configured")
	}
	p, err := e.ports.Progress.LoadProgress(ctx, c, inc)
	if err != nil {
		return false, fmt.Errorf("tombstone cleanup of %s incarnation %d: load progress: %w", c, inc, err)
	}
	if facts.ReleaseIntentRecorded || p.Phase == PhaseDone && p.DoneFactsVersion == facts.FactsVersion && !ReleaseOwedAgain(p, facts, e.now(), e.cfg) {
		r.rep.Outcome, r.rep.Phase, r.rep.Progress = TombDone, p.Phase, p
		e.metrics.Add("TombstoneTasksAfterDone", 1)
		return false, nil
	}
	if p.Phase == PhaseDone && p.DoneFactsVersion == facts.FactsVersion {
		// The completion was sent and CCS still holds the tombstone
		// unreleased past its delivery bound: it was lost (dead-lettered,
		// dropped). Clean again from the bucket's truth and report again.
		e.metrics.Add("ReleaseCompletionsReasked", 1)
		e.log.Warn("release completion lost: CCS has not recorded the release; cleaning and reporting again", "collection", c, "incarnation", inc,
			"done_at_unix_ms", p.DoneAtUnixMs, "facts_version", facts.FactsVersion)
	}
	r.p = r.resume(p)
	r.start = r.p
	r.calls0 = r.p.DeleteCalls
	return true, nil
}

// ReleaseOwedAgain says whether a dropped incarnation's release is owed
// again although its cleanup cursor is closed (rule 17): the cursor says
// the completion was handed to the handoff at DoneAtUnixMs, but CCS, the
// durable truth, has not recorded the release and that completion's
// delivery bound (cfg.ReleaseReaskAfter) passed, so it was lost. The
// cleanup then runs again (it lists what is left of the incarnation and
// deletes it through the gate) and reports again under the same
// deterministic intent identity. Off (guard.ReleaseReask): the cursor's
// "done" is final, as it was.
func ReleaseOwedAgain(p TombstoneProgress, facts contract.CollectionFacts, now time.Time, cfg Config) bool {
	if !cfg.Guards.ReleaseReask || p.Phase != PhaseDone || facts.ReleaseIntentRecorded || !facts.Tombstoned {
		return false
	}
	after := cfg.ReleaseReaskAfter
	if after <= 0 {
		after = DefaultConfig().ReleaseReaskAfter
	}
	return now.UnixMilli() >= p.DoneAtUnixMs+after.Milliseconds()
}

// resume is the cursor this run continues from.
func (r *tombRun) resume(p TombstoneProgress) TombstoneProgress {
	if p.Phase == PhaseDone {
		// Closed under other facts (the handoff dropped that completion):
		// walk again from the head (cheap: everything is gone) and report
		// under the current facts.
		p.Phase, p.HeadVersion, p.HeadChecksum, p.HeadKey, p.DoneAtUnixMs = r.firstPhase(), 0, "", "", 0
	}
	now := r.e.now()
	if p.Seq == 0 {
		p = TombstoneProgress{Collection: r.task.Collection, Incarnation: r.task.Inc(), Phase: r.firstPhase(), StartedAtUnixMs: now.UnixMilli()}
	}
	p.Runs++
	p.Run = fmt.Sprintf("%s/%d/%d", r.task.TaskID, now.UnixMilli(), p.Runs)
	return p
}

// firstPhase is where a cleanup starts (and starts again when the dropped
// lineage moved): the head's retirement (guard.RetireFirst), else the
// objects.
func (r *tombRun) firstPhase() string {
	if r.e.cfg.Guards.RetireFirst {
		return PhaseHead
	}
	return PhaseObjects
}

// ended saves what a run that cleaned did: it waits for young keys, it
// stopped at its budget (or at moved facts), it failed, or it ran to its
// end and the release dependencies are evaluated (finish).
func (r *tombRun) ended(ctx context.Context, err error) error {
	if errors.Is(err, errYoungOutputs) || errors.Is(err, errHeld) {
		r.rep.Outcome, r.rep.Phase = TombWaiting, r.p.Phase
		r.rep.Reason = fmt.Sprintf("%d never-committed outputs and %d manifest keys may still be committed until %d", r.p.YoungOutputs, r.p.YoungStrays, r.p.NextDueUnixMs)
		if r.held != nil {
			r.rep.Reason, r.p.NextDueUnixMs = "held by the gate: "+r.held.String(), r.held.DueUnixMs
			r.e.metrics.AddDim("TombstoneHeld", "Reason", r.held.Reason, 1)
		}
		r.p.Dependencies = r.dependencies()
		r.rep.Deps = r.p.Dependencies
		return r.save(ctx)
	}
	bounded := errors.Is(err, errBudget) || errors.Is(err, errFactsMoved) || errors.Is(err, errLineageMoved)
	if err != nil && !bounded {
		if serr := r.save(ctx); serr != nil {
			r.e.log.Warn("save tombstone progress failed", "collection", r.task.Collection, "err", serr)
		}
		return err
	}
	r.rep.Bounded = bounded
	r.rep.Advanced = r.p.AdvancedFrom(r.start)
	if bounded {
		if r.p.StalledRuns = 0; !r.rep.Advanced {
			r.p.StalledRuns = r.start.StalledRuns + 1
		}
		r.rep.Outcome = TombProgressed
		r.e.metrics.Add("TombstoneRunsBounded", 1)
		return r.save(ctx)
	}
	return r.finish(ctx, r.task)
}

func (r *tombRun) clean(ctx context.Context) error {
	for {
		r.rep.Phase = r.p.Phase
		var err error
		switch r.p.Phase {
		case PhaseObjects:
			err = r.objects(ctx)
		case PhaseOutputs:
			err = r.outputs(ctx)
		case PhaseManifests:
			err = r.manifests(ctx)
		case PhaseArtifacts:
			err = r.artifacts(ctx)
		case PhaseHead:
			err = r.head(ctx)
		case PhaseWaiting:
			return nil
		default:
			return fmt.Errorf("tombstone progress of %s has unknown phase %q", r.task.Collection, r.p.Phase)
		}
		if err != nil {
			return err
		}
	}
}

// AdvancedFrom reports whether p's cursor moved past start's: another
// phase, the objects or parts cursor moved, or keys that a walk or a
// listing found (so existed) confirmed gone: roots, strays, outputs. The
// control artifacts are deleted again on every run of their phase: only
// leaving it counts.
func (p TombstoneProgress) AdvancedFrom(start TombstoneProgress) bool {
	return p.Phase != start.Phase || p.CursorVersion != start.CursorVersion || p.CursorUnit != start.CursorUnit ||
		p.CursorOffset != start.CursorOffset || p.PartsConfirmed != start.PartsConfirmed || p.RootsDeleted != start.RootsDeleted ||
		p.StraysDeleted != start.StraysDeleted || p.OutputsDeleted != start.OutputsDeleted
}

// save writes the cursor over the Seq it was read at.
func (r *tombRun) save(ctx context.Context) error {
	r.p.DeleteCalls = r.calls0 + int64(r.calls())
	r.p.Holding = r.held
	r.rep.Calls = r.calls()
	r.p.Seq++
	r.p.UpdatedAtUnixMs = r.e.now().UnixMilli()
	r.rep.Progress = r.p
	if err := r.e.ports.Progress.SaveProgress(ctx, r.p); err != nil {
		return fmt.Errorf("save tombstone progress of %s incarnation %d: %w", r.p.Collection, r.p.Incarnation, err)
	}
	return nil
}
