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
	DebtAgreement         bool // the compaction executor plans the full object set before answering "nothing" and records a head whose full plan is empty, so a summary debt the plan cannot act on (a level counted across tiers) is not re-enqueued at every reconciliation pass
}

// All is every guard on: the only production setting.
func All() Set {
	return Set{LeaseCondition: true, BaseRevalidation: true, DeleteGainCheck: true, AmbiguousReread: true,
		DeleteGates: true, ManifestBeforeObjects: true, ReleaseDependencies: true, OrphanOwnership: true, FreshProof: true, CutoverDeadline: true, HeadRegression: true, HandoffFacts: true, OwnWrite: true, DuplicateRederive: true, GroupIsolation: true, TransitionPerTier: true,
		IncarnationFence: true, ReleaseHorizon: true, LineageIncarnation: true, DebtAgreement: true}
}

// Names lists the guards in a stable order (for mutation reports).
func Names() []string {
	return []string{"lease_condition", "base_revalidation", "delete_gain_check", "ambiguous_reread",
		"delete_gates", "manifest_before_objects", "release_dependencies", "orphan_ownership", "fresh_proof", "cutover_deadline", "head_regression", "handoff_facts",
		"own_write", "duplicate_rederive", "group_isolation", "transition_per_tier", "incarnation_fence", "release_horizon", "lineage_incarnation", "debt_agreement"}
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
	default:
		return s, false
	}
	return s, true
}
