package observe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/store"
)

// Objects reads objects from the data bucket.
type Objects interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// StateStore keeps each collection's observed state.
type StateStore interface {
	// Advance records st only if st.Version is newer than the recorded one,
	// adding st's GC debt to the recorded debt; the recorded GC due time
	// becomes the earliest of the recorded one and st's (a debt recorded
	// earlier may be due later). It returns the previous
	// state (zero when none). When the recorded version is not older it
	// returns that state and an error wrapping store.ErrConditionFailed.
	// With st.Expect set it records st only while there is no record or
	// the record holds exactly that head, and otherwise returns the
	// recorded state and the same error.
	Advance(ctx context.Context, st Observed) (prev Observed, err error)
	// Get returns the recorded state of one incarnation (zero Observed
	// when none).
	Get(ctx context.Context, collection string, incarnation uint64) (Observed, error)
	// Revert puts prev back if the record still holds st (compensation when
	// enqueuing failed, so that a retried event does the work again).
	Revert(ctx context.Context, st, prev Observed) error
}

// TaskQueue enqueues tasks to their FIFO queue (one call per queue).
type TaskQueue interface {
	Enqueue(ctx context.Context, tasks []contract.Task) error
}

// Cleanups says when the tombstone cleanup of one incarnation handed its
// completion to the release workflow under the given CCS facts version (0:
// it did not). That is derivative state: reconciliation trusts it only
// until the completion's delivery bound passed (Config.ReleaseReaskAfter);
// after that, CCS's facts decide whether the release is still owed.
type Cleanups interface {
	CleanupDoneAt(ctx context.Context, collection string, incarnation, factsVersion uint64) (doneAtUnixMs int64, err error)
}

// FactsSource reads CCS scheduling facts.
type FactsSource interface {
	Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
}

// Observed is the observed state of one incarnation of a collection
// (disposable). It is keyed by (collection, incarnation): a re-created name
// starts from no state, so its v1 is new, never "stale" against the
// previous lifetime's versions.
type Observed struct {
	Collection       string
	Incarnation      uint64
	Version          uint64
	Checksum         string
	CommitTsUnixMs   int64
	ObservedAtUnixMs int64
	FactsVersion     uint64
	Debt             Debt
	// RewriteClaims counts the heads that found a rewrite (compaction or
	// transition) due; RewriteTaken is RewriteClaims as a worker last took
	// a rewrite task. While RewriteClaims > RewriteTaken a rewrite task is
	// pending and a new head with a rewrite due updates the debt, not the
	// queue (the pending task's worker plans against the head it finds).
	// Counters only (ADD, SET from each other): no attribute is removed.
	RewriteClaims, RewriteTaken int64
	// ObservationID names the observation that wrote the state (unique per
	// observation): an advance refused with exactly this id in the old
	// image is our own write retried by the SDK. Version, checksum and
	// observation time alone cannot tell it from another observation of
	// the same head within the same millisecond (a duplicate event).
	ObservationID string
	// CompactionServed: this head is a rewrite's cutover, so a compaction
	// still due restarts its due clock (Advance sets, not keeps, it).
	CompactionServed bool
	// CompactionIdleVersion and CompactionIdleChecksum name the head at
	// which a compaction worker planned the full object set and found
	// nothing (written by the executor, only while the state records that
	// head). See CompactionOwed.
	CompactionIdleVersion  uint64
	CompactionIdleChecksum string
	CompactionIdlePolicy   string // the compaction policy's fingerprint it was planned under
	// Expect is not recorded: the head an advance requires the record to
	// hold (descent.go, guard.LineageDescent).
	Expect *Expect `json:"-"`
	// UnverifiedFromVersion and UnverifiedFromChecksum are the recorded
	// head an advance over a gap started from, kept until GC's walk of
	// the lineage holds it (descent.go); 0: none.
	UnverifiedFromVersion  uint64
	UnverifiedFromChecksum string
}

// Expect is a recorded head an advance requires (Version 0: no record).
// KeepFrom: the advance keeps this head in the record as the head it
// advanced from without checking descent (a gap), unless one is kept.
type Expect struct {
	Version  uint64
	Checksum string
	KeepFrom bool
}

// CompactionOwed reports whether compaction is owed at the recorded head:
// the summary's debt is due and no worker found the head's full plan
// empty. The summary only approximates the plan (it counts a level across
// tiers), so a due debt can have nothing to plan; the executor's empty
// full plan is the last word for that head, and without it reconciliation
// would enqueue a task that plans nothing at every pass. A new head is
// judged afresh (the record names the old one), and so is this head under
// another compaction policy: policy is the fingerprint of the policy the
// debt is judged by (policy.Compaction.Fingerprint; "": any).
func (o Observed) CompactionOwed(policy string) bool {
	idle := o.CompactionIdleVersion == o.Version && o.CompactionIdleChecksum == o.Checksum && o.Version != 0 &&
		(policy == "" || o.CompactionIdlePolicy == policy)
	return o.Debt.CompactionDue && !idle
}

// Debt is the background debt derived from a root: compaction from the
// summary, GC from what commits removed (accumulated until GC clears it).
type Debt struct {
	Objects       int64
	Bytes         int64
	MaxFanOut     int64 // most objects in one level below the deepest
	DeleteDensity float64
	CompactionDue bool
	// CompactionDueSinceUnixMs is when compaction became due and was not
	// served since (0: not due): kept across heads while it stays due,
	// restarted by a rewrite's cutover (the class was served). The age of
	// the oldest due compaction (signal OldestDueAgeMs) comes from it.
	CompactionDueSinceUnixMs int64
	GCObjects                int64 // objects removed by commits since GC last cleared the debt
	GCBytes                  int64
	GCDueAtUnixMs            int64 // earliest time any of that debt may become deletable
	GCSweptAtUnixMs          int64 // when a GC sweep last finished (written by GC)
	// GCAddedObjects and GCAddedBytes are the running totals of the GC
	// debt the advances added (never reset): a sweep record carried
	// forward to a head keeps what the advances after it added by
	// difference (gc.SweepRecord.Added), so it lands however fast the
	// head moves.
	GCAddedObjects, GCAddedBytes int64
	// RetentionObjects are dereferenced objects the last GC sweep found
	// held by lifecycle retention alone (every other delete gate passed);
	// RetentionDueAtUnixMs is when the first of them becomes due (0:
	// none). Written by GC; reconciliation schedules a retention_reclaim
	// task once it is due.
	RetentionObjects     int64
	RetentionDueAtUnixMs int64
	TombstoneActive      bool
	// TransitionDue: the CCS lifecycle policy has a tier transition and a
	// part of the root holds an object in another tier whose maximum
	// timestamp is at or before now - transition_after_ms (judged from the
	// root's part references alone). TransitionDueAtUnixMs is the earliest
	// time any part of another tier becomes due (0: none). Both are derived
	// from the head and the facts on every observation; they are not part
	// of the recorded state.
	TransitionDue         bool
	TransitionDueAtUnixMs int64
}

// Config tunes the debt model.
type Config struct {
	// CompactionDue decides from the root's summary whether compaction is
	// due, with the very policy the executor plans with (the wiring sets
	// compact.Policy.Due), so no task is enqueued that plans nothing.
	// Nil: compaction is never due.
	CompactionDue func(contract.Summary) bool `json:"-"`
	// CompactionPolicy is the fingerprint of the policy CompactionDue
	// judges by: a head recorded idle under another one is owed again.
	CompactionPolicy string
	TokenLifetime    time.Duration // manifests stay openable this long after being superseded
	RetentionWindow  time.Duration // global_safe_ts - retention_window bounds eviction
	GCSweepInterval  time.Duration // reconciliation sweeps at least this often
	// CoalesceRewrites: at most one pending rewrite task per collection
	// (a lost one is made up for by reconciliation, which enqueues due
	// rewrites without looking at the claims).
	CoalesceRewrites bool
	// CompactionMaxWait: compaction due this long without a cutover goes
	// before a due lifecycle transition (policy compaction.max_wait_behind_transition_ms;
	// 0: a due transition always goes first).
	CompactionMaxWait time.Duration
	// CompactionRebuildAfter: a compaction still owed at an unchanged head
	// whose task was taken is derived again under a fresh identity this
	// long after the head was observed, then at 2x, 4x, ... while under
	// GCSweepInterval (policy compaction.rebuild_after_ms, at least
	// max_task_lifetime_ms; 0: only the sweep-interval rebuild).
	CompactionRebuildAfter time.Duration
	// Paused collections get no new task from the observer or
	// reconciliation (policy paused_collections).
	Paused policy.CollectionSet
	// ReleaseReaskAfter: a dropped incarnation whose cleanup reported done
	// this long ago and whose release CCS has not recorded is scheduled
	// again (policy.Policy.ReleaseReaskAfter; guard.ReleaseReask).
	ReleaseReaskAfter time.Duration
}

// ConfigFrom is the observer's configuration under a validated policy (GC
// debt timing from its gc section), with compactionDue deciding "compaction
// is due" (compact.PolicyFrom(p.Compaction).Due: package compact cannot be
// imported here, its tests reach the adapters, which import this package).
func ConfigFrom(p policy.Policy, compactionDue func(contract.Summary) bool) Config {
	return Config{
		CompactionDue:          compactionDue,
		CompactionPolicy:       p.Compaction.Fingerprint(),
		TokenLifetime:          p.GC.TokenLifetime.D(),
		RetentionWindow:        p.GC.RetentionWindow.D(),
		GCSweepInterval:        p.GC.SweepInterval.D(),
		Paused:                 p.PausedCollections,
		CompactionMaxWait:      p.Compaction.MaxWaitBehindTransition.D(),
		CompactionRebuildAfter: max(p.Compaction.RebuildAfter.D(), p.MaxTaskLifetime.D()),
		CoalesceRewrites:       true,
		ReleaseReaskAfter:      p.ReleaseReaskAfter(),
	}
}

// DefaultConfig is the production default timing, without a compaction
// rule (tests set CompactionDue).
func DefaultConfig() Config { return ConfigFrom(policy.Default(), nil) }

// Outcome of one observation.
type Outcome string

// Outcomes.
const (
	OutcomeIgnored   Outcome = "ignored"   // not a head key
	OutcomeAdvanced  Outcome = "advanced"  // new head observed
	OutcomeDuplicate Outcome = "duplicate" // head already observed at this version
	OutcomeStale     Outcome = "stale"     // a newer head was already observed
)

// Result reports one observation.
type Result struct {
	Outcome     Outcome
	Collection  string
	Incarnation uint64
	Version     uint64
	Previous    uint64
	Origin      string // why the observed version exists: create, append or cutover
	// FactsVersion is the CCS facts version read by this observation (the
	// facts behind Debt.TombstoneActive, fresher than the recorded state's
	// when the head did not move).
	FactsVersion uint64
	Tasks        []contract.Task
	Debt         Debt
}

// Observer is the use case.
type Observer struct {
	objects  Objects
	state    StateStore
	queue    TaskQueue
	facts    FactsSource
	now      func() time.Time
	cfg      Config
	cleanups Cleanups
	releaser NamespaceReleaser
	metrics  *metrics.Recorder
	log      *slog.Logger
	guards   guard.Set
	ids      *observationIDs
}

// WithGuards returns o running with g (mutation proofs; New uses
// guard.All()).
func (o *Observer) WithGuards(g guard.Set) *Observer {
	c := *o
	c.guards = g
	return &c
}

// SetCleanups wires the tombstone cleanup progress reader (optional:
// without it reconciliation stops scheduling a dropped incarnation only
// when CCS says its release intent is recorded).
func (o *Observer) SetCleanups(c Cleanups) { o.cleanups = c }

// New wires an observer. facts may be nil (no CCS: facts version 0).
func New(objects Objects, state StateStore, queue TaskQueue, facts FactsSource, now func() time.Time, cfg Config, m *metrics.Recorder, log *slog.Logger) *Observer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Observer{objects: objects, state: state, queue: queue, facts: facts, now: now, cfg: cfg, metrics: m, log: log, guards: guard.All(),
		ids: newObservationIDs()}
}

// ErrBadHead wraps every reason a head or its root cannot be trusted (the
// one verified head -> root read is lineage.HeadRoot).
var ErrBadHead = lineage.ErrBadHead

// HandleKey observes the head of the collection whose head key is key.
// Keys that are not head keys are ignored.
func (o *Observer) HandleKey(ctx context.Context, key string) (Result, error) {
	collection, ok := contract.CollectionOfHeadKey(key)
	if !ok {
		o.log.Debug("ignored key", "key", key)
		return Result{Outcome: OutcomeIgnored}, nil
	}
	return o.Observe(ctx, collection)
}

// Observe re-reads collection's head and records, diffs and schedules it.
func (o *Observer) Observe(ctx context.Context, collection string) (Result, error) {
	return o.observe(ctx, collection, false)
}

// observe is Observe; reconciling says that no head event asked (a
// reconciliation's look at the head): an unchanged head is then counted
// as ReconcileHeadsUnchanged, not as an absorbed duplicate event.
func (o *Observer) observe(ctx context.Context, collection string, reconciling bool) (Result, error) {
	head, root, err := lineage.HeadRoot(ctx, o.objects, collection)
	if err != nil {
		return Result{Collection: collection}, err
	}
	facts, err := o.readFacts(ctx, collection)
	if err != nil {
		return Result{Collection: collection}, err
	}
	now := o.now()
	read := facts // as CCS answered: the tasks' digests are of these
	if facts.Inc() != head.Inc() {
		// The facts describe another lifetime of the name than the head
		// (CCS re-created or dropped it and the head is not its yet):
		// nothing is scheduled from this pair; the facts of the head's
		// own lifetime are not known.
		facts = contract.CollectionFacts{Collection: collection, Incarnation: head.Incarnation, FactsVersion: facts.FactsVersion}
		o.metrics.Add("IncarnationMismatch", 1)
	}
	st := Observed{
		Collection: collection, Incarnation: head.Inc(), Version: head.Version, Checksum: head.ManifestChecksum, CommitTsUnixMs: root.CommitTsUnixMs,
		ObservedAtUnixMs: now.UnixMilli(), FactsVersion: facts.FactsVersion, ObservationID: o.ids.next(),
		Debt: o.debt(root, facts, now),
	}
	if st.Debt.CompactionDue {
		st.Debt.CompactionDueSinceUnixMs = st.ObservedAtUnixMs
		st.CompactionServed = root.Origin.Kind == contract.OriginCutover
	}
	tasks := o.tasks(head, st, now)
	if o.cfg.CoalesceRewrites && slices.ContainsFunc(tasks, func(t contract.Task) bool { return t.Kind.Rewrites() }) {
		st.RewriteClaims = 1 // the advance counts this head's claim
	}
	prev, err := o.advance(ctx, st, root)
	res := Result{Collection: collection, Incarnation: head.Inc(), Version: head.Version, Previous: prev.Version, Debt: st.Debt, Origin: root.Origin.Kind, FactsVersion: st.FactsVersion}
	own := false
	switch {
	case errors.Is(err, store.ErrConditionFailed) && o.guards.OwnWrite && ownAdvance(prev, st):
		// Our own advance, applied and retried by the SDK after its answer
		// was lost: the retry's old image is what we wrote, the state
		// before it is unknown. It is this observation's advance.
		own, prev, res.Previous = true, Observed{}, 0
		o.metrics.Add("OwnWritesRecognised", 1)
	case errors.Is(err, ErrLineageReplaced):
		return o.replaced(ctx, res, prev, head, read)
	case errors.Is(err, store.ErrConditionFailed):
		return o.absorbed(ctx, res, prev, head, root, facts, read, reconciling)
	case err != nil:
		return res, fmt.Errorf("advance observed state of %s to v%d: %w", collection, head.Version, err)
	}
	if prev.Version != 0 && prev.Version < root.ParentVersion {
		// Skipped versions' GC debt is not counted here; reconciliation's
		// lineage walk finds it. Compaction debt is absolute, so nothing is lost.
		o.log.Info("observed head after a gap", "collection", collection, "previous", prev.Version, "version", head.Version)
	}
	res.Outcome = OutcomeAdvanced
	res.Tasks = tasks
	if st.RewriteClaims > 0 && !own && prev.RewriteClaims > prev.RewriteTaken {
		// A rewrite task is already waiting for this collection: its
		// worker plans against the head it finds (this one or newer), so
		// this head adds debt, not a second task.
		res.Tasks = slices.DeleteFunc(res.Tasks, func(t contract.Task) bool { return t.Kind.Rewrites() })
		o.metrics.Add("RewritesCoalesced", 1)
	}
	if len(res.Tasks) > 0 {
		if err := o.enqueue(ctx, res.Tasks, read); err != nil {
			// A retried event re-derives the tasks from the recorded head
			// (absorbed); the revert makes it an advance again where it can.
			if own {
				return res, fmt.Errorf("enqueue %d tasks for %s v%d: %w", len(res.Tasks), collection, head.Version, err)
			}
			if rerr := o.state.Revert(ctx, st, prev); rerr != nil {
				o.log.Error("revert observed state failed; reconciliation will re-derive the tasks", "collection", collection, "err", rerr)
			}
			return res, fmt.Errorf("enqueue %d tasks for %s v%d: %w", len(res.Tasks), collection, head.Version, err)
		}
	}
	o.metrics.Add("HeadsObserved", 1)
	o.metrics.Duration("ObserveLagMs", now.Sub(time.UnixMilli(root.CommitTsUnixMs)))
	o.metrics.Add("TasksEnqueued", float64(len(res.Tasks)))
	o.log.Info("head observed", "collection", collection, "version", head.Version, "previous", prev.Version, "tasks", len(res.Tasks),
		"gc_objects", st.Debt.GCObjects, "compaction_due", st.Debt.CompactionDue, "transition_due", st.Debt.TransitionDue)
	return res, nil
}

// ownAdvance reports whether the state that refused st is st itself (the
// same observation id, version and checksum: no other observation wrote
// it, even one of the same head in the same millisecond).
func ownAdvance(cur, st Observed) bool {
	return st.ObservationID != "" && cur.ObservationID == st.ObservationID && cur.Version == st.Version && cur.Checksum == st.Checksum &&
		cur.ObservedAtUnixMs == st.ObservedAtUnixMs && cur.FactsVersion == st.FactsVersion
}

// movedPast reports whether the head, read again, has reached the
// observed state prev that refused head (same lifetime, prev's version
// with its content, or newer): head was read before the head moved, not
// put back. A head that cannot be read again counts as not moved (the
// sweep is enqueued: a regression's refusal stays prompt).
func (o *Observer) movedPast(ctx context.Context, head contract.Head, prev Observed) bool {
	h, err := lineage.ReadHead(ctx, o.objects, head.Collection)
	if err != nil || h.Inc() != head.Inc() {
		return false
	}
	return h.Version > prev.Version || h.Version == prev.Version && h.ManifestChecksum == prev.Checksum
}

// observationIDs names observations: a random prefix per observer (per
// Lambda instance) and a counter, unique without coordination.
type observationIDs struct {
	prefix string
	n      atomic.Uint64
}

func newObservationIDs() *observationIDs {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &observationIDs{prefix: hex.EncodeToString(b[:])}
}

func (g *observationIDs) next() string {
	return g.prefix + "-" + strconv.FormatUint(g.n.Add(1), 10)
}

func (o *Observer) absorbed(ctx context.Context, res Result, prev Observed, head contract.Head, root contract.Manifest, facts, read contract.CollectionFacts, reconciling bool) (Result, error) {
	if prev.Version > head.Version && o.movedPast(ctx, head, prev) {
		// Two observations raced: this one read the head before it moved
		// to (or past) the one the other recorded. Nothing is below what
		// was observed; the newer observation scheduled the newer head.
		o.metrics.Add("HeadObservationsRaced", 1)
	} else if prev.Version > head.Version || prev.Version == head.Version && prev.Checksum != head.ManifestChecksum {
		// The head just re-read is below (or beside) what was observed,
		// and still is when read again: a head regression. GC re-reads the
		// head and refuses a regression (GCRefused head_regression,
		// alarmed); a sweep now makes that prompt.
		o.metrics.Add("HeadBelowObserved", 1)
		t := contract.NewSweepTask(contract.KindGC, head.Collection, head.Version, head.ManifestChecksum, res.FactsVersion, o.now().UnixMilli()).In(head.Inc())
		if err := o.enqueue(ctx, []contract.Task{t}, read); err != nil {
			return res, fmt.Errorf("enqueue a gc sweep of %s (head v%d below observed v%d): %w", head.Collection, head.Version, prev.Version, err)
		}
		res.Tasks = append(res.Tasks, t)
	}
	if prev.Version == head.Version {
		if prev.Checksum != head.ManifestChecksum {
			return res, fmt.Errorf("%w: %s v%d observed with checksum %s, head now says %s", ErrBadHead, head.Collection, head.Version, prev.Checksum, head.ManifestChecksum)
		}
		res.Outcome = OutcomeDuplicate
		if reconciling {
			o.metrics.Add("ReconcileHeadsUnchanged", 1)
		} else {
			o.metrics.Add("DuplicateEventsAbsorbed", 1)
		}
		if o.guards.DuplicateRederive {
			tasks := o.rederive(head, root, facts, prev, reconciling)
			if len(tasks) > 0 {
				if err := o.enqueue(ctx, tasks, read); err != nil {
					return res, fmt.Errorf("re-enqueue %d tasks of %s v%d: %w", len(tasks), head.Collection, head.Version, err)
				}
				res.Tasks = append(res.Tasks, tasks...)
				o.metrics.Add("TasksReenqueued", float64(len(tasks)))
			}
		}
	} else {
		res.Outcome = OutcomeStale
		if reconciling {
			o.metrics.Add("ReconcileHeadsBehind", 1)
		} else {
			o.metrics.Add("StaleEventsAbsorbed", 1)
		}
	}
	o.log.Info("head event absorbed", "collection", head.Collection, "version", head.Version, "observed", prev.Version, "outcome", string(res.Outcome))
	return res, nil
}

// rederive returns the tasks the observation that recorded prev derived
// for head (the same identities: the same judgement time and facts), or,
// when the facts changed since, the tasks of head under the facts just
// read. Enqueuing them again is how a duplicate observation makes up for a
// lost enqueue (the observed state was written, the tasks never were):
// FIFO deduplication and the tasks' leases absorb the copies when the
// first enqueue did happen.
func (o *Observer) rederive(head contract.Head, root contract.Manifest, facts contract.CollectionFacts, prev Observed, reconciling bool) []contract.Task {
	at := o.now()
	if prev.FactsVersion == facts.FactsVersion && prev.ObservedAtUnixMs > 0 {
		at = time.UnixMilli(prev.ObservedAtUnixMs)
	}
	st := prev
	st.FactsVersion = facts.FactsVersion
	st.Debt = o.debt(root, facts, at)
	// Nothing for a head a worker found nothing to compact at
	// (CompactionOwed). A reconciliation's look at the head leaves the
	// rewrites' order to PlanReconcile, or a copy here would undo it
	// whenever FIFO deduplication no longer absorbs it (past its five
	// minutes: every pass): no compaction (PlanReconcile enqueues it
	// whenever it is owed, under the head's identity or a fresh one when a
	// result did not land), and no transition while an aged compaction has
	// its turn (compactionAged).
	owed := st.CompactionOwed(o.cfg.CompactionPolicy)
	aged := reconciling && compactionAged(o.cfg, prev, o.now().UnixMilli())
	return slices.DeleteFunc(o.tasks(head, st, at), func(t contract.Task) bool {
		switch t.Kind {
		case contract.KindCompaction:
			return reconciling || !owed
		case contract.KindLifecycleTransition:
			return aged
		}
		return false
	})
}

// enqueue sends tasks, each carrying the digest of the facts its kind
// depends on when facts (as CCS answered) are the version it pins
// (contract.Task.WithFacts): an executor then drops early only work whose
// facts changed.
func (o *Observer) enqueue(ctx context.Context, tasks []contract.Task, facts contract.CollectionFacts) error {
	for i := range tasks {
		tasks[i] = tasks[i].WithFacts(facts)
	}
	return o.queue.Enqueue(ctx, tasks)
}

func (o *Observer) readFacts(ctx context.Context, collection string) (contract.CollectionFacts, error) {
	if o.facts == nil {
		return contract.CollectionFacts{Collection: collection}, nil
	}
	f, err := o.facts.Facts(ctx, collection)
	if err != nil {
		return f, fmt.Errorf("read CCS facts of %s: %w", collection, err)
	}
	return f, nil
}

// debt derives the debt of one root from its summary and change alone.
func (o *Observer) debt(root contract.Manifest, facts contract.CollectionFacts, now time.Time) Debt {
	d := Debt{Objects: root.Summary.Objects, Bytes: root.Summary.Bytes, TombstoneActive: facts.Tombstoned}
	for _, l := range root.Summary.Levels {
		if l.Level < contract.MaxLevel && l.Objects > d.MaxFanOut {
			d.MaxFanOut = l.Objects
		}
	}
	if root.Summary.DocCount > 0 {
		d.DeleteDensity = float64(root.Summary.DeleteCount) / float64(root.Summary.DocCount)
	}
	d.CompactionDue = !facts.Tombstoned && o.cfg.CompactionDue != nil && o.cfg.CompactionDue(root.Summary)
	if !facts.Tombstoned {
		// Judged at the sweep minute the task will carry (the executor
		// selects objects at exactly that time).
		d.TransitionDueAtUnixMs, d.TransitionDue = transitionDue(root, facts.Lifecycle, contract.SweepMinute(now.UnixMilli()), o.guards.TransitionPerTier)
	}
	// The change's counts (the change itself may be in parts: never read here).
	d.GCObjects, d.GCBytes = root.Change.RemovedObjects, root.Change.RemovedBytes
	if d.GCObjects > 0 {
		d.GCDueAtUnixMs = saturatingAdd(root.CommitTsUnixMs, (o.cfg.TokenLifetime + o.cfg.RetentionWindow).Milliseconds())
	}
	return d
}

// transitionDue judges the lifecycle tier transition from the root's part
// references: a part holding another tier than the target is due once the
// oldest object of such a tier (its minimum max_ts) is transition_after_ms
// old. Parts carry that minimum per tier, so a part mixing old objects
// already in the target tier with young ones in another is not due (after
// one transition every part mixes them: judged by the part's overall
// minimum, every head would look due, every transition would move nothing
// and, as a due transition takes precedence, compaction would never be
// scheduled). A root without per-tier minimums is judged by the overall
// minimum, as is every root with perTier false (the transition_per_tier
// mutation).
//
// Timestamps come from the manifest: a far-future max_ts saturates (it is
// never due) rather than wrapping into the past, which would schedule a
// transition that moves nothing every sweep minute.
func transitionDue(root contract.Manifest, lc contract.Lifecycle, nowMs int64, perTier bool) (dueAt int64, due bool) {
	if _, ok := lc.TransitionCutoff(nowMs); !ok {
		return 0, false
	}
	found := false
	for _, p := range root.Parts {
		m, ok := p.OtherTierMinMaxTs(lc.TransitionToTier, perTier)
		if !ok {
			continue
		}
		if at := saturatingAdd(m, lc.TransitionAfterMs); !found || at < dueAt {
			dueAt, found = at, true
		}
	}
	return dueAt, found && dueAt <= nowMs
}

// saturatingAdd is a + b clamped to the int64 range.
func saturatingAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// tasks derives the tasks of a newly observed head. At most one queue is
// addressed, so enqueuing is one call. A due lifecycle transition takes
// precedence over compaction: both rewrite the same base and only one
// result per base can be published, so the other would be wasted work;
// compaction follows from the head the transition produces (and compacting
// objects about to change tier would be rewritten again by the transition).
func (o *Observer) tasks(head contract.Head, st Observed, now time.Time) []contract.Task {
	nowMs := now.UnixMilli()
	inc := head.Inc()
	switch {
	case o.cfg.Paused.Contains(head.Collection):
		return nil
	case st.Debt.TombstoneActive:
		return []contract.Task{contract.NewTask(contract.KindTombstoneCleanup, head.Collection, head.Version, head.ManifestChecksum, st.FactsVersion, nowMs).In(inc)}
	case st.Debt.TransitionDue:
		return []contract.Task{contract.NewSweepTask(contract.KindLifecycleTransition, head.Collection, head.Version, head.ManifestChecksum, st.FactsVersion, nowMs).In(inc)}
	case st.Debt.CompactionDue:
		return []contract.Task{contract.NewTask(contract.KindCompaction, head.Collection, head.Version, head.ManifestChecksum, st.FactsVersion, nowMs).In(inc)}
	}
	return nil
}
