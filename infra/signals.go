package main

import "time"

// Signal is one of the coordinator-local observability signals of the
// architecture note (seed 000, §10). Each gets its own dashboard widget
// titled "§10 <Name>" showing exactly these series; TestEverySection10
// SignalHasAWidget holds the dashboard to this table.
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
}

// DueAgeAlarmThreshold: the oldest due item of any task class (EMF
// OldestDueAgeMs, which reconciliation derives per Kind from the durable
// debt) older than this for three 5-minute periods means some collection's
// work is not being served: workers failing or throttled, a budget too
// small for the debt, a result dropped over and over. It is the
// scheduling policy's wait bound (README "Priority and fairness") with
// room for one reconcile interval and one function timeout.
const DueAgeAlarmThreshold = 2 * time.Hour

// Section10Signals is the §10 list, in its order.
var Section10Signals = []Signal{
	{Name: "queue depth by task class", Queue: []string{"ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesNotVisible"},
		EMF: []string{"TasksEnqueued", "TasksReenqueued"}, Kind: []string{"DueWork"}, Alarmed: "DLQ depth per queue"},
	{Name: "age of the oldest due item per class", Queue: []string{"ApproximateAgeOfOldestMessage"}, Kind: []string{"OldestDueAgeMs", "TaskWaitMs"},
		Alarmed: "oldest due item of any class older than DueAgeAlarmThreshold; oldest message age per queue (2x visibility, at least 15 min)"},
	{Name: "stale-head task invalidation rate", Kind: []string{"StaleTasksSkipped", "StaleResultsDropped", "ExpiredResultsDropped", "StaleFactsDropped"},
		EMF: []string{"CompletionsIgnored", "GCTasksOtherIncarnation", "TombstoneTasksStale", "TombstoneTasksAfterDone"}},
	{Name: "lease timeout and reassignment rate", Kind: []string{"LeaseLost", "LeaseReassigned", "DuplicateTasksSkipped"}},
	// The compaction start rule (compact.StartRule) waits for a still head
	// so that a rewrite is not overtaken by a commit: its deferrals (by
	// Kind), its starts (by Why), the wait, and the rewrites the observer
	// coalesced meanwhile; tasks rebuilt against the head found.
	{Name: "publish conflicts and rebuilds of rewrite tasks", Kind: []string{"CutoversAccepted", "CutoversRejected", "AmbiguousCutovers", "RejectedDeleteGain", "RejectedCoverage", "RewritesRebuilt",
		"RewriteStartDeferred"}, EMF: []string{"TasksRebasedToHead", "RewriteStarted", "RewriteStartWaitMs", "RewritesCoalesced"}},
	{Name: "GC deferrals by gate", EMF: []string{"GCDeferred", "GCRefused", "RetentionReclaimEarly", "GCUnconfirmedDeletes", "ManifestPartCorrupt"},
		Kind: []string{"GCTasksRun", "ObjectsReclaimed", "SweepsContinued"}, Alarmed: "any GC refusal"},
	{Name: "age of the oldest tombstone waiting for release", EMF: []string{"OldestTombstoneAgeMs", "ReleaseIntentsDeferred", "ReleaseIntentsRecorded", "ReleaseIntentsRejected",
		"TombstonesWaiting", "TombstonesCompleted", "TombstoneRunsBounded", "TombstoneKeysLeftAfterCleanup", "TombstoneHeadsRetired", "TombstoneHeadOfOtherIncarnation",
		"TombstoneStrayManifestsDeleted", "NamespaceReleaseIntents", "NamespaceReleasesDeferred", "NamespaceReleasesByReconcile"},
		Alarmed: "oldest tombstone older than TombstoneAgeAlarmThreshold"},
	// Fleet-wide budgets (issue 16 item 3): waits for tokens, deferrals for
	// want of a class slot, and throttled attempts by AWS (by Kind).
	{Name: "budget saturation and throttling pressure", EMF: []string{"GCBudgetSaturated", "GCBudgetWaitMs", "S3BudgetSaturated", "S3BudgetWaitMs",
		"GCDeleteRetries", "BatchRecordsDeferred"}, Kind: []string{"ClassSlotsSaturated", "TasksDeferred", "S3SlowDown", "DynamoThrottled", "SQSThrottled"},
		Lambda: []string{"Throttles"}},
	// HeadObservationsRaced: two observations raced (one read the head
	// before it moved past what the other recorded; no regression);
	// ReconcileHeadsBehind: reconciliation read a head behind what was
	// observed; IncarnationMismatch: the head is not of the lifetime CCS
	// names yet (nothing scheduled from it).
	{Name: "lag between committed and observed head", EMF: []string{"ObserveLagMs", "HeadBelowObserved", "ReconcileFailures", "HeadObservationsRaced",
		"ReconcileHeadsBehind", "ObserveFailures", "IncarnationMismatch"},
		Alarmed: "observer p99 lag; reconcile failures; failed head notifications"},
}
