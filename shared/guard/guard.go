package guard

// Set says which guards are on.
type Set struct {
	LeaseCondition        bool // lease acquire/extend are conditional writes on epoch and expiry
	BaseRevalidation      bool // executors and handoff re-check base version+checksum against the head
	DeleteGainCheck       bool // a rewrite whose inputs gained deletes since its base is rejected
	AmbiguousReread       bool // an ambiguous write is resolved by re-reading the owner's state
	DeleteGates           bool // GC's reference, watermark and retention gates
	ManifestBeforeObjects bool // a manifest root is deleted only after the objects only it referenced
	ReleaseDependencies   bool // a release intent is requested only after every cleanup dependency is confirmed
	OrphanOwnership       bool // never-committed reclaim touches only the coordinator's own task-id-prefixed outputs
	FreshProof            bool // every delete call, retries included, rests on an eligibility proof younger than the configured bound
	CutoverDeadline       bool // never-committed outputs wait past the largest possible cutover not_after plus the skew allowance
	HeadRegression        bool // a head below the highest version seen (or below existing roots) stops destructive GC until an operator confirms
	HandoffFacts          bool // the handoff re-reads CCS facts before every cutover and release intent: the facts the task kind depends on must be unchanged (fail closed when CCS is unreachable)
	OwnWrite              bool // a conditional write refused by our own applied earlier attempt (an SDK retry) is recognised as ours and succeeds
	DuplicateRederive     bool // a duplicate observation re-derives and re-enqueues its head's tasks (a lost enqueue is made up for)
	GroupIsolation        bool // an SQS consumer fails only the failing record's message group, never other collections' records of the batch
	TransitionPerTier     bool // a lifecycle transition is due only when an object of another tier than the target is old enough (per-tier part minimums), so a transition that moves nothing never starves compaction
	IncarnationFence      bool // a task acts only on the incarnation it names; a dropped incarnation's head is deleted only while it still names it
	ReleaseHorizon        bool // a release intent waits until CCS's reservation horizon has passed
	LineageIncarnation    bool // an operator's lineage confirmation is kept per (collection, incarnation) and applies only to a head of its own incarnation
	CatalogNames          bool // reconciliation validates every name CCS lists before it chunks the catalog: a bad name is counted, alarmed and skipped, never fails the chunk naming it
	NamespaceReleaseOwed  bool // every reconciliation derives the namespace releases owed from CCS's listing of dropped namespaces (one with no child has nothing else to ask for it) and hands them to the handoff
	HandoffProvenance     bool // the handoff refuses a rewrite that is not its task's own work: task id the identity of its base, outputs only under that task's keys, something added, inputs' records and key ranges conserved
	HandoffSender         bool // the handoff refuses a message whose SQS SenderId is not the role that sends that kind (rewrites compaction, cleanups GC, namespace releases the observer)
	SweepRecordMoved      bool // a sweep's record lands when the head moved during the sweep: carried forward to the observed head by the removals of the roots committed since the swept head (its debt cleared, the newer debt kept)
	LineageDescent        bool // the observer advances its recorded head only to a head whose lineage descends from it, so a head put back and passed by a new lineage is still a refused regression
	RegressionAtScale     bool // a head regression's evidence is listed exactly at any size (every page, a real bound) and the refused plan names it all, so a confirmation lifts the refusal
	DebtAgreement         bool // the compaction executor plans the full object set before answering "nothing" and records a head whose full plan is empty, so a summary debt the plan cannot act on (a level counted across tiers) is not re-enqueued at every reconciliation pass
	ReleaseReask          bool // a dropped incarnation whose cleanup cursor says "done" but whose release CCS has not recorded is owed again once the completion's delivery bound passed: cleaned (listed) and reported again, so a dead-lettered completion costs one reconciliation, not the release
	DroppedRetention      bool // lifecycle retention_ms holds a dropped collection's objects as it holds a live one's (the tombstone cleanup asks the gate with the collection's retention); its release waits with them
	TombstoneSighting     bool // a tombstone counts from the later of CCS's tombstoned_at and the coordinator's first sighting of it (recorded, keep-first): a time CCS asserts never opens a delete gate on its own (rule 16)
	ConfirmationSighting  bool // an operator's lineage confirmation protects what the abandoned roots reference a token lifetime from the later of its confirmed_at and the coordinator's recorded first sighting of it, never from the operator's clock alone (rule 16)
	WatermarkClockCap     bool // global_safe_ts counts no later than the system's clock: a watermark ahead of it opens no retention window early (rule 16)
	SightingPerFacts      bool // a tombstone's first sighting is kept per CCS facts version: the same tombstone answered again after CCS said otherwise (a replayed forged answer) counts from its own first sighting, never from one recorded before (rule 16)
	TombstoneRootWritten  bool // a dropped head's commit counts from the later of its committed_at and the LastModified S3 gave its root, as the sweep dates every commit: a publisher's slow clock cannot date a late commit back to the drop (rule 16)
	ReleaseRederived      bool // before a collection release intent the handoff derives every dependency again itself, trusting no completion's "confirmed": the reservation horizon passed by its own clock, no CCS precondition pending, and a listing of the collection's prefix finds no key of the lifetime (rules 8, 16, 17)
	RetireTombstoned      bool // the publisher (stand-in and contract) retires a head only when CCS, asked at the retirement, dropped the head's incarnation: no caller's request wipes a live collection (the stand-in's publisher.Options.RetireLive is its mutation)
	ConflictCheckProven   bool // a result whose base the head moved past is submitted for the publisher's conflict check only after the publisher proved it runs the check (an answer echoed conflict_check v1); until then it is dropped as stale (base revalidation), and an acceptance on a moved head without the echo is a contract violation (PublisherUncheckedRebase), never counted as a checked rebase (rules 2, 7)
	DroppedHeadPinned     bool // a dropped lifetime's deletes rest on the head they were derived from: a head of that lifetime other than the one a tombstone cleanup (or a sweep of the dropped collection) started from — a late commit — ends the run, and cleaning starts again from the new head with its commit's horizons (rules 3, 14)
	// RetireFirst: a dropped lifetime's cleanup asks the publisher to retire its head before it deletes anything (the
	// publisher asks CCS itself at the retirement: the second, independent confirmation of the tombstone) and then cleans
	// from the head it recorded and from the lifetime's listed roots; a tombstone answer spoofed on GC's path to CCS
	// alone wipes nothing (off: the head is retired last, after the deletes)
	RetireFirst        bool
	CutoverFromWritten bool // a rewrite's cutover not_after (and its age against the task lifetime) counts from the earlier of the task's claimed start and the earliest LastModified S3 gave the outputs it adds, and an executor that keeps an earlier attempt's outputs reports that earlier time as its start: a cutover naming an output always expires before GC's never-committed reclaim of it (rules 4, 13, 16)
	// AbandonedCommitted: after a confirmed head regression, a coordinator output an abandoned committed root names is
	// judged by the gate as a committed object (rule 3: watermark, lifecycle retention, token lifetime), evicted when the
	// coordinator first saw the confirmation, not as a never-committed output (rule 4's grace only) (review 23 D5).
	AbandonedCommitted bool
	SweepClock         bool // a lifecycle transition selects by a task's sweep time only up to the executor's clock plus the skew allowance: a task dated ahead (a forged message, a skewed sender) moves nothing early (rule 16)
}

// All is every guard on: the only production setting.
func All() Set {
	return Set{LeaseCondition: true, BaseRevalidation: true, DeleteGainCheck: true, AmbiguousReread: true,
		DeleteGates: true, ManifestBeforeObjects: true, ReleaseDependencies: true, OrphanOwnership: true, FreshProof: true, CutoverDeadline: true, HeadRegression: true, HandoffFacts: true, OwnWrite: true, DuplicateRederive: true, GroupIsolation: true, TransitionPerTier: true,
		IncarnationFence: true, ReleaseHorizon: true, LineageIncarnation: true, DebtAgreement: true, CatalogNames: true, NamespaceReleaseOwed: true,
		HandoffProvenance: true, HandoffSender: true, DroppedRetention: true, TombstoneSighting: true, DroppedHeadPinned: true, TombstoneRootWritten: true, SightingPerFacts: true, WatermarkClockCap: true, SweepClock: true, ConfirmationSighting: true, ReleaseRederived: true, RetireTombstoned: true, ConflictCheckProven: true,
		SweepRecordMoved: true, LineageDescent: true, RegressionAtScale: true, ReleaseReask: true,
		RetireFirst: true, CutoverFromWritten: true,
		AbandonedCommitted: true}
}

// Names lists the guards in a stable order (for mutation reports).
func Names() []string {
	return []string{"lease_condition", "base_revalidation", "delete_gain_check", "ambiguous_reread",
		"delete_gates", "manifest_before_objects", "release_dependencies", "orphan_ownership", "fresh_proof", "cutover_deadline", "head_regression", "handoff_facts",
		"own_write", "duplicate_rederive", "group_isolation", "transition_per_tier", "incarnation_fence", "release_horizon", "lineage_incarnation", "debt_agreement", "catalog_names", "namespace_release_owed", "handoff_provenance", "handoff_sender", "dropped_retention", "tombstone_sighting", "dropped_head_pinned", "tombstone_root_written", "sighting_per_facts", "watermark_clock_cap", "sweep_clock", "confirmation_sighting", "release_rederived", "retire_tombstoned", "conflict_check_proven",
		"sweep_record_moved", "lineage_descent", "regression_at_scale", "release_reask",
		"retire_first", "cutover_from_written",
		"abandoned_committed"}
}

// Without returns All() with the named guard off; ok is false for an unknown name.
func Without(name string) (Set, bool) { return All().Off(name) }

// Off returns s with the named guard off as well; ok is false for an
// unknown name.
func (s Set) Off(name string) (Set, bool) {
	switch name {
	case "lease_condition":
		s.LeaseCondition = false
	case "base_revalidation":
		s.BaseRevalidation = false
	case "delete_gain_check":
		s.DeleteGainCheck = false
	case "ambiguous_reread":
		s.AmbiguousReread = false
	case "delete_gates":
		s.DeleteGates = false
	case "manifest_before_objects":
		s.ManifestBeforeObjects = false
	case "release_dependencies":
		s.ReleaseDependencies = false
	case "orphan_ownership":
		s.OrphanOwnership = false
	case "fresh_proof":
		s.FreshProof = false
	case "cutover_deadline":
		s.CutoverDeadline = false
	case "head_regression":
		s.HeadRegression = false
	case "handoff_facts":
		s.HandoffFacts = false
	case "own_write":
		s.OwnWrite = false
	case "duplicate_rederive":
		s.DuplicateRederive = false
	case "group_isolation":
		s.GroupIsolation = false
	case "transition_per_tier":
		s.TransitionPerTier = false
	case "incarnation_fence":
		s.IncarnationFence = false
	case "release_horizon":
		s.ReleaseHorizon = false
	case "lineage_incarnation":
		s.LineageIncarnation = false
	case "debt_agreement":
		s.DebtAgreement = false
	case "catalog_names":
		s.CatalogNames = false
	case "namespace_release_owed":
		s.NamespaceReleaseOwed = false
	case "handoff_provenance":
		s.HandoffProvenance = false
	case "handoff_sender":
		s.HandoffSender = false
	case "dropped_retention":
		s.DroppedRetention = false
	case "tombstone_sighting":
		s.TombstoneSighting = false
	case "dropped_head_pinned":
		s.DroppedHeadPinned = false
	case "tombstone_root_written":
		s.TombstoneRootWritten = false
	case "sighting_per_facts":
		s.SightingPerFacts = false
	case "watermark_clock_cap":
		s.WatermarkClockCap = false
	case "sweep_clock":
		s.SweepClock = false
	case "confirmation_sighting":
		s.ConfirmationSighting = false
	case "release_rederived":
		s.ReleaseRederived = false
	case "retire_tombstoned":
		s.RetireTombstoned = false
	case "conflict_check_proven":
		s.ConflictCheckProven = false
	case "cutover_from_written":
		s.CutoverFromWritten = false
	case "sweep_record_moved":
		s.SweepRecordMoved = false
	case "lineage_descent":
		s.LineageDescent = false
	case "regression_at_scale":
		s.RegressionAtScale = false
	case "release_reask":
		s.ReleaseReask = false
	case "retire_first":
		s.RetireFirst = false
	case "abandoned_committed":
		s.AbandonedCommitted = false
	default:
		return s, false
	}
	return s, true
}
