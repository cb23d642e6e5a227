package monitoring

import "time"

// Signal is one of the coordinator-local observability signals of the
// architecture note (its observability section). Each gets its own dashboard widget
// titled Name (no section number: a user reads the dashboard, not the
// note) showing exactly these series; the infra and local dashboard tests
// holds the dashboard to this table.
type Signal struct {
	Name string
	// EMF are coordinator metrics (namespace BCC) shown, all dimension
	// sets (SEARCH): Reason series appear on their own.
	EMF []string
	// Kind are coordinator metrics emitted with a Kind (task class)
	// dimension, shown one series per Kind (SEARCH on the schema
	// {BCC,Deployment,Function,Kind}).
	Kind []string
	// Queue are SQS metrics of every task queue (by queue class: the
	// compaction queue carries compaction and lifecycle_transition, the gc
	// queue gc, retention_reclaim and tombstone_cleanup).
	Queue []string
	// Lambda are the functions' AWS/Lambda metrics.
	Lambda []string
	// Alarmed names what a person must act on, and where it is alarmed.
	Alarmed string
	// LocalGap says why a local run that injects no fault may leave the
	// widget empty ("": it must have data).
	LocalGap string
}

// DueAgeAlarmThreshold: the oldest due item of any task class (EMF
// OldestDueAgeMs, which reconciliation derives per Kind from the durable
// debt) older than this for three 5-minute periods means some collection's
// work is not being served: workers failing or throttled, a budget too
// small for the debt, a result dropped over and over. It is the
// scheduling policy's wait bound (docs/scheduling.md "Priority and fairness") with
// room for one reconcile interval and one function timeout.
const DueAgeAlarmThreshold = 2 * time.Hour

// Signals is the architecture note's list of observability signals, in its order.
var Signals = []Signal{
	{Name: "Queue depth by task class", Queue: []string{"ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesNotVisible"},
		EMF: []string{"TasksEnqueued", "TasksReenqueued"}, Kind: []string{"DueWork"}, Alarmed: "DLQ depth per queue"},
	{Name: "Age of the oldest due item per class", Queue: []string{"ApproximateAgeOfOldestMessage"}, Kind: []string{"OldestDueAgeMs", "TaskWaitMs"},
		Alarmed: "oldest due item of any class older than DueAgeAlarmThreshold; oldest message age per queue (2x visibility, at least 15 min)"},
	{Name: "Stale-head task invalidation rate", Kind: []string{"StaleTasksSkipped", "StaleResultsDropped", "ExpiredResultsDropped", "StaleFactsDropped"},
		EMF:      []string{"CompletionsIgnored", "GCTasksOtherIncarnation", "TombstoneTasksStale", "TombstoneTasksAfterDone"},
		LocalGap: "only when a task's base head moves or its CCS facts change before it runs"},
	{Name: "Lease timeout and reassignment rate", Kind: []string{"LeaseLost", "LeaseReassigned", "DuplicateTasksSkipped"},
		LocalGap: "only when a worker loses its lease (a crash or a timeout) or a task is delivered twice"},
	// The compaction start rule (compact.StartRule) waits for a still head
	// so that a rewrite is not overtaken by a commit: its deferrals (by
	// Kind), its starts (by Why), the wait, and the rewrites the observer
	// coalesced meanwhile; tasks rebuilt against the head found. The
	// publisher's conflict check (issue 26): cutovers applied on a newer
	// head (by Kind), refusals by clause, a capability declared but
	// missing; a reported rewrite's wait for its cutover (by Why).
	{Name: "Publish conflicts and rebuilds of rewrite tasks", Kind: []string{"CutoversAccepted", "CutoversRebased", "CutoversRejected", "AmbiguousCutovers", "RejectedDeleteGain", "RejectedCoverage", "RewritesRebuilt",
		"RewriteStartDeferred"}, EMF: []string{"TasksRebasedToHead", "RewriteStarted", "RewriteStartWaitMs", "RewritesCoalesced", "ForgedCompletions",
		"RewriteOutputsTaken", "RewriteOutputsAlreadyWritten", "CutoversRefusedByCheck", "PublisherConflictCheckMissing", "PublisherUncheckedRebase", "RewriteResultWait", "RewriteResultWaitMs"},
		Alarmed: "any forged completion; any unchecked rebase by the publisher"},
	{Name: "GC deferrals by gate", EMF: []string{"GCDeferred", "GCRefused", "RetentionReclaimEarly", "GCUnconfirmedDeletes", "ManifestPartCorrupt",
		"SweepRecordsCarriedForward", "SweepRecordsNotApplied"},
		Kind: []string{"GCTasksRun", "ObjectsReclaimed", "SweepsContinued"}, Alarmed: "any GC refusal"},
	{Name: "Age of the oldest tombstone waiting for release", EMF: []string{"OldestTombstoneAgeMs", "ReleaseIntentsDeferred", "ReleaseIntentsRecorded", "ReleaseIntentsRejected",
		"TombstonesWaiting", "TombstonesCompleted", "TombstoneRunsBounded", "TombstoneKeysLeftAfterCleanup", "TombstoneHeadsRetired", "TombstoneHeadOfOtherIncarnation",
		"TombstoneStrayManifestsDeleted", "TombstoneStrayRootObjectsDeleted", "TombstoneHeld", "TombstoneLineageMoved", "NamespaceReleaseIntents", "NamespaceReleasesDeferred", "NamespaceReleasesByReconcile",
		"ReleasesOwedAgain", "ReleaseCompletionsReasked"},
		Alarmed:  "oldest tombstone older than TombstoneAgeAlarmThreshold",
		LocalGap: "only when a collection or namespace is dropped (make demo drops none)"},
	// Fleet-wide budgets (issue 16 item 3): waits for tokens, deferrals for
	// want of a class slot, and throttled attempts by AWS (by Kind).
	{Name: "Budget saturation and throttling pressure", EMF: []string{"GCBudgetSaturated", "GCBudgetWaitMs", "S3BudgetSaturated", "S3BudgetWaitMs",
		"GCDeleteRetries", "GCStaleProofs", "BatchRecordsDeferred"}, Kind: []string{"ClassSlotsSaturated", "TasksDeferred", "S3SlowDown", "DynamoThrottled", "SQSThrottled"},
		Lambda: []string{"Throttles"}},
	// HeadObservationsRaced: two observations raced (one read the head
	// before it moved past what the other recorded; no regression);
	// ReconcileHeadsBehind: reconciliation read a head behind what was
	// observed; IncarnationMismatch: the head is not of the lifetime CCS
	// names yet (nothing scheduled from it).
	// HeadLineageReplaced: a head whose lineage does not descend from the
	// recorded one (a regression, nothing recorded); HeadsAdvancedOverGap:
	// advances that kept the head advanced from for GC to verify
	// (ObservedGapsVerified once it did).
	{Name: "Lag between committed and observed head", EMF: []string{"ObserveLagMs", "HeadBelowObserved", "ReconcileFailures", "HeadObservationsRaced",
		"ReconcileHeadsBehind", "ObserveFailures", "IncarnationMismatch", "HeadLineageReplaced", "HeadsAdvancedOverGap", "ObservedGapsVerified"},
		Alarmed: "observer p99 lag; reconcile failures; failed head notifications"},
}

// ReconcileFailureAlarmPeriods: reconciliation of some collection failed
// in this many consecutive 5-minute periods (every scheduled pass retries
// it; a passing failure clears itself). Alarmed apart from head
// notification failures (ObserveFailures, the observer-failures queue):
// a collection that reconciliation cannot read gets no GC at all.
const ReconcileFailureAlarmPeriods = 3

// ObserveLagAlarmThreshold: the observer's p99 lag behind committed heads
// (EMF duration ObserveLagMs, from a head's commit to its observation)
// above this for three 5-minute periods means notifications are lost or the
// observer is failing; reconciliation catches up every reconcile interval.
const ObserveLagAlarmThreshold = 10 * time.Minute

// TombstoneAgeAlarmThreshold is how long a dropped collection may wait for
// its release intent before the OldestTombstoneAge alarm fires.
const TombstoneAgeAlarmThreshold = 7 * 24 * time.Hour

// OldestMessageAlarmThreshold is when a queue's oldest message is "too old":
// twice the queue's visibility timeout (one full retry cycle has passed
// without the message leaving), and never under 15 minutes.
func OldestMessageAlarmThreshold(visibility time.Duration) time.Duration {
	return max(2*visibility, 15*time.Minute)
}
