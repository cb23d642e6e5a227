package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract"
)

// Policy is every tunable of the coordinator. The zero value is not
// usable: start from Default().
type Policy struct {
	// LeaseDuration is how long a task lease lasts without a heartbeat:
	// the grace a holder has between two heartbeats. It must be at least
	// MinLeaseHeartbeats heartbeat intervals, so one late or failed
	// heartbeat never makes a live holder's lease look free.
	LeaseDuration Duration `json:"lease_duration_ms"`
	// LeaseHeartbeat is how often a holder extends its lease while it works
	// (between outputs and during a long merge, whenever this much time
	// has passed since the last extension).
	LeaseHeartbeat Duration `json:"lease_heartbeat_ms"`
	// MaxTaskLifetime bounds a task from its start to its handoff: an
	// older completion is dropped, and a never-committed output is
	// reclaimed once it is older than MaxTaskLifetime + ClockSkew.
	MaxTaskLifetime Duration `json:"max_task_lifetime_ms"`
	// CutoverDeadline: a rewrite's cutover request carries not_after =
	// task start + CutoverDeadline (the publisher refuses it later), and GC
	// reclaims a never-committed output only after that on every clock.
	CutoverDeadline Duration `json:"cutover_deadline_ms"`
	// ClockSkew bounds the skew between any two clocks of the deployment.
	ClockSkew Duration `json:"clock_skew_ms"`
	// PublisherConflictCheck declares that the Manifest Publisher has the
	// conflict-check capability (events/PUBLISHER.md "Conflict-checked
	// cutover", contract.ConflictCheckV1): a rewrite whose base the head
	// moved past while it ran is still submitted, pinned to its base and
	// asking for the check, and the publisher applies it on its current
	// head only if it proves it conflict-free there. false: the
	// coordinator drops such a result itself (rule 2, as before) and
	// asks for nothing; set it for a publisher without the capability
	// (one that does answer without it is also recognised: its conflict
	// answers carry no conflict_check, counted as
	// PublisherConflictCheckMissing, and the result is rebuilt as stale).
	PublisherConflictCheck bool `json:"publisher_conflict_check"`
	// OwnerTimeout bounds one HTTP call to the publisher or CCS.
	OwnerTimeout Duration `json:"owner_timeout_ms"`
	// BatchStopMargin: an SQS consumer starts another record of its batch
	// only while its invocation has more than owner_timeout_ms +
	// batch_stop_margin_ms left (BatchReserve); the rest go back to the
	// queue untouched.
	BatchStopMargin Duration `json:"batch_stop_margin_ms"`

	// PausedCollections are collections nothing new is scheduled for (the
	// observer and reconciliation enqueue no task; tasks already queued
	// still run): the operator's explicit "Disabled".
	PausedCollections CollectionSet `json:"paused_collections,omitempty"`

	Compaction Compaction `json:"compaction"`
	GC         GC         `json:"gc"`
	Handoff    Handoff    `json:"handoff"`
	Functions  Functions  `json:"functions"`
	Budgets    Budgets    `json:"budgets"`
}

// Budgets are the fleet-wide budgets: each holds across every instance of
// the functions (items in the coordinator's table), not per Lambda
// instance. gc.global_deletes_per_sec is the third one.
type Budgets struct {
	// ClassConcurrency bounds the tasks of each class running at once
	// across the fleet. A task that finds every slot of its class taken is
	// deferred (returned to its queue for DeferDelay), never dropped and
	// never counted as a failure.
	ClassConcurrency ClassConcurrency `json:"class_concurrency"`
	// DeferDelay is how long a deferred task stays invisible.
	DeferDelay Duration `json:"defer_delay_ms"`
	// S3WritesPerSecPerPrefix and S3ReadsPerSecPerPrefix pace the
	// executors' bulk S3 calls (GC deletes, compaction reads and writes)
	// per collection prefix (collections/<c>/), across the fleet; at most
	// S3's per-prefix limits (awslimit), leaving the rest to the writers
	// and the query plane. 0: not paced.
	S3WritesPerSecPerPrefix float64 `json:"s3_writes_per_sec_per_prefix"` // 0, or MinS3WritesPerSecPerPrefix..awslimit.S3WritesPerSecPerPrefix
	S3ReadsPerSecPerPrefix  float64 `json:"s3_reads_per_sec_per_prefix"`
}

// MinS3WritesPerSecPerPrefix is the lowest paced per-prefix write rate:
// at it a full delete batch (1,000 keys) waits 19 s for its tokens (one
// second of burst). The delete gate takes a batch's tokens before it
// proves the batch, so no legal rate can age a proof (SYSTEM rule 14);
// a lower one would only starve GC and the writers it paces.
const MinS3WritesPerSecPerPrefix = 50.0

// ClassConcurrency is the most tasks of each class running at once across
// the fleet (0: no bound beyond the queue's event source concurrency).
type ClassConcurrency struct {
	Compaction          int `json:"compaction"`
	LifecycleTransition int `json:"lifecycle_transition"`
	GC                  int `json:"gc"`
	RetentionReclaim    int `json:"retention_reclaim"`
	TombstoneCleanup    int `json:"tombstone_cleanup"`
}

// For is the bound of tasks of kind (0: unbounded).
func (c ClassConcurrency) For(kind contract.TaskKind) int {
	switch kind {
	case contract.KindCompaction:
		return c.Compaction
	case contract.KindLifecycleTransition:
		return c.LifecycleTransition
	case contract.KindGC:
		return c.GC
	case contract.KindRetentionReclaim:
		return c.RetentionReclaim
	case contract.KindTombstoneCleanup:
		return c.TombstoneCleanup
	}
	return 0
}

// Compaction is the tiered compaction policy (the executor plans with it
// and the observer decides "compaction is due" with the same values).
type Compaction struct {
	// MergeFactor: a level is due when it holds this many objects below the
	// top level, this many overlapping objects at the top level, or this
	// many fragmented objects. The only merge factor.
	MergeFactor int `json:"merge_factor"`
	// TargetObjectBytes is the size compaction outputs are split at.
	TargetObjectBytes int64 `json:"target_object_bytes"`
	// MaxJobInputs and MaxJobBytes bound one job.
	MaxJobInputs int   `json:"max_job_inputs"`
	MaxJobBytes  int64 `json:"max_job_bytes"`
	// MaxLevel is the top level.
	MaxLevel int `json:"max_level"`
	// ReadRangeBytes is the size of one read of a compaction or
	// transition input (MinReadRangeBytes..MaxReadRangeBytes): an input
	// of at most this many bytes is read whole with one GET; a larger one
	// is read in ranges of whole blocks of at most this size, the next
	// range while the current one is merged. A merge holds at most two
	// ranges per input, so 2 x read_range_bytes x max_job_inputs must fit
	// MaxCompactionReadBytes.
	ReadRangeBytes int64 `json:"read_range_bytes"`
	// DeleteDensityThreshold: an object whose delete markers reach this
	// share of its records is rewritten (negative: rule off).
	DeleteDensityThreshold float64 `json:"delete_density_threshold"`
	// FragmentationThreshold: an object below this fraction of
	// TargetObjectBytes is fragmented (negative: rule off).
	FragmentationThreshold float64 `json:"fragmentation_threshold"`
	// StartQuiet: a coalesced rewrite (compaction or transition) starts
	// once the head has not moved for this long (a rewrite overtaken by a
	// commit is dropped, rule 2); 0 starts at once. StartMaxWait bounds
	// the wait: past it the rewrite starts right after the next commit,
	// and at the latest after StartMaxWait + StartQuiet.
	StartQuiet   Duration `json:"start_quiet_ms"`
	StartMaxWait Duration `json:"start_max_wait_ms"`
	// ResultWait: after reporting a rewrite, the worker holds its
	// collection's queue group until the result is in the head's lineage,
	// at most this long, so the collection's next rewrite plans on a head
	// without this one's inputs (with the publisher's conflict check a
	// rewrite whose inputs another one replaced is refused: input_gone).
	// 0: no wait.
	ResultWait Duration `json:"result_wait_ms"`
	// MaxWaitBehindTransition is the scheduling policy's aging bound between
	// the rewrite classes: a due lifecycle transition goes before compaction
	// (both rewrite the same base, one result per base can be published)
	// until compaction has been due without a cutover for this long; from
	// then on the two take turns of this length, compaction first. A
	// collection whose transitions keep coming due still gets its
	// compaction, and a compaction that never lands does not hold the
	// transition back for good.
	MaxWaitBehindTransition Duration `json:"max_wait_behind_transition_ms"`
	// RebuildAfter is when a compaction still owed at an unchanged head,
	// its task taken and finished without its result landing (the
	// publisher rejected the cutover, the result was dropped, the run
	// failed), is derived again under a fresh identity: RebuildAfter after
	// the head was observed, then 2x, 4x, ... RebuildAfter while that is
	// under gc.sweep_interval (the sweep-interval rebuild takes over).
	// Never shorter than max_task_lifetime_ms (0 or less: that lifetime):
	// until then the taken task's result may still land, and a fresh task
	// would duplicate it.
	RebuildAfter Duration `json:"rebuild_after_ms"`
}

// Fingerprint names the planning rule's parameters (what the planner and
// the summary's debt judge by; not the start or aging timing). A record
// that a head has nothing to compact holds only under the fingerprint it
// was made under: after a policy change the head is judged again.
func (c Compaction) Fingerprint() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d/%d/%d/%d/%g/%g", c.MergeFactor, c.TargetObjectBytes, c.MaxJobInputs, c.MaxJobBytes,
		c.MaxLevel, c.DeleteDensityThreshold, c.FragmentationThreshold))
	return hex.EncodeToString(sum[:8])
}

// GC is garbage collection's policy. TokenLifetime and RetentionWindow are
// the delete rule's parameters; the observer reads them here to predict
// when GC debt becomes due.
type GC struct {
	// TokenLifetime: a superseded manifest stays openable this long (the
	// query plane's continuation token lifetime).
	TokenLifetime Duration `json:"token_lifetime_ms"`
	// RetentionWindow: an object is evicted only when its evict commit ts
	// is before global_safe_ts - RetentionWindow.
	RetentionWindow Duration `json:"retention_window_ms"`
	// SweepInterval: reconciliation enqueues a GC sweep at least this often.
	SweepInterval Duration `json:"sweep_interval_ms"`
	// BatchSize is the keys of one DeleteObjects call.
	BatchSize int `json:"batch_size"`
	// DeletesPerSec paces deletes per collection; GlobalDeletesPerSec all
	// collections of every GC instance together (a token bucket in the
	// coordinator's table shared by the fleet).
	DeletesPerSec       float64 `json:"deletes_per_sec"`
	GlobalDeletesPerSec float64 `json:"global_deletes_per_sec"`
	// MaxAttempts is the attempts per key before the task fails, with
	// RetryBackoff first (doubling).
	MaxAttempts  int      `json:"max_attempts"`
	RetryBackoff Duration `json:"retry_backoff_ms"`
	// RetryAfter is the next due time of a blocked sweep (unreadable
	// watermark).
	RetryAfter Duration `json:"retry_after_ms"`
	// PartCache is the verified manifest parts the lineage reader caches.
	PartCache int `json:"part_cache"`
	// ProofMaxAge bounds how old the eligibility proof behind a delete
	// call may be (every call, retries included, re-checks against a head
	// read at most this long before). At most MaxProofMaxAge and half of
	// TokenLifetime.
	ProofMaxAge Duration `json:"proof_max_age_ms"`
	// MaxSweepCandidates bounds the deletes of one sweep (candidates
	// already gone do not count; a sweep holds at most twice this many
	// while it checks which still exist); a sweep that finds more
	// continues in the next one.
	MaxSweepCandidates int `json:"max_sweep_candidates"`
	// TombstoneRunBudget and TombstoneMaxCalls bound one run of a dropped
	// incarnation's cleanup (it resumes from its stored cursor in the next
	// run). The budget is capped at 80% of functions.gc_timeout_ms (0:
	// that cap), so a run always ends and saves its cursor in time.
	TombstoneRunBudget Duration `json:"tombstone_run_budget_ms"`
	TombstoneMaxCalls  int      `json:"tombstone_max_calls"`
}

// Handoff is the handoff's policy.
type Handoff struct {
	// MaxLineageWalk bounds the versions read since a base to find an
	// applied request or a delete gain; a longer gap is treated as stale.
	MaxLineageWalk int `json:"max_lineage_walk"`
	// MaxResubmits bounds resubmissions after unknown outcomes in one
	// delivery.
	MaxResubmits int `json:"max_resubmits"`
}

// Functions are the deployed functions' timeouts (the CDK app deploys
// them; each queue's visibility timeout is derived from its consumer's).
type Functions struct {
	ObserverTimeout   Duration `json:"observer_timeout_ms"`
	CompactionTimeout Duration `json:"compaction_timeout_ms"`
	GCTimeout         Duration `json:"gc_timeout_ms"`
	HandoffTimeout    Duration `json:"handoff_timeout_ms"`
}

// Default is the production policy: the one place defaults are written.
func Default() Policy {
	return Policy{
		LeaseDuration:          Duration(2 * time.Minute),
		LeaseHeartbeat:         Duration(DefaultLeaseHeartbeat),
		MaxTaskLifetime:        Duration(15 * time.Minute),
		CutoverDeadline:        Duration(30 * time.Minute),
		PublisherConflictCheck: true,
		ClockSkew:              Duration(2 * time.Minute),
		OwnerTimeout:           Duration(10 * time.Second),
		BatchStopMargin:        Duration(5 * time.Second),
		Compaction: Compaction{
			MergeFactor:            4,
			TargetObjectBytes:      64 << 20,
			MaxJobInputs:           16,
			MaxJobBytes:            1 << 30,
			MaxLevel:               3,
			ReadRangeBytes:         DefaultReadRangeBytes,
			DeleteDensityThreshold: 0.3,
			FragmentationThreshold: 0.25,
			// The still-head wait is an option: the publisher's conflict
			// check keeps a rewrite overtaken by commits (set 1 s / 2 s
			// for a publisher without it).
			StartQuiet:              0,
			StartMaxWait:            0,
			ResultWait:              Duration(2 * time.Second),
			MaxWaitBehindTransition: Duration(time.Hour),
		},
		GC: GC{
			TokenLifetime:       Duration(15 * time.Minute),
			RetentionWindow:     Duration(5 * time.Minute),
			SweepInterval:       Duration(time.Hour),
			BatchSize:           awslimit.S3DeleteObjectsMaxKeys,
			DeletesPerSec:       3000,
			GlobalDeletesPerSec: 3500,
			MaxAttempts:         5,
			RetryBackoff:        Duration(200 * time.Millisecond),
			RetryAfter:          Duration(time.Minute),
			PartCache:           1024,
			ProofMaxAge:         Duration(10 * time.Second),
			MaxSweepCandidates:  100_000,
			TombstoneMaxCalls:   2000,
		},
		Handoff: Handoff{MaxLineageWalk: 64, MaxResubmits: 3},
		Functions: Functions{
			ObserverTimeout:   Duration(30 * time.Second),
			CompactionTimeout: Duration(5 * time.Minute),
			GCTimeout:         Duration(5 * time.Minute),
			HandoffTimeout:    Duration(time.Minute),
		},
		// Each queue's event source runs at most 10 consumers; the class
		// bounds share them (compaction and transitions one queue, the GC
		// classes the other), so one class never takes all of its queue's.
		Budgets: Budgets{
			ClassConcurrency:        ClassConcurrency{Compaction: 8, LifecycleTransition: 4, GC: 6, RetentionReclaim: 4, TombstoneCleanup: 4},
			DeferDelay:              Duration(10 * time.Second),
			S3WritesPerSecPerPrefix: 0.8 * awslimit.S3WritesPerSecPerPrefix,
			S3ReadsPerSecPerPrefix:  0.8 * awslimit.S3ReadsPerSecPerPrefix,
		},
	}
}

// ReleaseReaskAfter is how long after a dropped incarnation's cleanup
// handed its completion to the handoff that completion counts as lost when
// CCS has not recorded the release: max_task_lifetime_ms (a completion the
// handoff still retries meanwhile is harmless: the intent's identity is the
// incarnation's, CCS records it once).
func (p Policy) ReleaseReaskAfter() time.Duration { return p.MaxTaskLifetime.D() }

// BatchReserve is the invocation time a consumer keeps in hand before it
// starts another record: one owner call plus the margin.
func (p Policy) BatchReserve() time.Duration { return p.OwnerTimeout.D() + p.BatchStopMargin.D() }

// Compaction read sizes (compaction.read_range_bytes). Object storage
// answers a GET after tens of milliseconds whatever its size: reads of a
// few MiB keep a merge near copy speed at one GET per few MiB.
const (
	DefaultReadRangeBytes = 4 << 20
	MinReadRangeBytes     = 1 << 20
	MaxReadRangeBytes     = 8 << 20
	// MaxCompactionReadBytes bounds a merge's input buffers (two ranges
	// per input): half of the compaction function's 1024 MB, the rest
	// being the output's part buffers, block indexes and the runtime.
	MaxCompactionReadBytes = 512 << 20
)

// MaxProofMaxAge is the ceiling of gc.proof_max_age_ms (also at most half
// of gc.token_lifetime_ms): a delete call rests on a proof read moments
// before it (SYSTEM rule 14), never on one that may have outlived a drop,
// release and re-creation of the name.
const MaxProofMaxAge = 60 * time.Second

// DefaultLeaseHeartbeat is the heartbeat cadence of a task lease.
const DefaultLeaseHeartbeat = 30 * time.Second

// MinLeaseHeartbeats is the grace floor: lease_duration_ms must be at
// least this many heartbeat intervals (a lease whose grace were one
// interval would expire on the first late heartbeat).
const MinLeaseHeartbeats = 2

// VisibilityTimeout is the visibility timeout of a queue whose consumer's
// timeout is fnTimeout (AWS's recommendation for Lambda event sources).
func VisibilityTimeout(fnTimeout time.Duration) time.Duration {
	return awslimit.LambdaSQSVisibilityFactor * fnTimeout
}
