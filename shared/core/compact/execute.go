package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/store"
)

// Objects is what the executor needs from the data bucket.
type Objects interface {
	Get(ctx context.Context, key string) ([]byte, error)
	ReaderAt(ctx context.Context, key string, size int64) io.ReaderAt
	Put(ctx context.Context, key string, body []byte) (string, error)
}

// Streamer is implemented by object stores that stream an object of any
// size in bounded memory (S3 multipart). Without it each output is buffered
// whole before its Put.
type Streamer interface {
	Create(ctx context.Context, key string) (store.Upload, error)
}

// AbsentWriter is implemented by object stores that write an object only
// where none exists (S3 If-None-Match: *, on PutObject and
// CompleteMultipartUpload): rewrite outputs are written so, and a
// committed output is never overwritten in place (a retry whose bytes
// differ, a forger's PUT ahead of us). ChecksumAt reads an existing object's
// contract checksum, to recognise our own earlier identical attempt, and
// the LastModified S3 gave it, the time that attempt wrote it.
type AbsentWriter interface {
	PutIfAbsent(ctx context.Context, key string, body []byte) (string, error)
	CreateIfAbsent(ctx context.Context, key string) (store.Upload, error)
	ChecksumAt(ctx context.Context, key string) (string, time.Time, error)
}

// Leases is the task lease use case (package lease).
type Leases interface {
	Acquire(ctx context.Context, task contract.Task, holder string, now time.Time, d time.Duration) (contract.Lease, error)
	Extend(ctx context.Context, l contract.Lease, now time.Time, d time.Duration) (contract.Lease, error)
	Complete(ctx context.Context, l contract.Lease, now time.Time) error
}

// Facts reads CCS scheduling facts (optional).
type Facts interface {
	Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
}

// Reporter hands a completion to the handoff queue (FIFO: group = the
// collection, deduplication id = the cutover request id).
type Reporter interface {
	Report(ctx context.Context, c contract.Completion) error
}

// ExecConfigFrom is the executor's configuration under a validated
// coordinator policy, with guards g.
func ExecConfigFrom(p policy.Policy, g guard.Set) ExecConfig {
	return ExecConfig{Policy: PolicyFrom(p.Compaction), ClockSkew: p.ClockSkew.D(), PolicyFingerprint: p.Compaction.Fingerprint(), LeaseDuration: p.LeaseDuration.D(), Heartbeat: p.LeaseHeartbeat.D(), Guards: g,
		Read:  segment.ReadOptions{RangeBytes: p.Compaction.ReadRangeBytes},
		Start: StartRule{Quiet: p.Compaction.StartQuiet.D(), MaxWait: p.Compaction.StartMaxWait.D()}, ConflictChecked: p.PublisherConflictCheck,
		ResultWait: p.Compaction.ResultWait.D()}
}

// ExecConfig tunes the executor.
type ExecConfig struct {
	Policy Policy
	// ClockSkew is the allowance between the clocks of the task's sender
	// and this executor: a lifecycle transition's sweep time counts no
	// later than the executor's clock plus it (guard sweep_clock).
	ClockSkew time.Duration
	// PolicyFingerprint names Policy (policy.Compaction.Fingerprint) in
	// the idle record of a head whose full plan is empty.
	PolicyFingerprint string
	LeaseDuration     time.Duration
	// Heartbeat: the lease is extended whenever this much time passed
	// since the last extension, checked at every read, after every output
	// and before reporting; work shorter than this extends nothing.
	Heartbeat time.Duration
	Writer    segment.WriterOptions
	// Read sizes the input reads (policy compaction.read_range_bytes).
	Read segment.ReadOptions
	// Sequential opens the inputs one after another and reads without
	// read-ahead: every read on the caller's goroutine, in one order (the
	// simulation, which replays AWS calls and injects crashes as panics of
	// the calling goroutine).
	Sequential bool
	Guards     guard.Set
	// Start: when a coalesced rewrite task starts (waits for a still
	// head; zero: at once).
	Start StartRule
	// ConflictChecked: the publisher judges a result whose base the head
	// moved past by its conflict check (policy publisher_conflict_check):
	// once the work has started, a moved head no longer drops it here;
	// the result is reported pinned to its base and the publisher decides
	// at its head CAS. The coordinator never rebases it.
	ConflictChecked bool
	// ResultWait: how long a worker that reported a rewrite holds its
	// collection's queue group until the result is in the lineage
	// (awaitLanded; 0: no wait).
	ResultWait time.Duration
}

// Rewrites records that a worker took a collection's pending rewrite task
// (observe.Observed RewriteClaims/RewriteTaken): from then on a new head
// with a rewrite due enqueues the next one. RecordCompactionIdle records
// that a compaction worker planned the full object set of a head and found
// nothing (observe.Observed.CompactionOwed): reconciliation stops
// enqueueing compaction for that head. A no-op when the recorded state is
// no longer that head.
type Rewrites interface {
	TakeRewrite(ctx context.Context, collection string, incarnation uint64) error
	RecordCompactionIdle(ctx context.Context, collection string, incarnation, version uint64, checksum, policy string) error
}

// Executor runs one compaction task: lease, revalidate, plan, merge, write,
// revalidate, report. It never makes a result visible; only the publisher
// does, through the handoff.
//
// Memory is independent of the inputs' sizes. A merge holds, per input,
// its block index and at most two read ranges (policy
// compaction.read_range_bytes, default 4 MiB; an input of at most one
// range is held whole instead), and for the output one block and at most
// two part buffers (awsio.PartSize, 8 MiB) of its streaming upload. With
// the defaults (16 inputs at most) that is 2 x 4 MiB x 16 = 128 MiB of
// input buffers plus 16 MiB of output buffers in the compaction function's
// 1024 MB; the policy refuses input buffers above 512 MiB
// (policy.MaxCompactionReadBytes). A transition copies through one read
// range at a time.
type Executor struct {
	rewrites Rewrites
	objects  Objects
	lin      *lineage.Reader
	leases   Leases
	facts    Facts
	report   Reporter
	now      func() time.Time
	cfg      ExecConfig
	metrics  *metrics.Recorder
	log      *slog.Logger
	sleep    Sleeper
	seen     startSeen
}

// startSeen is the head StartDelay read for a task: the first look of
// that task's wait (the next call of the handler for the same record)
// takes it instead of reading the head again, once.
type startSeen struct {
	mu     sync.Mutex
	taskID string
	head   contract.Head
}

func (s *startSeen) put(taskID string, h contract.Head) {
	s.mu.Lock()
	s.taskID, s.head = taskID, h
	s.mu.Unlock()
}

// take returns the head StartDelay read for taskID, at most once.
func (s *startSeen) take(taskID string) (contract.Head, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taskID != taskID || taskID == "" {
		return contract.Head{}, false
	}
	s.taskID = ""
	return s.head, true
}

// WithSleep sets how the executor waits for a still head (the simulation
// advances its clock; default SleepContext).
func (e *Executor) WithSleep(s Sleeper) *Executor {
	e.sleep = s
	return e
}

// WithRewrites makes the executor take coalesced rewrite tasks: it clears
// the collection's pending marker when it takes a task and plans against
// the head it finds (a new task pinned to that head, leased and fenced as
// any), not the head the task was enqueued for.
func (e *Executor) WithRewrites(r Rewrites) *Executor {
	e.rewrites = r
	return e
}

// NewExecutor wires the executor. facts may be nil (facts are not checked).
func NewExecutor(objects Objects, leases Leases, facts Facts, report Reporter, now func() time.Time, cfg ExecConfig, m *metrics.Recorder, log *slog.Logger) *Executor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = policy.Default().LeaseDuration.D()
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = min(policy.DefaultLeaseHeartbeat, cfg.LeaseDuration/policy.MinLeaseHeartbeats)
	}
	return &Executor{objects: objects, lin: lineage.New(objects, 256), leases: leases, facts: facts, report: report, now: now, cfg: cfg, metrics: m, log: log, sleep: SleepContext}
}

// Outcome of one task.
type Outcome string

// Outcomes. Every outcome except an error return lets the message go.
const (
	OutcomeReported  Outcome = "reported"  // a completion was handed off
	OutcomeDuplicate Outcome = "duplicate" // another holder has the lease: skip
	OutcomeDone      Outcome = "done"      // the task was already finished
	OutcomeStale     Outcome = "stale"     // the base is no longer the head (or facts changed): dropped
	OutcomeNothing   Outcome = "nothing"   // the plan is empty
	OutcomeLeaseLost Outcome = "lease_lost"
)

// Result reports one task.
type Result struct {
	Outcome      Outcome
	Reason       string
	Lease        contract.Lease
	Job          *Job
	Completion   *contract.Completion
	BytesRead    int64
	BytesWritten int64
}

// ErrUnsupported: the executor does not run this kind of task.
var ErrUnsupported = errors.New("unsupported task kind")

// Run executes task as holder.
func (e *Executor) Run(ctx context.Context, task contract.Task, holder string) (Result, error) {
	if task.Kind != contract.KindCompaction && task.Kind != contract.KindLifecycleTransition {
		return Result{}, fmt.Errorf("%w: %s (task %s)", ErrUnsupported, task.Kind, task.TaskID)
	}
	started := e.now()
	// seen is the head the wait last read (the take uses it, and so does
	// the revalidation before the work: the head is read again after
	// planning, before any merge, and before reporting).
	var seen *contract.Head
	e.metrics.DurationDim("TaskWaitMs", "Kind", string(task.Kind), started.Sub(time.UnixMilli(task.EnqueuedAtUnixMs)))
	if e.rewrites != nil {
		// Heads committed while it waits coalesce into this task.
		head, ok, err := e.awaitStill(ctx, task)
		if err != nil {
			return Result{}, fmt.Errorf("run %s: wait for a still head: %w", task.TaskID, err)
		}
		if ok {
			seen = &head
		}
		task, seen = e.takeRewrite(ctx, task, e.now(), seen)
	}
	ls, err := e.leases.Acquire(ctx, task, holder, started, e.cfg.LeaseDuration)
	switch {
	case errors.Is(err, lease.ErrDone):
		e.metrics.AddDim("DuplicateTasksSkipped", "Kind", string(task.Kind), 1)
		return Result{Outcome: OutcomeDone, Reason: err.Error(), Lease: ls}, nil
	case errors.Is(err, lease.ErrHeld):
		e.metrics.AddDim("DuplicateTasksSkipped", "Kind", string(task.Kind), 1)
		e.log.Info("task leased by another holder; skipping", "task", task.TaskID, "reason", err)
		return Result{Outcome: OutcomeDuplicate, Reason: err.Error(), Lease: ls}, nil
	case err != nil:
		return Result{}, err
	}
	if ls.LeaseEpoch > 1 {
		// An earlier holder's lease timed out (it crashed or stalled) and
		// this run took the task over.
		e.metrics.AddDim("LeaseReassigned", "Kind", string(task.Kind), 1)
	}
	keep, err := lease.NewKeeper(e.leases, ls, task, e.now, started, e.cfg.Heartbeat, e.cfg.LeaseDuration)
	if err != nil {
		return Result{Lease: ls}, fmt.Errorf("run %s: %w", task.TaskID, err)
	}
	run := e.run
	if task.Kind == contract.KindLifecycleTransition {
		run = e.runTransition
	}
	res, err := run(ctx, task, keep, started, seen)
	res.Lease = ls
	if kerr := keep.Err(); kerr != nil && err == nil {
		err = kerr
	}
	ls = keep.Lease()
	switch {
	case errors.Is(err, lease.ErrLost):
		e.metrics.AddDim("LeaseLost", "Kind", string(task.Kind), 1)
		e.log.Warn("lease lost; stopping without reporting", "task", task.TaskID, "epoch", ls.LeaseEpoch, "err", err)
		res.Outcome, res.Reason = OutcomeLeaseLost, err.Error()
		return res, nil
	case err != nil:
		// The lease stays until it expires; a retry after that starts over
		// and rewrites the same output keys.
		return res, err
	}
	if res.Outcome == OutcomeReported && res.Completion != nil && e.rewrites != nil {
		e.awaitLanded(ctx, task, *res.Completion)
	}
	if res.Outcome == OutcomeStale {
		// A task already stale when it starts costs one head read; a result
		// that went stale while merging was real work thrown away.
		if res.Job == nil {
			e.metrics.AddDim("StaleTasksSkipped", "Kind", string(task.Kind), 1)
		} else {
			e.metrics.AddDim("StaleResultsDropped", "Kind", string(task.Kind), 1)
		}
		e.log.Info("stale task dropped", "task", task.TaskID, "reason", res.Reason)
	}
	if err := e.leases.Complete(ctx, ls, e.now()); err != nil {
		if errors.Is(err, lease.ErrLost) {
			e.metrics.AddDim("LeaseLost", "Kind", string(task.Kind), 1)
		}
		// Finishing is bookkeeping only: a duplicate is harmless.
		e.log.Warn("mark task done failed", "task", task.TaskID, "err", err)
	}
	return res, nil
}

// takeRewrite records the take of the collection's pending rewrite (the
// next head may enqueue another) and returns the task to run:
// when the head moved on from the task's base within the same lifetime of
// the collection, a fresh task of the same kind pinned to the head found
// (heads that arrived while this task waited were coalesced into it).
// Failures here only cost coalescing: the task runs as enqueued. It also
// returns the head it judged by (seen, the wait's last look, when given;
// nil when none could be read), for the revalidation before the work.
func (e *Executor) takeRewrite(ctx context.Context, task contract.Task, now time.Time, seen *contract.Head) (contract.Task, *contract.Head) {
	if err := e.rewrites.TakeRewrite(ctx, task.Collection, task.Incarnation); err != nil {
		e.log.Warn("clear pending rewrite failed", "task", task.TaskID, "err", err)
	}
	head, err := contract.Head{}, error(nil)
	if seen != nil {
		head = *seen // read by the wait a moment ago
	} else {
		head, err = e.lin.Head(ctx, task.Collection)
	}
	if err != nil {
		return task, nil
	}
	if head.Inc() != contract.Lifetime(task.Incarnation) || head.Version <= task.BaseManifestVersion {
		return task, &head
	}
	var fresh contract.Task
	if task.Kind == contract.KindLifecycleTransition {
		fresh = contract.NewSweepTask(task.Kind, task.Collection, head.Version, head.ManifestChecksum, task.CCSFactsVersion, now.UnixMilli())
	} else {
		fresh = contract.NewTask(task.Kind, task.Collection, head.Version, head.ManifestChecksum, task.CCSFactsVersion, now.UnixMilli())
	}
	fresh = fresh.In(head.Inc())
	fresh.CCSFactsDigest = task.CCSFactsDigest // the same facts version
	e.metrics.Add("TasksRebasedToHead", 1)
	e.log.Info("task planned against the head found", "task", task.TaskID, "base", task.BaseManifestVersion, "head", head.Version, "as", fresh.TaskID)
	return fresh, &head
}

func (e *Executor) run(ctx context.Context, task contract.Task, keep *lease.Keeper, started time.Time, seen *contract.Head) (Result, error) {
	planned, reason, err := e.revalidate(ctx, task, nil, seen)
	if err != nil || reason != "" {
		return Result{Outcome: OutcomeStale, Reason: reason}, err
	}
	root, stale, err := e.openPinned(ctx, task)
	if stale != nil || err != nil {
		return orStale(stale), err
	}
	_, jobs, err := planRoot(ctx, e.lin, task.Collection, root, task.BaseManifestChecksum, e.cfg.Policy, started, e.cfg.Guards.DebtAgreement)
	if err != nil {
		return Result{}, err
	}
	if len(jobs) == 0 {
		// The plan covered the full object set (planStaged): the head has
		// no work, however its summary's debt reads. Recorded, so the
		// same head is not enqueued again; a failure costs one more task.
		e.metrics.Add("CompactionNothingToDo", 1)
		if e.rewrites != nil && e.cfg.Guards.DebtAgreement {
			if err := e.rewrites.RecordCompactionIdle(ctx, task.Collection, task.Incarnation, task.BaseManifestVersion, task.BaseManifestChecksum, e.cfg.PolicyFingerprint); err != nil {
				e.log.Warn("record compaction idle failed", "task", task.TaskID, "err", err)
			}
		}
		return Result{Outcome: OutcomeNothing, Reason: "nothing to compact"}, nil
	}
	job := jobs[0]
	if moved, err := e.headMoved(ctx, task); err != nil || moved != "" {
		// Planning read the root's parts meanwhile: a head that moved
		// costs one read here instead of a merge thrown away later.
		return Result{Outcome: OutcomeStale, Reason: "before merging: " + moved}, err
	}
	res := Result{Job: &job}
	e.metrics.Add("CompactionsRun", 1)
	var k kept
	added, stats, err := e.merge(ctx, task, keep, job, &k)
	res.BytesRead, res.BytesWritten = stats.BytesRead, stats.BytesWritten
	e.countMergeWrites(job, stats)
	if err != nil {
		return res, err
	}
	if err := keep.Beat(ctx); err != nil {
		return res, err
	}
	c, reported, err := e.report1(ctx, task, planned, keep.Lease(), e.workStart(started, &k), job.Reason, job.Inputs, added, stats.BytesRead, stats.BytesWritten)
	if !reported {
		res.Outcome, res.Reason = OutcomeStale, "before reporting: "+c.Reason
		return res, err
	}
	if err != nil {
		return res, err
	}
	e.metrics.Add("CompletionsReported", 1)
	e.metrics.Add("CompactionInputObjects", float64(len(job.Inputs)))
	e.metrics.Add("CompactionOutputObjects", float64(len(added)))
	e.metrics.Add("CompactionBytesRead", float64(stats.BytesRead))
	e.metrics.Add("CompactionBytesWritten", float64(stats.BytesWritten))
	e.log.Info("compaction reported", "task", task.TaskID, "collection", task.Collection, "base", task.BaseManifestVersion,
		"inputs", len(job.Inputs), "outputs", len(added), "bytes_read", stats.BytesRead, "bytes_written", stats.BytesWritten, "reason", job.Reason)
	res.Outcome, res.Completion = OutcomeReported, &c
	return res, nil
}

// countMergeWrites counts what a merge wrote into its output level
// (MergeBytesWritten|Level=N) the moment it wrote it, whatever becomes of
// the result: a merge dropped later (stale, refused, lease lost) wrote its
// bytes too. Write amplification is these bytes over the bytes appended
// (make bench, the demo summary; ideal: IdealWrites).
func (e *Executor) countMergeWrites(job Job, stats segment.MergeStats) {
	if stats.BytesWritten > 0 {
		e.metrics.AddDim("MergeBytesWritten", "Level", strconv.Itoa(job.OutputLevel), float64(stats.BytesWritten))
	}
}

// headMoved re-reads the head just before the work: a non-empty reason
// when it is no longer the task's base (only under base revalidation, the
// guard this check belongs to).
func (e *Executor) headMoved(ctx context.Context, task contract.Task) (string, error) {
	if !e.cfg.Guards.BaseRevalidation || e.cfg.ConflictChecked {
		return "", nil
	}
	head, err := e.lin.Head(ctx, task.Collection)
	if err != nil {
		return "", fmt.Errorf("re-read the head of %s: %w", task.Collection, err)
	}
	if head.Version != task.BaseManifestVersion || head.ManifestChecksum != task.BaseManifestChecksum {
		return fmt.Sprintf("head is v%d, task is based on v%d", head.Version, task.BaseManifestVersion), nil
	}
	return "", nil
}

// revalidate returns a non-empty reason when the task is stale: the head is
// no longer its base (version and checksum) or the CCS facts it carried
// changed. Before the work (planned nil) a task carrying a facts digest is
// judged by it (only what its kind depends on counts); one without must
// find the task's exact facts_version. After the work only the facts
// its kind depends on count (contract.FactsDependencies, compared with
// planned, the facts read before the work): a retention change does not
// waste a finished compaction. It returns the facts it read (zero without
// a CCS).
func (e *Executor) revalidate(ctx context.Context, task contract.Task, planned *contract.CollectionFacts, seen *contract.Head) (contract.CollectionFacts, string, error) {
	var f contract.CollectionFacts
	if e.cfg.Guards.BaseRevalidation && (planned == nil || !e.cfg.ConflictChecked) {
		// After the work, with a conflict-checking publisher, a moved
		// head is the publisher's to judge (ExecConfig.ConflictChecked).
		// Before the work, the head the take read a moment ago (seen)
		// will do: the head is read again after planning, before any
		// merge, and before reporting (seen nil).
		head, err := contract.Head{}, error(nil)
		if seen != nil && planned == nil {
			head = *seen
		} else {
			head, err = e.lin.Head(ctx, task.Collection)
		}
		if err != nil {
			return f, "", fmt.Errorf("revalidate %s: %w", task.TaskID, err)
		}
		if head.Version != task.BaseManifestVersion || head.ManifestChecksum != task.BaseManifestChecksum {
			return f, fmt.Sprintf("head is v%d %s, task is based on v%d %s", head.Version, head.ManifestChecksum, task.BaseManifestVersion, task.BaseManifestChecksum), nil
		}
	}
	if e.facts != nil {
		var err error
		f, err = e.facts.Facts(ctx, task.Collection)
		if err != nil {
			return f, "", fmt.Errorf("revalidate %s: read CCS facts: %w", task.TaskID, err)
		}
		switch {
		case planned == nil && task.CCSFactsDigest != "" && f.FactsVersion != task.CCSFactsVersion && contract.FactsDigest(task.Kind, f) != task.CCSFactsDigest:
			// The task carries the digest of the facts it was planned
			// under: only a change of what its kind depends on drops it.
			return f, fmt.Sprintf("CCS facts v%d changed what %s depends on since v%d (the task's digest): now %s", f.FactsVersion, task.Kind, task.CCSFactsVersion,
				contract.DescribeFacts(task.Kind, f)), nil
		case planned == nil && task.CCSFactsDigest == "" && f.FactsVersion != task.CCSFactsVersion:
			return f, fmt.Sprintf("CCS facts are v%d, task carried v%d", f.FactsVersion, task.CCSFactsVersion), nil
		case planned != nil && contract.FactsDigest(task.Kind, f) != contract.FactsDigest(task.Kind, *planned):
			return f, fmt.Sprintf("CCS facts v%d changed what %s depends on since v%d: now %s", f.FactsVersion, task.Kind, task.CCSFactsVersion,
				contract.DescribeFacts(task.Kind, f)), nil
		}
		if f.Tombstoned {
			return f, "collection is tombstoned", nil
		}
	}
	return f, "", nil
}

// openConcurrency bounds the inputs of one merge opened at once.
const openConcurrency = 8

// openInputs opens the job's inputs concurrently (each Open is one read
// of the object's tail, or of the whole object when it is small), checks
// each footer against its manifest entry and starts every input's first
// range read: the first records of all inputs arrive together.
func (e *Executor) openInputs(ctx context.Context, keep *lease.Keeper, job Job) ([]*segment.Iterator, error) {
	its := make([]*segment.Iterator, len(job.Inputs))
	errs := make([]error, len(job.Inputs))
	ro := e.cfg.Read
	ro.NoReadAhead = ro.NoReadAhead || e.cfg.Sequential
	open := func(i int, in contract.ObjectEntry) {
		r, err := segment.OpenWith(beating{ctx: ctx, r: e.objects.ReaderAt(ctx, in.Key, in.Size), keep: keep}, in.Size, ro)
		if err != nil {
			errs[i] = fmt.Errorf("open input %s: %w", in.Key, err)
			return
		}
		if err := matches(r.Footer(), in); err != nil {
			errs[i] = err
			return
		}
		its[i] = r.Iter()
	}
	sem := make(chan struct{}, openConcurrency)
	var wg sync.WaitGroup
	for i, in := range job.Inputs {
		if e.cfg.Sequential {
			open(i, in)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			open(i, in)
		}()
	}
	wg.Wait()
	if kerr := keep.Err(); kerr != nil {
		return nil, kerr
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return its, nil
}

// merge streams the job's inputs into outputs under the task's keys,
// heartbeating the lease whenever a heartbeat is due: while a long merge
// reads its inputs, and after every output. Work shorter than the
// heartbeat interval extends nothing: the lease it acquired holds for
// at least the interval.
func (e *Executor) merge(ctx context.Context, task contract.Task, keep *lease.Keeper, job Job, k *kept) ([]contract.ObjectEntry, segment.MergeStats, error) {
	its, err := e.openInputs(ctx, keep, job)
	if err != nil {
		return nil, segment.MergeStats{}, err
	}
	mctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var added []contract.ObjectEntry
	target := e.cfg.Policy.normalized().TargetObjectBytes
	w := e.outputWriter(ctx, task, job, target)
	w.kept = k
	defer w.abort()
	out := segment.OutputFuncs{
		New: w.open,
		Finish: func(n int, f segment.Footer) error {
			key, err := w.close(n, f.Checksum)
			if err != nil {
				return err
			}
			added = append(added, f.Entry(key, f.Size, f.Checksum, job.Tier, job.OutputLevel))
			if err := keep.Beat(ctx); err != nil {
				cancel(err)
				return err
			}
			return nil
		},
	}
	stats, err := segment.Merge(mctx, its, out, segment.MergeOptions{
		DropDeletes: job.DropDeletes, TargetObjectBytes: target, Writer: e.cfg.Writer,
	})
	if lost := keep.Err(); lost != nil {
		return added, stats, lost
	}
	if err != nil {
		return added, stats, fmt.Errorf("merge %s: %w", task.TaskID, err)
	}
	if len(added) == 0 {
		// Every record was a delete the job may drop: one empty segment
		// (no records, no ranges) stands for the inputs, so the rewrite
		// adds what replaces them (the handoff refuses a rewrite that adds
		// nothing for inputs holding records).
		if err := writeEmpty(out, e.cfg.Writer); err != nil {
			return added, stats, fmt.Errorf("merge %s: empty output: %w", task.TaskID, err)
		}
		stats.BytesWritten += added[0].Size
	}
	return added, stats, nil
}

// writeEmpty writes output 0 as a segment with no records.
func writeEmpty(out segment.Outputs, opts segment.WriterOptions) error {
	dst, err := out.NewOutput(0)
	if err != nil {
		return err
	}
	f, err := segment.NewWriter(dst, opts).Close()
	if err != nil {
		return err
	}
	return out.FinishOutput(0, f)
}

// beating is an input's ReaderAt that heartbeats the lease when one is
// due before every read: a merge that reads for longer than a heartbeat
// interval before finishing an output keeps its lease.
type beating struct {
	ctx  context.Context
	r    io.ReaderAt
	keep *lease.Keeper
}

func (b beating) ReadAt(p []byte, off int64) (int, error) {
	if err := b.keep.Beat(b.ctx); err != nil {
		return 0, err
	}
	return b.r.ReadAt(p, off)
}

// levelParts keeps the parts whose key range intersects one of levels'
// key ranges; nil levels keeps every part.
func levelParts(collection string, levels []int) func(contract.PartRef) bool {
	if levels == nil {
		return nil
	}
	return func(ref contract.PartRef) bool {
		for _, l := range levels {
			lo := contract.LevelPrefix(collection, l)
			if ref.LastKey >= lo && ref.FirstKey < lo+"\xff" {
				return true
			}
		}
		return false
	}
}

// outputSlack is room past the target for the block that crosses it and
// the output's index and footer.
const outputSlack = 1 << 20

// outputWriter writes merge outputs under the task's keys: streamed (memory
// bounded by the store's part size, never by the object) when the store can,
// else through one reused buffer of at most target + one block + index.
type outputWriter struct {
	ctx     context.Context
	e       *Executor
	objects Objects
	stream  Streamer
	keyOf   func(n int) string
	size    int
	buf     *bytes.Buffer
	up      store.Upload
	kept    *kept // outputs an earlier attempt wrote, kept (ours)
}

func (e *Executor) outputWriter(ctx context.Context, task contract.Task, job Job, target int64) *outputWriter {
	w := &outputWriter{ctx: ctx, e: e, objects: e.objects, size: int(min(target, job.Bytes()) + outputSlack),
		keyOf: func(n int) string { return contract.RewriteOutputKey(task.Collection, job.OutputLevel, task.TaskID, n) }}
	w.stream, _ = e.objects.(Streamer)
	return w
}

func (w *outputWriter) open(n int) (io.Writer, error) {
	if w.stream != nil {
		up, err := w.e.create(w.ctx, w.keyOf(n))
		if err != nil {
			return nil, fmt.Errorf("write output %s: %w", w.keyOf(n), err)
		}
		w.up = up
		return up, nil
	}
	if w.buf == nil {
		w.buf = bytes.NewBuffer(make([]byte, 0, w.size))
	}
	w.buf.Reset()
	return w.buf, nil
}

// checksummed is an upload told the checksum of what it was given
// (awsio.Upload): S3 verifies the stored bytes against it.
type checksummed interface{ ExpectChecksum(sum string) }

// close makes output n, whose bytes hash to sum (the writer's contract
// checksum), visible and returns its key.
func (w *outputWriter) close(n int, sum string) (string, error) {
	key := w.keyOf(n)
	if w.up != nil {
		up := w.up
		w.up = nil
		if c, ok := up.(checksummed); ok {
			c.ExpectChecksum(sum)
		}
		if err := w.e.ours(w.ctx, key, sum, up.Close(), w.kept); err != nil {
			return key, fmt.Errorf("write output %s: %w", key, err)
		}
		return key, nil
	}
	if err := w.e.put(w.ctx, key, w.buf.Bytes(), sum, w.kept); err != nil {
		return key, fmt.Errorf("write output %s: %w", key, err)
	}
	return key, nil
}

// ErrOutputTaken: a rewrite output key already holds other bytes than the
// ones this attempt wrote (an earlier attempt under another plan, or
// someone else's object): it is never replaced, the attempt fails.
var ErrOutputTaken = errors.New("rewrite output key holds other bytes")

// create opens a streamed write of a rewrite output: only where no object
// is (AbsentWriter), else as the store streams.
func (e *Executor) create(ctx context.Context, key string) (store.Upload, error) {
	if a, ok := e.objects.(AbsentWriter); ok {
		return a.CreateIfAbsent(ctx, key)
	}
	return e.objects.(Streamer).Create(ctx, key)
}

// put writes a rewrite output whose bytes hash to sum: only where no object
// is (AbsentWriter), else as the store writes. An earlier attempt's
// identical object kept in its place is noted in k.
func (e *Executor) put(ctx context.Context, key string, body []byte, sum string, k *kept) error {
	a, ok := e.objects.(AbsentWriter)
	if !ok {
		_, err := e.objects.Put(ctx, key, body)
		return err
	}
	_, err := a.PutIfAbsent(ctx, key, body)
	return e.ours(ctx, key, sum, err, k)
}

// ours resolves a write refused because the key exists: the object there
// is our own earlier attempt when it holds exactly these bytes (a retry of
// the task: merges and copies are deterministic), and then the write
// stands, and k notes when that attempt wrote it (kept); anything else is
// ErrOutputTaken (rule 13: recognise our own write before concluding
// another's).
func (e *Executor) ours(ctx context.Context, key, sum string, err error, k *kept) error {
	if !errors.Is(err, store.ErrPreconditionFailed) {
		return err
	}
	a, ok := e.objects.(AbsentWriter)
	if !ok || sum == "" {
		return err
	}
	got, written, cerr := a.ChecksumAt(ctx, key)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	if got != sum {
		e.metrics.Add("RewriteOutputsTaken", 1)
		return fmt.Errorf("%s holds %s, this attempt wrote %s: %w", key, got, sum, ErrOutputTaken)
	}
	e.metrics.Add("RewriteOutputsAlreadyWritten", 1)
	k.saw(written)
	return nil
}

// kept is the earliest LastModified of the outputs an attempt found
// already written by an earlier attempt of its task and kept (ours): a
// retry after a crash keeps the crashed attempt's outputs, whose write
// time, not the retry's start, is what GC's never-committed reclaim counts
// from (guard cutover_from_written).
type kept struct {
	mu       sync.Mutex
	earliest time.Time
}

// saw notes an output kept that S3 dated at (nil k: nothing noted).
func (k *kept) saw(at time.Time) {
	if k == nil || at.IsZero() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.earliest.IsZero() || at.Before(k.earliest) {
		k.earliest = at
	}
}

// workStart is the start an attempt that began at started reports: the
// earlier of started and when the earliest output it kept was written
// (guard cutover_from_written; rules 4, 13). The handoff counts the
// cutover's not_after from it, so a cutover naming a kept output expires
// before GC may reclaim that output as never-committed; the handoff also
// dates the outputs itself (handoff.Handoff.WithWritten) and does not rely
// on this report.
func (e *Executor) workStart(started time.Time, k *kept) time.Time {
	if g := e.cfg.Guards; !g.CutoverFromWritten || !g.CutoverDeadline {
		return started // cutover_deadline's mutation switches this off with it
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.earliest.IsZero() && k.earliest.Before(started) {
		return k.earliest
	}
	return started
}

// abort discards an output that was opened but not finished.
func (w *outputWriter) abort() {
	if w.up != nil {
		_ = w.up.Abort()
		w.up = nil
	}
}

// matches checks an input's verified footer against its manifest entry.
func matches(f segment.Footer, o contract.ObjectEntry) error {
	if f.Records != o.DocCount || f.Deletes != o.DeleteCount || f.MinSeq != o.MinSeq || f.MaxSeq != o.MaxSeq ||
		f.MinKey != o.MinRecordKey || f.MaxKey != o.MaxRecordKey {
		return fmt.Errorf("input %s: segment footer (%d records, %d deletes, seq %d..%d, keys %q..%q) does not match its manifest entry: %w",
			o.Key, f.Records, f.Deletes, f.MinSeq, f.MaxSeq, f.MinKey, f.MaxKey, contract.ErrInvalid)
	}
	return nil
}

// openPinned reopens the manifest a task is pinned to. A manifest that
// cannot be reopened with the pinned checksum makes the task stale (rule 2);
// stale is then non-nil.
func (e *Executor) openPinned(ctx context.Context, task contract.Task) (contract.Manifest, *Result, error) {
	key := contract.ManifestKey(task.Collection, task.Inc(), task.BaseManifestVersion, task.BaseManifestChecksum)
	root, err := e.lin.Root(ctx, key, task.BaseManifestChecksum)
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, contract.ErrChecksumMismatch):
		return root, &Result{Outcome: OutcomeStale, Reason: "pinned manifest cannot be reopened: " + err.Error()}, nil
	case err != nil:
		return root, nil, err
	case root.Version != task.BaseManifestVersion || root.Collection != task.Collection:
		return root, nil, fmt.Errorf("pinned manifest %s is %s v%d: %w", key, root.Collection, root.Version, contract.ErrInvalid)
	}
	return root, nil, nil
}

func orStale(stale *Result) Result {
	if stale == nil {
		return Result{}
	}
	return *stale
}

// report1 revalidates the base once more and, if it still holds, reports
// one completion replacing inputs by added. reported is false when the base
// went stale (c.Reason says why) or revalidation failed (err).
func (e *Executor) report1(ctx context.Context, task contract.Task, planned contract.CollectionFacts, ls contract.Lease, started time.Time, reason string,
	inputs, added []contract.ObjectEntry, bytesRead, bytesWritten int64) (contract.Completion, bool, error) {
	_, stale, err := e.revalidate(ctx, task, &planned, nil)
	if err != nil || stale != "" {
		return contract.Completion{Reason: stale}, false, err
	}
	cov := contract.Coverage{Removed: inputs, Added: added}
	c := contract.Completion{
		SchemaVersion: contract.SchemaVersion, TaskID: task.TaskID, Kind: task.Kind, Collection: task.Collection, Incarnation: task.Incarnation,
		BaseManifestVersion: task.BaseManifestVersion, BaseManifestChecksum: task.BaseManifestChecksum,
		CCSFactsVersion: task.CCSFactsVersion, SweepUnixMs: task.SweepUnixMs, LeaseEpoch: ls.LeaseEpoch, Outcome: contract.OutcomeSucceeded,
		Reason: reason, StartedAtUnixMs: started.UnixMilli(), FinishedAtUnixMs: e.now().UnixMilli(),
		BytesRead: bytesRead, BytesWritten: bytesWritten, Coverage: &cov,
	}
	if e.facts != nil {
		// The facts it was planned under (facts_version is the task's);
		// the handoff compares them with current CCS facts.
		c.CCSFactsDigest = contract.FactsDigest(task.Kind, planned)
	}
	if err := e.report.Report(ctx, c); err != nil {
		return c, true, fmt.Errorf("report completion of %s: %w", task.TaskID, err)
	}
	return c, true, nil
}

// PlanRoot loads the snapshot the plan needs from a verified root — only
// the parts of the due levels' key ranges (data keys embed the level, so a
// level is a contiguous range of parts) — and plans it at now; when the
// due levels plan nothing it plans the full object set (planStaged). The
// executor and the operator's compaction-plan both call it.
func PlanRoot(ctx context.Context, lin *lineage.Reader, collection string, root contract.Manifest, checksum string, p Policy, now time.Time) (Snapshot, []Job, error) {
	return planRoot(ctx, lin, collection, root, checksum, p, now, true)
}

// planRoot is PlanRoot; staged false (the debt_agreement mutation) plans
// the due levels only.
func planRoot(ctx context.Context, lin *lineage.Reader, collection string, root contract.Manifest, checksum string, p Policy, now time.Time, staged bool) (Snapshot, []Job, error) {
	load := func(levels []int) (Snapshot, error) {
		snap := Snapshot{Collection: collection, Version: root.Version, Checksum: checksum, Levels: levels}
		if err := lin.Each(ctx, &root, levelParts(collection, levels), func(o contract.ObjectEntry) error {
			if levels == nil || slices.Contains(levels, o.Level) {
				snap.Objects = append(snap.Objects, o)
			}
			return nil
		}); err != nil {
			return snap, fmt.Errorf("load snapshot of %s v%d: %w", collection, root.Version, err)
		}
		return snap, nil
	}
	if !staged {
		snap, err := load(Debt(root.Summary, p).PlanLevels(p))
		if err != nil {
			return snap, nil, err
		}
		return snap, Plan(snap, p, now), nil
	}
	return planStaged(root.Summary, p, now, load)
}

// planStaged is the executor's planning, pure given load (the objects of
// the listed levels; nil: all): the levels the summary's debt names
// first, then, when compaction is due but those levels plan nothing, the
// full object set. The summary counts a level across tiers and averages
// its delete density, so it can be due while no (tier, level) group is
// (2 hot + 2 warm objects, merge factor 4), and a single dense object can
// hide in a level's average; re-planning on the full set makes the
// executor's answer the full plan's answer, and "nothing" then means the
// head has no work at all (the executor records it, see doc.go).
func planStaged(summary contract.Summary, p Policy, now time.Time, load func(levels []int) (Snapshot, error)) (Snapshot, []Job, error) {
	levels := Debt(summary, p).PlanLevels(p)
	snap, err := load(levels)
	if err != nil {
		return snap, nil, err
	}
	jobs := Plan(snap, p, now)
	if len(jobs) > 0 || len(levels) == 0 {
		// nil: already the full set; empty: nothing is due.
		return snap, jobs, nil
	}
	if snap, err = load(nil); err != nil {
		return snap, nil, err
	}
	return snap, Plan(snap, p, now), nil
}
