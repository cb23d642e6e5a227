package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract"
)

// FieldError is one setting that is wrong, named by its JSON path
// ("gc.batch_size").
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return "policy: " + e.Field + ": " + e.Problem }

// Invalid is every problem Validate found, in the order it checks them.
type Invalid []*FieldError

func (v Invalid) Error() string {
	lines := make([]string, len(v))
	for i, e := range v {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "; ")
}

// Fields names the bad fields.
func (v Invalid) Fields() []string {
	out := make([]string, len(v))
	for i, e := range v {
		out[i] = e.Field
	}
	return out
}

// Validate checks every setting's range and the relations between them.
// It returns nil or an Invalid naming each bad field.
func (p Policy) Validate() error {
	var bad Invalid
	check := func(ok bool, field, format string, args ...any) {
		if !ok {
			bad = append(bad, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
		}
	}
	positive := func(d Duration, field string) { check(d > 0, field, "must be positive, is %s", d) }
	nonNegative := func(d Duration, field string) { check(d >= 0, field, "must not be negative, is %s", d) }

	// Ranges.
	positive(p.LeaseDuration, "lease_duration_ms")
	positive(p.LeaseHeartbeat, "lease_heartbeat_ms")
	positive(p.MaxTaskLifetime, "max_task_lifetime_ms")
	positive(p.CutoverDeadline, "cutover_deadline_ms")
	nonNegative(p.ClockSkew, "clock_skew_ms")
	positive(p.OwnerTimeout, "owner_timeout_ms")
	nonNegative(p.BatchStopMargin, "batch_stop_margin_ms")
	positive(p.GC.TokenLifetime, "gc.token_lifetime_ms")
	nonNegative(p.GC.RetentionWindow, "gc.retention_window_ms")
	positive(p.GC.SweepInterval, "gc.sweep_interval_ms")
	positive(p.GC.RetryBackoff, "gc.retry_backoff_ms")
	positive(p.GC.RetryAfter, "gc.retry_after_ms")
	positive(p.GC.ProofMaxAge, "gc.proof_max_age_ms")
	check(p.GC.ProofMaxAge <= Duration(MaxProofMaxAge), "gc.proof_max_age_ms",
		"must be at most %s (a delete call rests on a proof read moments before it, SYSTEM rule 14), is %s", MaxProofMaxAge, p.GC.ProofMaxAge)
	for _, f := range p.Functions.all() {
		check(f.timeout >= Duration(awslimit.LambdaMinTimeout) && f.timeout <= Duration(awslimit.LambdaMaxTimeout), f.field,
			"%s is outside Lambda's timeout range %s..%s", f.timeout, awslimit.LambdaMinTimeout, awslimit.LambdaMaxTimeout)
	}
	for i, name := range p.PausedCollections.Names() {
		check(contract.ValidCollection(name), fmt.Sprintf("paused_collections[%d]", i), "%q is not a valid collection name", name)
	}
	c := p.Compaction
	check(c.MergeFactor >= 2, "compaction.merge_factor", "must be at least 2 (merging fewer objects reduces nothing), is %d", c.MergeFactor)
	check(c.TargetObjectBytes > 0 && c.TargetObjectBytes <= awslimit.S3MaxObjectBytes, "compaction.target_object_bytes",
		"must be in 1..%d (S3's largest object), is %d", int64(awslimit.S3MaxObjectBytes), c.TargetObjectBytes)
	check(c.MaxJobInputs >= 2, "compaction.max_job_inputs", "must be at least 2, is %d", c.MaxJobInputs)
	check(c.MaxJobBytes > 0, "compaction.max_job_bytes", "must be positive, is %d", c.MaxJobBytes)
	check(c.ReadRangeBytes >= MinReadRangeBytes && c.ReadRangeBytes <= MaxReadRangeBytes, "compaction.read_range_bytes",
		"must be in %d..%d (1 to 8 MiB), is %d", MinReadRangeBytes, MaxReadRangeBytes, c.ReadRangeBytes)
	if c.MaxJobInputs >= 2 && c.ReadRangeBytes > 0 {
		check(2*c.ReadRangeBytes*int64(c.MaxJobInputs) <= MaxCompactionReadBytes, "compaction.read_range_bytes",
			"2 x %d x max_job_inputs %d = %d bytes of input buffers exceeds %d (half the compaction function's memory)",
			c.ReadRangeBytes, c.MaxJobInputs, 2*c.ReadRangeBytes*int64(c.MaxJobInputs), MaxCompactionReadBytes)
	}
	check(c.MaxLevel >= 1 && c.MaxLevel <= contract.MaxLevel, "compaction.max_level", "must be in 1..%d, is %d", contract.MaxLevel, c.MaxLevel)
	check(c.DeleteDensityThreshold <= 1, "compaction.delete_density_threshold", "must be at most 1 (negative: off), is %g", c.DeleteDensityThreshold)
	check(c.FragmentationThreshold <= 0.5, "compaction.fragmentation_threshold",
		"must be at most 0.5 so that merging fragmented objects yields fewer objects (negative: off), is %g", c.FragmentationThreshold)
	nonNegative(c.StartQuiet, "compaction.start_quiet_ms")
	nonNegative(c.StartMaxWait, "compaction.start_max_wait_ms")
	nonNegative(c.ResultWait, "compaction.result_wait_ms")
	check(c.MaxWaitBehindTransition > 0, "compaction.max_wait_behind_transition_ms", "must be positive (the aging bound of compaction behind transitions), is %d", c.MaxWaitBehindTransition.Ms())
	nonNegative(c.RebuildAfter, "compaction.rebuild_after_ms")
	g := p.GC
	check(g.BatchSize >= 1 && g.BatchSize <= awslimit.S3DeleteObjectsMaxKeys, "gc.batch_size",
		"must be in 1..%d (S3 DeleteObjects takes at most %d keys), is %d", awslimit.S3DeleteObjectsMaxKeys, awslimit.S3DeleteObjectsMaxKeys, g.BatchSize)
	check(g.DeletesPerSec > 0, "gc.deletes_per_sec", "must be positive, is %g", g.DeletesPerSec)
	check(g.GlobalDeletesPerSec > 0, "gc.global_deletes_per_sec", "must be positive, is %g", g.GlobalDeletesPerSec)
	check(g.MaxAttempts >= 1 && g.MaxAttempts <= 20, "gc.max_attempts", "must be in 1..20, is %d", g.MaxAttempts)
	check(g.PartCache >= 1, "gc.part_cache", "must be at least 1, is %d", g.PartCache)
	check(g.MaxSweepCandidates >= 1, "gc.max_sweep_candidates", "must be at least 1, is %d", g.MaxSweepCandidates)
	check(g.TombstoneMaxCalls >= 1, "gc.tombstone_max_calls", "must be at least 1, is %d", g.TombstoneMaxCalls)
	check(g.TombstoneRunBudget >= 0, "gc.tombstone_run_budget_ms", "must be >= 0 (0: 80%% of functions.gc_timeout_ms), is %s", g.TombstoneRunBudget.D())
	check(p.Handoff.MaxLineageWalk >= 1, "handoff.max_lineage_walk", "must be at least 1, is %d", p.Handoff.MaxLineageWalk)
	check(p.Handoff.MaxResubmits >= 1, "handoff.max_resubmits", "must be at least 1, is %d", p.Handoff.MaxResubmits)
	b := p.Budgets
	for _, cc := range []struct {
		field string
		n     int
	}{{"compaction", b.ClassConcurrency.Compaction}, {"lifecycle_transition", b.ClassConcurrency.LifecycleTransition}, {"gc", b.ClassConcurrency.GC},
		{"retention_reclaim", b.ClassConcurrency.RetentionReclaim}, {"tombstone_cleanup", b.ClassConcurrency.TombstoneCleanup}} {
		check(cc.n >= 0 && cc.n <= maxClassConcurrency, "budgets.class_concurrency."+cc.field,
			"must be in 0..%d (0: unbounded; the slots of a class are one DynamoDB item), is %d", maxClassConcurrency, cc.n)
	}
	check(b.DeferDelay >= Duration(time.Second) && b.DeferDelay <= Duration(awslimit.SQSMaxVisibilityTimeout), "budgets.defer_delay_ms",
		"must be in 1s..%s (a visibility timeout in whole seconds), is %s", awslimit.SQSMaxVisibilityTimeout, b.DeferDelay)
	check(b.S3WritesPerSecPerPrefix == 0 || b.S3WritesPerSecPerPrefix >= MinS3WritesPerSecPerPrefix && b.S3WritesPerSecPerPrefix <= awslimit.S3WritesPerSecPerPrefix, "budgets.s3_writes_per_sec_per_prefix",
		"must be 0 (not paced) or in %g..%d (S3's per-prefix write rate), is %g", MinS3WritesPerSecPerPrefix, awslimit.S3WritesPerSecPerPrefix, b.S3WritesPerSecPerPrefix)
	check(b.S3ReadsPerSecPerPrefix >= 0 && b.S3ReadsPerSecPerPrefix <= awslimit.S3ReadsPerSecPerPrefix, "budgets.s3_reads_per_sec_per_prefix",
		"must be in 0..%d (S3's per-prefix read rate; 0: not paced), is %g", awslimit.S3ReadsPerSecPerPrefix, b.S3ReadsPerSecPerPrefix)
	if len(bad) > 0 {
		return bad // relations between invalid values would only repeat them
	}

	// Relations.
	check(p.LeaseDuration >= MinLeaseHeartbeats*p.LeaseHeartbeat, "lease_duration_ms",
		"%s must be at least %d x lease_heartbeat_ms %s (the grace floor: one late heartbeat must not free a live holder's lease)",
		p.LeaseDuration, MinLeaseHeartbeats, p.LeaseHeartbeat)
	check(p.LeaseDuration < p.MaxTaskLifetime, "lease_duration_ms",
		"%s must be shorter than max_task_lifetime_ms %s (a task outlives several leases)", p.LeaseDuration, p.MaxTaskLifetime)
	check(p.CutoverDeadline >= p.MaxTaskLifetime, "cutover_deadline_ms",
		"%s must not be shorter than max_task_lifetime_ms %s (a result handed off within the task lifetime must still be publishable)",
		p.CutoverDeadline, p.MaxTaskLifetime)
	check(p.ClockSkew <= p.LeaseDuration, "clock_skew_ms",
		"%s must not exceed lease_duration_ms %s (a worker whose clock runs that far ahead would see every live lease expired)", p.ClockSkew, p.LeaseDuration)
	check(p.Functions.CompactionTimeout < p.MaxTaskLifetime, "functions.compaction_timeout_ms",
		"%s must be shorter than max_task_lifetime_ms %s (a run that uses its whole timeout must still hand off in time)",
		p.Functions.CompactionTimeout, p.MaxTaskLifetime)
	check(4*(c.StartMaxWait+c.StartQuiet+c.ResultWait) <= p.Functions.CompactionTimeout, "compaction.start_max_wait_ms",
		"%s + compaction.start_quiet_ms %s + compaction.result_wait_ms %s must be at most a quarter of functions.compaction_timeout_ms %s (the waits must leave the run its time)",
		c.StartMaxWait, c.StartQuiet, c.ResultWait, p.Functions.CompactionTimeout)
	vis := VisibilityTimeout(p.Functions.CompactionTimeout.D())
	check(p.LeaseDuration.D() <= vis, "lease_duration_ms",
		"%s must not exceed the compaction queue's visibility timeout %s (%d x functions.compaction_timeout_ms): a redelivered task must find a crashed holder's lease expired",
		p.LeaseDuration, vis, awslimit.LambdaSQSVisibilityFactor)
	for _, f := range p.Functions.all() {
		check(p.OwnerTimeout < f.timeout, "owner_timeout_ms",
			"%s must be shorter than %s %s (a call to an owner must time out inside the invocation that made it)", p.OwnerTimeout, f.field, f.timeout)
		check(p.OwnerTimeout+p.BatchStopMargin < f.timeout, "batch_stop_margin_ms",
			"owner_timeout_ms %s + %s must be shorter than %s %s (a consumer must have time to start its first record)", p.OwnerTimeout, p.BatchStopMargin, f.field, f.timeout)
	}
	check(2*g.ProofMaxAge <= g.TokenLifetime, "gc.proof_max_age_ms",
		"%s must be at most half of gc.token_lifetime_ms %s (a proof older than that may have outlived a drop, release and re-creation of the name)", g.ProofMaxAge, g.TokenLifetime)
	check(g.DeletesPerSec <= g.GlobalDeletesPerSec, "gc.deletes_per_sec",
		"%g must not exceed gc.global_deletes_per_sec %g (one collection cannot delete faster than the worker)", g.DeletesPerSec, g.GlobalDeletesPerSec)
	// One batch's retries sleep backoff, 2x, 4x, ... (in float: no overflow).
	backoffs := g.RetryBackoff.D().Seconds() * float64(int64(1)<<(g.MaxAttempts-1)-1)
	check(backoffs < p.Functions.GCTimeout.D().Seconds(), "gc.retry_backoff_ms",
		"%s doubling over gc.max_attempts %d sleeps %.1fs for one batch, which must stay inside functions.gc_timeout_ms %s",
		g.RetryBackoff, g.MaxAttempts, backoffs, p.Functions.GCTimeout)
	if len(bad) > 0 {
		return bad
	}
	return nil
}

// maxClassConcurrency bounds a class's slots: its holders live in one item.
const maxClassConcurrency = 1000

type fnTimeout struct {
	field   string
	timeout Duration
}

func (f Functions) all() []fnTimeout {
	return []fnTimeout{
		{"functions.observer_timeout_ms", f.ObserverTimeout},
		{"functions.compaction_timeout_ms", f.CompactionTimeout},
		{"functions.gc_timeout_ms", f.GCTimeout},
		{"functions.handoff_timeout_ms", f.HandoffTimeout},
	}
}
