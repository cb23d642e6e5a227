package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/metrics"
)

// ErrUnconfirmed: some deletes were not confirmed after every attempt; the
// task fails so that its message is retried.
var ErrUnconfirmed = errors.New("deletes not confirmed")

// Report is what one sweep did.
type Report struct {
	Collection       string            `json:"collection"`
	Incarnation      uint64            `json:"incarnation,omitempty"`
	HeadVersion      uint64            `json:"head_version,omitempty"` // the head the sweep judged
	Tombstoned       bool              `json:"tombstoned"`
	Blocked          string            `json:"blocked,omitempty"`
	Refused          string            `json:"refused,omitempty"`
	ObjectsDeleted   int               `json:"objects_deleted"`
	AlreadyGone      int               `json:"already_gone"`
	OrphansDeleted   int               `json:"orphans_deleted"`
	PartsDeleted     int               `json:"parts_deleted"`
	ManifestsDeleted int               `json:"manifests_deleted"`
	Deleted          []string          `json:"deleted"`
	DeleteCalls      int               `json:"delete_calls"`
	KeysSent         int               `json:"keys_sent"`
	Retries          int               `json:"retries"`
	Proofs           int               `json:"proofs"`                 // eligibility proofs taken before delete calls
	StaleProofs      int               `json:"stale_proofs,omitempty"` // batches the delete port refused: their proof went stale before the call (proven again)
	Unconfirmed      map[string]string `json:"unconfirmed,omitempty"`
	DeferredByReason map[string]int    `json:"deferred_by_reason"`
	TrimStoppedAt    uint64            `json:"trim_stopped_at,omitempty"` // version whose objects are not all confirmed gone
	RemainingObjects int64             `json:"remaining_objects"`
	RemainingBytes   int64             `json:"remaining_bytes"`
	// NextDueUnixMs is the earliest time debt other than a lifecycle
	// retention window may become deletable; RetentionObjects (counted in
	// RemainingObjects too) are held by lifecycle retention alone, the
	// earliest due at RetentionDueUnixMs: the retention_reclaim class.
	NextDueUnixMs      int64 `json:"next_due_unix_ms,omitempty"`
	RetentionObjects   int64 `json:"retention_objects,omitempty"`
	RetentionDueUnixMs int64 `json:"retention_due_unix_ms,omitempty"`
	// More: the sweep stopped at its bound (max_sweep_candidates) with
	// eligible candidates left; its continuation is enqueued at once.
	More     bool `json:"more,omitempty"`
	Complete bool `json:"complete"` // every cleanup dependency confirmed (tombstone)
}

// LogRefused is the message of the error log line a refusal writes (with
// its collection and reason): the simulation judges every refusal by it.
const LogRefused = "gc refused: nothing (more) deleted"

// Executor sweeps collections: Plan, then Apply with execution-time checks.
type Executor struct {
	ports Ports
	cfg   Config
	// beforeHeadDelete runs when a tombstone cleanup reaches its head
	// phase, before the head is re-read (tests delay the retirement across
	// a re-creation there); beforeHeadRetire runs after that read, right
	// before the publisher is asked to retire what it read.
	beforeHeadDelete func()
	beforeHeadRetire func()
	lin              Lineage
	pacer            *Pacer
	now              func() time.Time
	sleep            Sleeper
	metrics          *metrics.Recorder
	log              *slog.Logger
	waits            atomic.Uint64 // waits made (stamp): a reading taken before one serves no proof
}

// New wires an executor. pacer may be nil (unpaced); sleep is used for
// retry backoff.
func New(ports Ports, cfg Config, pacer *Pacer, now func() time.Time, sleep Sleeper, m *metrics.Recorder, log *slog.Logger) *Executor {
	cfg = cfg.withDefaults()
	if sleep == nil {
		sleep = SleepContext
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Executor{ports: ports, cfg: cfg, lin: lineageOf(ports.ReadPorts, cfg), pacer: pacer, now: now, sleep: sleep, metrics: m, log: log}
}

// SetBeforeHeadDelete sets a hook run when a tombstone cleanup reaches its
// head phase, before it re-reads the head (tests).
func (e *Executor) SetBeforeHeadDelete(fn func()) { e.beforeHeadDelete = fn }

// SetBeforeHeadRetire sets a hook run between the head phase's re-read of
// the head and its retirement request to the publisher (tests: a
// re-creation in that window).
func (e *Executor) SetBeforeHeadRetire(fn func()) { e.beforeHeadRetire = fn }

// Plan computes what a sweep of collection would do now, reading only. Each
// plan reads the lineage afresh (its own reader: every part it relies on,
// or finds unverified, is read and verified in this sweep).
func (e *Executor) Plan(ctx context.Context, collection string) (Plan, error) {
	now := e.now()
	return planner{ports: e.ports.ReadPorts, cfg: e.cfg, lin: lineageOf(e.ports.ReadPorts, e.cfg), seen: readSighting(e.ports.ReadPorts, e.cfg, now), confSeen: readConfirmationSighting(e.ports.ReadPorts, now)}.plan(ctx, collection, now)
}

// plan is Plan for a run: a tombstone's first sighting is recorded.
func (e *Executor) plan(ctx context.Context, collection string) (Plan, error) {
	return planner{ports: e.ports.ReadPorts, cfg: e.cfg, lin: lineageOf(e.ports.ReadPorts, e.cfg), seen: e.sighting, confSeen: e.confirmationSighting}.plan(ctx, collection, e.now())
}

// Run sweeps the collection a task names: plan, apply, record the sweep and,
// for tombstone cleanup, report the completion to the handoff. A definite
// refusal (at plan or at execution) deletes nothing more and is the
// answer: the task succeeds and reconciliation asks again.
func (e *Executor) Run(ctx context.Context, task contract.Task) (Report, error) {
	started := e.now()
	c := task.Collection
	rep := Report{Collection: c, DeferredByReason: map[string]int{}}
	defer func() {
		// Per class (gc, retention_reclaim, tombstone_cleanup): one
		// executor, one set of delete gates, several task classes.
		e.metrics.AddDim("GCTasksRun", "Kind", string(task.Kind), 1)
		e.metrics.AddDim("ObjectsReclaimed", "Kind", string(task.Kind), float64(rep.ObjectsDeleted+rep.OrphansDeleted))
	}()
	if task.Kind == contract.KindRetentionReclaim && task.DueUnixMs > started.UnixMilli() {
		// Delivered before its window's due time (a clock ahead, an
		// operator's enqueue): the sweep still judges every gate now, so
		// nothing is deleted before its retention has passed.
		e.metrics.Add("RetentionReclaimEarly", 1)
	}
	if task.Kind == contract.KindTombstoneCleanup {
		tr, err := e.RunTombstone(ctx, task)
		rep.Incarnation, rep.Tombstoned, rep.ObjectsDeleted, rep.DeleteCalls = tr.Incarnation, true, tr.Deleted, tr.Calls
		rep.Complete = tr.Outcome == TombCompleted || tr.Outcome == TombDone
		rep.NextDueUnixMs = tr.Progress.NextDueUnixMs
		if err == nil {
			e.continueTombstone(ctx, task, tr)
		}
		return rep, err
	}
	pl, err := e.plan(ctx, c)
	planned := err == nil
	if planned && e.cfg.Guards.IncarnationFence && pl.Incarnation != task.Inc() {
		// A late task of another lifetime of the name: this head is not
		// the one it was derived from (guard.IncarnationFence).
		e.metrics.Add("GCTasksOtherIncarnation", 1)
		e.log.Info("gc task of another incarnation dropped", "collection", c, "task", task.TaskID, "task_incarnation", task.Inc(), "head_incarnation", pl.Incarnation)
		rep.Incarnation = pl.Incarnation
		return rep, nil
	}
	if len(pl.CorruptParts) > 0 {
		e.metrics.Add("ManifestPartCorrupt", float64(len(pl.CorruptParts)))
		e.log.Error("manifest parts fail verification", "collection", c, "parts", pl.CorruptParts)
	}
	if planned {
		rep, err = e.Apply(ctx, pl)
	}
	var re *RefusedError
	if errors.As(err, &re) {
		rep.Refused, err = re.Reason, nil
		e.log.Error(LogRefused, "collection", c, "task", task.TaskID, "reason", re.Reason, "err", re)
	}
	e.record(ctx, rep, pl.HeadChecksum)
	if planned && rep.Refused == "" && pl.unverifiedHeld {
		e.verifiedLineage(ctx, pl)
	}
	if err != nil || !planned {
		return rep, err
	}
	if task.Kind == contract.KindTombstoneCleanup && e.ports.Completions != nil {
		if err := e.complete(ctx, task, pl, rep, started); err != nil {
			return rep, err
		}
	}
	if len(rep.Unconfirmed) > 0 {
		return rep, fmt.Errorf("gc of %s: %d keys: %w", c, len(rep.Unconfirmed), ErrUnconfirmed)
	}
	if next, ok := Continuation(task, rep, e.now()); ok && e.ports.Continuations != nil {
		if err := e.ports.Continuations.Enqueue(ctx, []contract.Task{next}); err != nil {
			// The next reconciliation continues instead (its debt is due now).
			e.log.Warn("enqueue sweep continuation failed; reconciliation continues it", "collection", c, "err", err)
		} else {
			e.metrics.AddDim("SweepsContinued", "Kind", string(task.Kind), 1)
		}
	}
	return rep, nil
}

// Continuation is the scheduling policy's rule for a sweep that stopped at
// its bound (a pure function): one bounded slice per task, the rest as a
// fresh task at the tail of the queue. A collection with a huge backlog
// then holds at most one slot of its queue at a time (FIFO group = the
// collection) and goes behind every collection already waiting after each
// slice, so nobody waits behind it for more than one slice per collection
// ahead, and it is not held back to one slice per reconcile interval when
// the queue is otherwise idle. A slice that freed nothing is not
// continued (no loop through the queue). Only gc and retention_reclaim sweeps
// continue this way (a tombstone cleanup run continues by its own rule,
// TombstoneContinuation).
func Continuation(task contract.Task, rep Report, now time.Time) (contract.Task, bool) {
	progressed := rep.ObjectsDeleted+rep.OrphansDeleted+rep.PartsDeleted+rep.ManifestsDeleted > 0 // a slice that deleted nothing waits for reconciliation, never loops
	if !rep.More || !progressed || rep.Refused != "" || rep.Blocked != "" || (task.Kind != contract.KindGC && task.Kind != contract.KindRetentionReclaim) {
		return contract.Task{}, false
	}
	return contract.NewContinuationTask(task, now.UnixMilli()), true
}

// TombstoneContinuation is the scheduling rule for a tombstone cleanup run
// that stopped at its budget (a pure function), as Continuation is for a
// sweep: a run that moved its cursor (TombstoneReport.Advanced) is
// continued at once by a fresh task at the tail of the queue, behind every
// collection already waiting, instead of waiting for the next
// reconciliation (a dropped collection with more to delete than one run's
// budget was held to one run per reconcile interval). So is the first run
// in a row that stopped at its budget without moving it
// (TombstoneProgress.StalledRuns 1: its time went on waiting for the
// fleet's delete budget, which a clock behind the bucket's must wait out);
// a second such run in a row, a run that waits for a key, completed or
// was stale is not continued (no loop through the queue). A lost
// continuation costs one interval: reconciliation schedules the cleanup
// again.
func TombstoneContinuation(task contract.Task, tr TombstoneReport, now time.Time) (contract.Task, bool) {
	if task.Kind != contract.KindTombstoneCleanup || tr.Outcome != TombProgressed || !tr.Bounded ||
		(!tr.Advanced && tr.Progress.StalledRuns > maxStalledContinued) {
		return contract.Task{}, false
	}
	return contract.NewContinuationTask(task, now.UnixMilli()), true
}

// maxStalledContinued is how many tombstone runs in a row that moved
// nothing are continued at once.
const maxStalledContinued = 1

// continueTombstone enqueues a bounded tombstone run's continuation.
func (e *Executor) continueTombstone(ctx context.Context, task contract.Task, tr TombstoneReport) {
	next, ok := TombstoneContinuation(task, tr, e.now())
	if !ok || e.ports.Continuations == nil {
		return
	}
	if err := e.ports.Continuations.Enqueue(ctx, []contract.Task{next}); err != nil {
		e.log.Warn("enqueue tombstone cleanup continuation failed; reconciliation continues it", "collection", task.Collection, "err", err)
		return
	}
	e.metrics.AddDim("SweepsContinued", "Kind", string(task.Kind), 1)
}

// record emits a sweep's metrics and its disposable debt record.
func (e *Executor) record(ctx context.Context, rep Report, headChecksum string) {
	for reason, n := range rep.DeferredByReason {
		e.metrics.AddDim("GCDeferred", "Reason", reason, float64(n))
	}
	e.metrics.Add("ObjectsDeleted", float64(rep.ObjectsDeleted+rep.OrphansDeleted))
	e.metrics.Add("ManifestsDeleted", float64(rep.ManifestsDeleted))
	e.metrics.Add("ManifestPartsDeleted", float64(rep.PartsDeleted))
	e.metrics.Add("GCDeleteRetries", float64(rep.Retries))
	e.metrics.Add("GCUnconfirmedDeletes", float64(len(rep.Unconfirmed)))
	if rep.Refused != "" {
		e.metrics.AddDim("GCRefused", "Reason", rep.Refused, 1)
		return
	}
	if e.ports.Sweeps != nil {
		sw := SweepRecord{Collection: rep.Collection, Incarnation: rep.Incarnation, HeadVersion: rep.HeadVersion, HeadChecksum: headChecksum,
			RemainingObjects: rep.RemainingObjects - rep.RetentionObjects,
			RemainingBytes:   rep.RemainingBytes, NextDueUnixMs: rep.NextDueUnixMs, RetentionObjects: rep.RetentionObjects,
			RetentionDueUnixMs: rep.RetentionDueUnixMs, SweptAtUnixMs: e.now().UnixMilli()}
		if err := e.recordSweep(ctx, sw); err != nil {
			e.log.Warn("record gc sweep failed (disposable state)", "collection", rep.Collection, "err", err)
		}
	}
	e.log.Info("gc sweep", "collection", rep.Collection, "objects_deleted", rep.ObjectsDeleted, "already_gone", rep.AlreadyGone,
		"orphans_deleted", rep.OrphansDeleted, "manifests_deleted", rep.ManifestsDeleted, "deferred", rep.DeferredByReason,
		"unconfirmed", len(rep.Unconfirmed), "blocked", rep.Blocked)
}

// maxReportedKeys bounds the keys a completion lists (an SQS message is at
// most 256 KiB); counts are complete.
const maxReportedKeys = 1000

func (e *Executor) complete(ctx context.Context, task contract.Task, pl Plan, rep Report, started time.Time) error {
	outcome, reason := contract.OutcomeSucceeded, ""
	complete := rep.Complete
	switch {
	case !pl.Tombstoned:
		outcome, reason, complete = contract.OutcomeStale, "collection is not tombstoned in the current CCS facts", false
	case pl.FactsVersion != task.CCSFactsVersion:
		outcome, reason, complete = contract.OutcomeStale, fmt.Sprintf("CCS facts moved from v%d to v%d", task.CCSFactsVersion, pl.FactsVersion), false
	case complete:
		reason = "remaining publisher-owned dependencies: " + fmt.Sprint(pl.Remaining)
	default:
		reason = fmt.Sprintf("cleanup incomplete: deferred %v", rep.DeferredByReason)
	}
	deleted := rep.Deleted
	if len(deleted) > maxReportedKeys {
		deleted = deleted[:maxReportedKeys]
	}
	comp := contract.Completion{
		SchemaVersion: contract.SchemaVersion, TaskID: task.TaskID, Kind: task.Kind, Collection: task.Collection,
		// The head the cleanup was judged against (the handoff records the
		// release intent only while it is still the head).
		BaseManifestVersion: pl.HeadVersion, BaseManifestChecksum: pl.HeadChecksum,
		CCSFactsVersion: pl.FactsVersion, CCSFactsDigest: contract.FactsDigest(task.Kind, pl.facts), Outcome: outcome, Reason: reason,
		StartedAtUnixMs: started.UnixMilli(), FinishedAtUnixMs: e.now().UnixMilli(),
		Cleanup: &contract.Cleanup{Deleted: nonNilKeys(deleted), AlreadyGone: rep.AlreadyGone, DeferredByReason: rep.DeferredByReason, Complete: complete},
	}
	// Its identity (contract.CompletionID) distinguishes a complete report
	// from a partial one, so a partial report never suppresses (as a
	// duplicate) the complete one.
	if err := e.ports.Completions.Report(ctx, comp); err != nil {
		return fmt.Errorf("report tombstone cleanup of %s: %w", task.Collection, err)
	}
	return nil
}

func nonNilKeys(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
