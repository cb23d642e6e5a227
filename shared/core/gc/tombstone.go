package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// Tombstone cleanup phases, in order. The cursor only moves forward.
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
	CursorVersion  uint64 `json:"cursor_version,omitempty"`
	CursorUnit     int    `json:"cursor_unit,omitempty"`
	CursorOffset   int    `json:"cursor_offset,omitempty"` // keys of the unit already confirmed
	HeadVersion    uint64 `json:"head_version,omitempty"`
	HeadChecksum   string `json:"head_checksum,omitempty"`
	Runs           int    `json:"runs"`
	DeleteCalls    int64  `json:"delete_calls"`
	ObjectsDeleted int64  `json:"objects_deleted"`
	OutputsDeleted int64  `json:"outputs_deleted"`
	YoungOutputs   int64  `json:"young_outputs,omitempty"`
	RootsDeleted   int64  `json:"roots_deleted"`
	PartsDeleted   int64  `json:"parts_deleted"`
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
	StartedAtUnixMs  int64          `json:"started_at_unix_ms"`
	UpdatedAtUnixMs  int64          `json:"updated_at_unix_ms"`
	DoneAtUnixMs     int64          `json:"done_at_unix_ms,omitempty"`
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
// dropped incarnation after its cleanup ran to its end: its manifest keys
// (roots, parts, change parts, by incarnation tag), the coordinator's own
// rewrite outputs of its tasks, and the control artifacts CCS names. Other
// writers' keys are not the cleanup's and are not counted.
type TombstoneLeft struct {
	Manifests int64  `json:"manifests"`
	Outputs   int64  `json:"outputs"`
	Artifacts int64  `json:"artifacts"`
	First     string `json:"first,omitempty"` // one of them, for the evidence
}

func (l *TombstoneLeft) none() bool {
	return l != nil && l.Manifests == 0 && l.Outputs == 0 && l.Artifacts == 0
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
	Collection  string                `json:"collection"`
	Incarnation uint64                `json:"incarnation"`
	Outcome     string                `json:"outcome"` // progressed | waiting | completed | done | stale | deferred
	Reason      string                `json:"reason,omitempty"`
	Phase       string                `json:"phase"`
	Calls       int                   `json:"calls"` // delete calls this run
	Deleted     int                   `json:"deleted"`
	Bounded     bool                  `json:"bounded"` // the run stopped at its time or call budget
	Progress    TombstoneProgress     `json:"progress"`
	Deps        []contract.Dependency `json:"dependencies,omitempty"`
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

// fresh re-reads the CCS facts when the reading the run's deletes rest on
// is ProofMaxAge old (guard.FreshProof, rule 14): a tombstone that changed
// or went stops the run before its next delete call.
func (r *tombRun) fresh(ctx context.Context) error {
	if !r.e.cfg.Guards.FreshProof || r.e.now().Sub(r.factsAt) < r.e.cfg.ProofMaxAge {
		return nil
	}
	f, err := r.e.ports.Facts.Facts(ctx, r.task.Collection)
	if err != nil {
		return fmt.Errorf("tombstone cleanup of %s: re-read CCS facts before deleting: %w", r.task.Collection, err)
	}
	if f.FactsVersion != r.facts.FactsVersion {
		return errFactsMoved
	}
	r.factsAt = r.e.now()
	return nil
}

type tombRun struct {
	e        *Executor
	task     contract.Task
	facts    contract.CollectionFacts
	p        TombstoneProgress
	rep      TombstoneReport
	deadline time.Time
	maxCalls int
	factsAt  time.Time // when r.facts was read
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
	c, inc := task.Collection, task.Inc()
	r := &tombRun{e: e, task: task, rep: TombstoneReport{Collection: c, Incarnation: inc},
		deadline: e.now().Add(e.cfg.TombstoneRunBudget), maxCalls: e.cfg.TombstoneMaxCalls}
	facts, err := e.ports.Facts.Facts(ctx, c)
	if err != nil {
		return r.rep, fmt.Errorf("tombstone cleanup of %s: read CCS facts: %w", c, err)
	}
	r.facts, r.factsAt = facts, e.now()
	if e.cfg.Guards.IncarnationFence && (!facts.Tombstoned || facts.Inc() != inc) {
		r.rep.Outcome, r.rep.Reason = TombStale, fmt.Sprintf("CCS facts are incarnation %d (tombstoned %v); the task is for dropped incarnation %d", facts.Inc(), facts.Tombstoned, inc)
		e.metrics.Add("TombstoneTasksStale", 1)
		e.log.Info("tombstone cleanup stale", "collection", c, "incarnation", inc, "reason", r.rep.Reason)
		return r.rep, nil
	}
	if !facts.Tombstoned {
		r.rep.Outcome, r.rep.Reason = TombStale, "not tombstoned"
		return r.rep, nil
	}
	if e.ports.Progress == nil {
		return r.rep, errors.New("tombstone cleanup: no progress store configured")
	}
	p, err := e.ports.Progress.LoadProgress(ctx, c, inc)
	if err != nil {
		return r.rep, fmt.Errorf("tombstone cleanup of %s incarnation %d: load progress: %w", c, inc, err)
	}
	if facts.ReleaseIntentRecorded || p.Phase == PhaseDone && p.DoneFactsVersion == facts.FactsVersion {
		r.rep.Outcome, r.rep.Phase, r.rep.Progress = TombDone, p.Phase, p
		e.metrics.Add("TombstoneTasksAfterDone", 1)
		return r.rep, nil
	}
	if p.Phase == PhaseDone {
		// Closed under other facts (the handoff dropped that completion):
		// walk again from the head (cheap: everything is gone) and report
		// under the current facts.
		p.Phase, p.HeadVersion, p.HeadChecksum, p.DoneAtUnixMs = PhaseObjects, 0, "", 0
	}
	now := e.now()
	if p.Seq == 0 {
		p = TombstoneProgress{Collection: c, Incarnation: inc, Phase: PhaseObjects, StartedAtUnixMs: now.UnixMilli()}
	}
	p.Runs++
	p.Run = fmt.Sprintf("%s/%d/%d", task.TaskID, now.UnixMilli(), p.Runs)
	r.p = p
	if reason, due, err := r.gates(ctx); err != nil {
		return r.rep, err
	} else if reason != "" {
		r.rep.Outcome, r.rep.Reason, r.rep.Phase = TombDeferred, reason, r.p.Phase
		r.p.NextDueUnixMs = due
		return r.rep, r.save(ctx)
	}
	err = r.clean(ctx)
	if errors.Is(err, errYoungOutputs) {
		r.rep.Outcome, r.rep.Phase = TombWaiting, r.p.Phase
		r.rep.Reason = fmt.Sprintf("%d never-committed outputs and %d manifest keys may still be committed until %d", r.p.YoungOutputs, r.p.YoungStrays, r.p.NextDueUnixMs)
		r.p.Dependencies = r.dependencies()
		r.rep.Deps = r.p.Dependencies
		return r.rep, r.save(ctx)
	}
	bounded := errors.Is(err, errBudget) || errors.Is(err, errFactsMoved)
	if err != nil && !bounded {
		if serr := r.save(ctx); serr != nil {
			e.log.Warn("save tombstone progress failed", "collection", c, "err", serr)
		}
		return r.rep, err
	}
	r.rep.Bounded = bounded
	if bounded {
		r.rep.Outcome = TombProgressed
		e.metrics.Add("TombstoneRunsBounded", 1)
		return r.rep, r.save(ctx)
	}
	return r.rep, r.finish(ctx, task)
}

// gates: a dropped incarnation's objects count as evicted at the drop
// time (CCS's tombstoned_at; else its reservation horizon) and go through
// the same time gates as any eviction (guard.DeleteGates): a continuation
// token may hold its manifests for TokenLifetime, and the watermark must
// be past it by the retention window.
func (r *tombRun) gates(ctx context.Context) (reason string, dueAt int64, err error) {
	if !r.e.cfg.Guards.DeleteGates {
		return "", 0, nil
	}
	evict := r.facts.EvictedAtUnixMs()
	if evict <= 0 {
		return "CCS gives no tombstone time: nothing is evicted", 0, nil
	}
	now := r.e.now().UnixMilli()
	if at := evict + (r.e.cfg.TokenLifetime + r.e.cfg.ClockSkew).Milliseconds(); now < at {
		return fmt.Sprintf("pinned_manifest: tokens may open the dropped lineage until %d", at), at, nil
	}
	wm, werr := r.e.ports.Watermark.Watermark(ctx)
	if werr != nil {
		return "watermark unreadable: " + werr.Error(), now + r.e.cfg.RetryAfter.Milliseconds(), nil
	}
	if evict >= wm.GlobalSafeTsUnixMs-r.e.cfg.RetentionWindow.Milliseconds() {
		return fmt.Sprintf("retention_window: global_safe_ts %d is not past the drop %d by %s", wm.GlobalSafeTsUnixMs, evict, r.e.cfg.RetentionWindow), now + r.e.cfg.RetryAfter.Milliseconds(), nil
	}
	return "", 0, nil
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

// walk reads the incarnation's lineage from its head. ok is false when the
// head is gone, names another incarnation, or its root is gone (the
// manifests phase deleted it): there is no lineage left to walk.
func (r *tombRun) walk(ctx context.Context) (lineage.Walk, bool, error) {
	w, err := r.e.lin.WalkFrom(ctx, r.task.Collection, 1)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return w, false, nil
	case err != nil:
		return w, false, fmt.Errorf("walk the dropped lineage of %s: %w", r.task.Collection, err)
	case w.Head.Inc() != r.p.Incarnation:
		return w, false, nil
	}
	return w, true, nil
}

// unit is one resumable step of the objects phase.
type unit struct {
	each func(ctx context.Context, fn func(contract.ObjectEntry) error) error
}

func (r *tombRun) units(m *contract.Manifest, head bool) []unit {
	var us []unit
	lin := r.e.lin
	if head {
		for i := range m.Parts {
			ref := m.Parts[i]
			us = append(us, unit{each: func(ctx context.Context, fn func(contract.ObjectEntry) error) error {
				return lin.Each(ctx, m, func(p contract.PartRef) bool { return p.Key == ref.Key }, fn)
			}})
		}
	}
	if len(m.Change.Parts) == 0 {
		if len(m.Change.Removed) > 0 {
			us = append(us, unit{each: func(ctx context.Context, fn func(contract.ObjectEntry) error) error {
				return lin.EachChange(ctx, m, contract.ChangeRemoved, fn)
			}})
		}
		return us
	}
	for _, ref := range m.Change.Parts {
		if ref.Kind != contract.ChangeRemoved {
			continue
		}
		one := *m
		one.Change = contract.Change{Parts: []contract.ChangePartRef{ref}}
		us = append(us, unit{each: func(ctx context.Context, fn func(contract.ObjectEntry) error) error {
			return lin.EachChange(ctx, &one, contract.ChangeRemoved, fn)
		}})
	}
	return us
}

func (r *tombRun) objects(ctx context.Context) error {
	w, ok, err := r.walk(ctx)
	if err != nil {
		return err
	}
	if !ok {
		r.p.Phase = PhaseOutputs
		return nil
	}
	if r.p.HeadVersion != w.Head.Version || r.p.HeadChecksum != w.Head.ManifestChecksum {
		// First run, or the head moved since the cursor was set (a commit
		// after the drop): start over from the head (repeats are harmless).
		r.p.HeadVersion, r.p.HeadChecksum, r.p.CursorVersion, r.p.CursorUnit, r.p.CursorOffset = w.Head.Version, w.Head.ManifestChecksum, w.Head.Version, 0, 0
	}
	for i := range w.Roots {
		m := &w.Roots[i]
		if m.Version > r.p.CursorVersion {
			continue
		}
		us := r.units(m, i == 0)
		for j := r.p.CursorUnit; j < len(us); j++ {
			var keys []string
			if err := us[j].each(ctx, func(o contract.ObjectEntry) error {
				keys = append(keys, o.Key)
				return nil
			}); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue // a part already deleted: its objects went first
				}
				return fmt.Errorf("read the dropped lineage of %s at v%d: %w", r.task.Collection, m.Version, err)
			}
			skip := min(r.p.CursorOffset, len(keys))
			n, err := r.deleteKeys(ctx, keys[skip:])
			r.p.ObjectsDeleted += int64(n)
			r.p.CursorOffset = skip + n
			if err != nil {
				return err
			}
			r.p.CursorUnit, r.p.CursorOffset = j+1, 0
		}
		r.p.CursorVersion, r.p.CursorUnit, r.p.CursorOffset = m.Version-1, 0, 0
	}
	r.p.Phase = PhaseOutputs
	return nil
}

// outputs deletes the coordinator's own never-committed rewrite outputs of
// the incarnation (contract.OwnedOutputTask, a task identity of this
// incarnation): proposed by a listing, which decides nothing else. Only
// the coordinator's own keys (guard.OrphanOwnership), and only once no
// cutover can still commit them (write time + CutoverDeadline + 2 x
// ClockSkew, guard.CutoverDeadline); a younger one keeps the phase open.
func (r *tombRun) outputs(ctx context.Context) error {
	c, inc := r.task.Collection, r.p.Incarnation
	if r.e.ports.Lister == nil {
		r.p.Phase = PhaseManifests
		return nil
	}
	now, wait := r.e.now(), r.outputWait()
	var due []string
	young := int64(0)
	var next int64
	err := r.e.ports.Lister.List(ctx, contract.DataPrefix(c), func(page []Listed) error {
		for _, l := range page {
			id, ok := contract.OwnedOutputTask(c, l.Key)
			if !ok || contract.TaskIncarnation(c, id) != inc {
				continue
			}
			if at := l.LastModified.Add(wait); now.Before(at) {
				young++
				if next == 0 || at.UnixMilli() < next {
					next = at.UnixMilli()
				}
				continue
			}
			due = append(due, l.Key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list never-committed outputs of %s: %w", c, err)
	}
	n, err := r.deleteKeys(ctx, due)
	r.p.OutputsDeleted += int64(n)
	if err != nil {
		return err
	}
	r.p.YoungOutputs = young
	if young > 0 {
		r.p.NextDueUnixMs = next
		return errYoungOutputs
	}
	r.p.Phase = PhaseManifests
	return nil
}

// errYoungOutputs ends a run whose incarnation still has outputs a late
// cutover could commit: the next run continues from the outputs phase.
var errYoungOutputs = errors.New("never-committed outputs too young to reclaim")

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
	w, ok, err := r.walk(ctx)
	if err != nil {
		return err
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

// lineageRoots deletes the walked roots oldest first, each after its parts
// and change parts that no newer root references.
func (r *tombRun) lineageRoots(ctx context.Context, w lineage.Walk) error {
	for i := len(w.Roots) - 1; i >= 0; i-- {
		m := &w.Roots[i]
		newer := map[string]bool{}
		for _, n := range w.Roots[:i] {
			for _, p := range n.Parts {
				newer[p.Key] = true
			}
		}
		var keys []string
		for _, p := range m.Parts {
			if !newer[p.Key] {
				keys = append(keys, p.Key)
			}
		}
		for _, p := range m.Change.Parts {
			keys = append(keys, p.Key)
		}
		n, err := r.deleteKeys(ctx, keys)
		r.p.PartsDeleted += int64(n)
		if err != nil {
			return err
		}
		key := w.Head.ManifestKey
		if i > 0 {
			key = w.Roots[i-1].ParentKey
		}
		if _, err := r.deleteKeys(ctx, []string{key}); err != nil {
			return err
		}
		r.p.RootsDeleted++
	}
	return nil
}

// outputWait is how long after its write a key a late commit could still
// name is kept: no cutover commits past its deadline (guard.CutoverDeadline).
func (r *tombRun) outputWait() time.Duration {
	if !r.e.cfg.Guards.CutoverDeadline {
		return r.e.cfg.MaxTaskLifetime + r.e.cfg.ClockSkew
	}
	return r.e.cfg.CutoverDeadline + 2*r.e.cfg.ClockSkew
}

// strays deletes the incarnation's manifest keys a listing proposes (by
// incarnation tag: contract.ManifestKeyIncarnation; never another
// lifetime's, never the head), once no commit can still name them; a
// younger one keeps the phase open, as a young output does.
func (r *tombRun) strays(ctx context.Context) error {
	c, inc := r.task.Collection, r.p.Incarnation
	if r.e.ports.Lister == nil {
		return nil
	}
	now, wait := r.e.now(), r.outputWait()
	var due []string
	young := int64(0)
	var next int64
	err := r.e.ports.Lister.List(ctx, contract.ManifestsPrefix(c), func(page []Listed) error {
		for _, l := range page {
			if got, ok := contract.ManifestKeyIncarnation(c, l.Key); !ok || got != inc {
				continue
			}
			if at := l.LastModified.Add(wait); now.Before(at) {
				young++
				if next == 0 || at.UnixMilli() < next {
					next = at.UnixMilli()
				}
				continue
			}
			due = append(due, l.Key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list the manifest keys of dropped %s incarnation %d: %w", c, inc, err)
	}
	n, err := r.deleteKeys(ctx, due)
	r.p.StraysDeleted += int64(n)
	if n > 0 {
		r.e.metrics.Add("TombstoneStrayManifestsDeleted", float64(n))
	}
	if err != nil {
		return err
	}
	r.p.YoungStrays = young
	if young > 0 {
		r.p.NextDueUnixMs = next
		return errYoungOutputs
	}
	return nil
}

// leftovers lists the collection's prefix after a cleanup that ran to its
// end and counts what is still the incarnation's (TombstoneLeft): the
// release dependencies are confirmed by what is gone, not by the phases
// that ran. Without a lister nothing is proposed and nothing is counted.
func (r *tombRun) leftovers(ctx context.Context) (*TombstoneLeft, error) {
	c, inc := r.task.Collection, r.p.Incarnation
	left := &TombstoneLeft{}
	if r.e.ports.Lister == nil {
		return left, nil
	}
	artifact := map[string]bool{}
	for _, k := range r.facts.ControlArtifacts {
		artifact[k] = true
	}
	err := r.e.ports.Lister.List(ctx, contract.CollectionPrefix(c), func(page []Listed) error {
		for _, l := range page {
			found := true
			if got, ok := contract.ManifestKeyIncarnation(c, l.Key); ok && got == inc {
				left.Manifests++
			} else if id, ok := contract.OwnedOutputTask(c, l.Key); ok && contract.TaskIncarnation(c, id) == inc {
				left.Outputs++
			} else if artifact[l.Key] {
				left.Artifacts++
			} else {
				found = false
			}
			if found && left.First == "" {
				left.First = l.Key
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list what is left of dropped %s incarnation %d: %w", c, inc, err)
	}
	return left, nil
}

func (r *tombRun) artifacts(ctx context.Context) error {
	n, err := r.deleteKeys(ctx, r.facts.ControlArtifacts)
	r.p.ArtifactsDeleted += int64(n)
	if err != nil {
		return err
	}
	r.p.Phase = PhaseHead
	return nil
}

// head has the head pointer, the one key every lifetime of the name
// shares, retired by its owner: the Manifest Publisher (the coordinator
// never writes or deletes a head). The head is re-read every time; only a
// head naming the dropped incarnation is asked for (guard.IncarnationFence),
// and the request names exactly the head read (incarnation, version,
// manifest checksum), so the publisher's conditional delete on the head's
// ETag fails if anything was written in between (a re-created name's first
// head): the window between this read and the removal is closed by the
// owner, at the moment of effect. A head of another incarnation is a new
// lifetime's and is never asked for.
func (r *tombRun) head(ctx context.Context) error {
	if err := r.spend(); err != nil {
		return err
	}
	c := r.task.Collection
	if r.e.beforeHeadDelete != nil {
		r.e.beforeHeadDelete()
	}
	h, err := r.e.lin.Head(ctx, c)
	switch {
	case errors.Is(err, store.ErrNotFound):
		r.p.Phase = PhaseWaiting
		return nil
	case err != nil && !errors.Is(err, lineage.ErrBadHead):
		return fmt.Errorf("re-read head of %s before its retirement: %w", c, err)
	case err != nil:
		return fmt.Errorf("head of dropped %s is unreadable; not asking for its retirement: %w", c, err)
	}
	if r.e.beforeHeadRetire != nil {
		r.e.beforeHeadRetire()
	}
	if r.e.cfg.Guards.IncarnationFence && h.Inc() != r.p.Incarnation {
		r.otherIncarnation(h.Inc())
		return nil
	}
	if err := r.fresh(ctx); err != nil {
		return err
	}
	if r.e.ports.Heads == nil {
		return fmt.Errorf("tombstone cleanup of %s: no publisher configured to retire its head", c)
	}
	req := contract.NewRetireRequest(h)
	ans, err := r.e.ports.Heads.Retire(ctx, req)
	r.rep.Calls++
	r.p.DeleteCalls++
	if err != nil {
		// Outcome unknown (rule 6): the next run re-reads the head and
		// sends the same request again (same id; the publisher answers
		// from the head).
		return fmt.Errorf("retire head of dropped %s incarnation %d v%d: %w", c, r.p.Incarnation, h.Version, err)
	}
	switch ans.Status {
	case contract.RetireAccepted:
		r.e.metrics.Add("TombstoneHeadsRetired", 1)
		r.p.HeadDeleted = true
		r.p.Phase = PhaseWaiting
		return nil
	case contract.RetireConflict:
		if contract.Lifetime(ans.HeadIncarnation) != r.p.Incarnation {
			r.otherIncarnation(contract.Lifetime(ans.HeadIncarnation))
			return nil
		}
		// The dropped lineage itself moved (a late commit of the dropped
		// incarnation): clean from the new head again.
		r.e.log.Warn("dropped lineage moved before its head was retired; cleaning from the new head", "collection", c,
			"incarnation", r.p.Incarnation, "read_version", h.Version, "head_version", ans.HeadVersion)
		r.p.Phase, r.p.HeadVersion, r.p.HeadChecksum = PhaseObjects, 0, ""
		return errBudget
	default:
		return fmt.Errorf("publisher refused to retire the head of dropped %s incarnation %d v%d (%s): %s: %w",
			c, r.p.Incarnation, h.Version, ans.Status, ans.Reason, ErrUnconfirmed)
	}
}

// otherIncarnation ends the head phase at a head of another lifetime: it is
// not this cleanup's to retire, and this incarnation's head is gone.
func (r *tombRun) otherIncarnation(inc uint64) {
	r.e.metrics.Add("TombstoneHeadOfOtherIncarnation", 1)
	r.e.log.Warn("head names another incarnation; not retiring it", "collection", r.task.Collection, "head_incarnation", inc, "incarnation", r.p.Incarnation)
	r.p.Phase = PhaseWaiting
}

// spend takes one call of the run's budget.
func (r *tombRun) spend() error {
	if r.rep.Calls >= r.maxCalls || !r.e.now().Before(r.deadline) {
		return errBudget
	}
	return nil
}

// deleteKeys deletes keys in order, in batches, each call within the
// run's budget, and returns how many leading keys are confirmed gone (a
// key already gone counts): the cursor moves past exactly those. Keys not
// confirmed after every attempt fail the run.
func (r *tombRun) deleteKeys(ctx context.Context, keys []string) (int, error) {
	done := 0
	for start := 0; start < len(keys); start += r.e.cfg.BatchSize {
		batch := keys[start:min(start+r.e.cfg.BatchSize, len(keys))]
		size := len(batch)
		for attempt := 0; ; attempt++ {
			if err := r.spend(); err != nil {
				return done, err
			}
			if r.e.pacer != nil {
				if err := r.e.pacer.Wait(ctx, r.task.Collection, len(batch)); err != nil {
					return done, err
				}
			}
			if err := r.fresh(ctx); err != nil {
				return done, err
			}
			res, err := r.e.ports.Deleter.DeleteBatch(ctx, batch)
			r.rep.Calls++
			r.p.DeleteCalls++
			if err == nil && len(res.Failed) == 0 {
				done += size
				r.rep.Deleted += len(batch)
				break
			}
			if attempt+1 >= r.e.cfg.MaxAttempts {
				return done, fmt.Errorf("tombstone cleanup of %s: %d keys not deleted (%v): %w", r.task.Collection, len(res.Failed), err, ErrUnconfirmed)
			}
			if len(res.Failed) > 0 {
				var left []string
				for _, k := range batch {
					if _, failed := res.Failed[k]; failed {
						left = append(left, k)
					}
				}
				r.rep.Deleted += len(batch) - len(left)
				batch = left
			}
			if err := r.e.sleep(ctx, r.e.cfg.RetryBackoff<<attempt); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

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
		leftEvidence = fmt.Sprintf("; listed still: %d manifest keys, %d outputs, %d artifacts (%s)", left.Manifests, left.Outputs, left.Artifacts, left.First)
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
		{Name: contract.DepObjects, State: state(gone(func(l *TombstoneLeft) int64 { return l.Outputs })), Evidence: fmt.Sprintf("%d objects and %d never-committed outputs deleted or already gone over %d runs (%d outputs still young)%s", r.p.ObjectsDeleted, r.p.OutputsDeleted, r.p.Runs, r.p.YoungOutputs, leftEvidence)},
		{Name: contract.DepManifests, State: state(gone(func(l *TombstoneLeft) int64 { return l.Manifests })), Evidence: fmt.Sprintf("%d roots, %d parts, %d uncommitted manifest keys deleted; head retired by the publisher: %v%s", r.p.RootsDeleted, r.p.PartsDeleted, r.p.StraysDeleted, r.p.HeadDeleted, leftEvidence)},
		{Name: contract.DepControlArtifacts, State: state(gone(func(l *TombstoneLeft) int64 { return l.Artifacts })), Evidence: fmt.Sprintf("%d of %d named by CCS deleted%s", r.p.ArtifactsDeleted, len(r.facts.ControlArtifacts), leftEvidence)},
		{Name: contract.DepReservationHorizon, State: state(horizonOK), Evidence: fmt.Sprintf("horizon %d, now %d", horizon, now)},
		{Name: contract.DepCCSPreconditions, State: state(len(pending) == 0), Evidence: "pending: [" + strings.Join(pending, ", ") + "]"},
	}
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
			"incarnation", r.p.Incarnation, "manifests", left.Manifests, "outputs", left.Outputs, "artifacts", left.Artifacts, "first", left.First)
		r.p.Phase, r.p.NextDueUnixMs = PhaseOutputs, r.e.now().Add(r.e.cfg.RetryAfter).UnixMilli()
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

// save writes the cursor over the Seq it was read at.
func (r *tombRun) save(ctx context.Context) error {
	r.p.Seq++
	r.p.UpdatedAtUnixMs = r.e.now().UnixMilli()
	r.rep.Progress = r.p
	if err := r.e.ports.Progress.SaveProgress(ctx, r.p); err != nil {
		return fmt.Errorf("save tombstone progress of %s incarnation %d: %w", r.p.Collection, r.p.Incarnation, err)
	}
	return nil
}
