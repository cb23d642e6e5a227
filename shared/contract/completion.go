package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Completion outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeStale     = "stale"
	OutcomeFailed    = "failed"
)

// Coverage is the exact replacement a rewrite proposes: every input object it
// removes and every output object it adds, with full entries.
type Coverage struct {
	Removed []ObjectEntry `json:"removed"`
	Added   []ObjectEntry `json:"added"`
}

// Cleanup reports what a deleting task did.
type Cleanup struct {
	Deleted          []string       `json:"deleted"`
	AlreadyGone      int            `json:"already_gone"`
	DeferredByReason map[string]int `json:"deferred_by_reason,omitempty"`
	Complete         bool           `json:"complete"` // every candidate is confirmed gone
	// Dependencies is the release dependency graph of a tombstone cleanup
	// (each dependency, its state and evidence); the release intent
	// confirms exactly these.
	Dependencies []Dependency `json:"dependencies,omitempty"`
}

// Dependency states.
const (
	DependencyConfirmed = "confirmed"
	DependencyPending   = "pending"
)

// Release dependencies of a dropped collection's incarnation.
const (
	DepObjects            = "objects"             // every data object of the lineage deleted (404 counts)
	DepManifests          = "manifests"           // every root, part and change part, then the head
	DepControlArtifacts   = "control_artifacts"   // the artifacts CCS names for the incarnation
	DepReservationHorizon = "reservation_horizon" // CCS's reservation horizon has passed
	DepLifecycleRetention = "lifecycle_retention" // lifecycle retention_ms passed for every object of the dropped lineage
	DepCCSPreconditions   = "ccs_preconditions"   // CCS-declared preconditions all satisfied
)

// Dependency is one node of a release's dependency graph.
type Dependency struct {
	Name     string `json:"name"`
	State    string `json:"state"` // confirmed | pending
	Evidence string `json:"evidence"`
}

// Completion is the one carrier every executor reports with (the handoff
// queue's message body). Rewrites carry Coverage; deleting tasks carry Cleanup.
type Completion struct {
	SchemaVersion        int      `json:"schema_version"`
	TaskID               string   `json:"task_id"`
	Kind                 TaskKind `json:"task_kind"`
	Collection           string   `json:"collection"`
	Incarnation          uint64   `json:"incarnation,omitempty"`
	BaseManifestVersion  uint64   `json:"base_manifest_version"`
	BaseManifestChecksum string   `json:"base_manifest_checksum"`
	CCSFactsVersion      uint64   `json:"ccs_facts_version"`
	// CCSFactsDigest is FactsDigest of the facts the task ran under (the
	// facts its kind depends on, at CCSFactsVersion). The handoff hands the
	// result off only while current CCS facts have the same digest; a
	// completion without one is judged by CCSFactsVersion alone.
	CCSFactsDigest string `json:"ccs_facts_digest,omitempty"`
	// SweepUnixMs is the task's sweep time (Task.SweepUnixMs; absent for a
	// task whose identity is its head alone). With the fields above it
	// makes a rewrite's task identity derivable from the completion alone
	// (CompletionTaskID), which the handoff requires of every rewrite.
	SweepUnixMs      int64     `json:"sweep_unix_ms,omitempty"`
	LeaseEpoch       uint64    `json:"lease_epoch"`
	Outcome          string    `json:"outcome"`
	Reason           string    `json:"reason,omitempty"`
	StartedAtUnixMs  int64     `json:"started_at_unix_ms"`
	FinishedAtUnixMs int64     `json:"finished_at_unix_ms"`
	BytesRead        int64     `json:"bytes_read"`
	BytesWritten     int64     `json:"bytes_written"`
	Coverage         *Coverage `json:"coverage,omitempty"`
	Cleanup          *Cleanup  `json:"cleanup,omitempty"`
}

func (c *Completion) validate() error {
	if err := checkSchema(c.SchemaVersion); err != nil {
		return err
	}
	switch {
	case !c.Kind.valid():
		return invalid("task_kind %q is unknown", c.Kind)
	case !ValidCollection(c.Collection):
		return invalid("collection %q is not a valid collection name", c.Collection)
	case c.TaskID == "":
		return invalid("task_id is empty")
	case len(c.TaskID) > MaxTaskIDLength:
		return checkTaskIDLength(c.TaskID)
	case c.Outcome != OutcomeSucceeded && c.Outcome != OutcomeStale && c.Outcome != OutcomeFailed:
		return invalid("outcome %q is not succeeded|stale|failed", c.Outcome)
	case c.Outcome == OutcomeSucceeded && c.Kind.Rewrites() && c.Coverage == nil:
		return invalid("a succeeded rewrite must carry coverage")
	case c.CCSFactsDigest != "" && !validFactsDigest(c.CCSFactsDigest):
		return invalid("ccs_facts_digest %q is not facts-<32 hex>", c.CCSFactsDigest)
	}
	if c.Coverage != nil {
		for i := range c.Coverage.Added {
			if err := c.Coverage.Added[i].check(c.Collection); err != nil {
				return err
			}
		}
		for i := range c.Coverage.Removed {
			if err := c.Coverage.Removed[i].check(c.Collection); err != nil {
				return err
			}
		}
	}
	return nil
}

// CompletionTaskID is the identity of the task a rewrite completion says
// it reports: the identity of its kind, collection, incarnation, base
// manifest, facts version and sweep time, as the observer derived it
// (Task.In). A rewrite whose task_id is anything else names no task the
// coordinator issued for that base.
func CompletionTaskID(c Completion) string {
	return sweepTaskID(c.Kind, c.Collection, c.Incarnation, c.BaseManifestVersion, c.BaseManifestChecksum, c.CCSFactsVersion, c.SweepUnixMs)
}

// DecodeCompletion strictly decodes a completion message body.
func DecodeCompletion(where string, b []byte) (Completion, error) {
	var c Completion
	err := Decode("completion", where, b, &c)
	return c, err
}

// CutoverRequest asks the Manifest Publisher to replace Removed by Added in
// the collection's object set, only if the head is still BaseVersion with
// BaseChecksum. RequestID is deterministic so the publisher (and a handoff
// resolving an ambiguous outcome) can recognise a request it already applied.
//
// NotAfterUnixMs is the deadline of the request: the publisher must not
// make it visible (CAS the head) once its clock is past it, and answers
// "expired" instead. It is the rewrite task's start plus the configured
// cutover deadline, so the coordinator knows, from an output's write time
// alone, when no publisher can commit it any more: only then (plus the
// clock-skew allowance) is a never-committed output reclaimed.
type CutoverRequest struct {
	SchemaVersion  int           `json:"schema_version"`
	RequestID      string        `json:"request_id"`
	Collection     string        `json:"collection"`
	BaseVersion    uint64        `json:"base_version"`
	BaseChecksum   string        `json:"base_checksum"`
	NotAfterUnixMs int64         `json:"not_after_unix_ms"`
	Removed        []ObjectEntry `json:"removed"`
	Added          []ObjectEntry `json:"added"`
	// CCSFacts are the CCS facts the coordinator judged the cutover under
	// (absent: the caller asks for no facts check). The publisher re-reads
	// the collection's CCS facts right before its head CAS and answers
	// stale_facts, applying nothing, when they changed what the task kind
	// depends on: the facts change between the coordinator's check and
	// the head swap (or while a queued request waits) is closed by the
	// owner, at the moment of effect.
	CCSFacts *FactsFence `json:"ccs_facts,omitempty"`
	// Incarnation is the lifetime of the collection the base belongs to
	// (absent: 1).
	Incarnation uint64 `json:"incarnation,omitempty"`
	// ConflictCheck asks the publisher, when the head moved past the base,
	// to apply the request on the current head if its conflict check of
	// that version proves it conflict-free there (ConflictCheckV1; events/
	// PUBLISHER.md "Conflict-checked cutover"). Absent: a moved head is a
	// conflict. The coordinator never rebases: the request stays pinned to
	// its base and names its exact coverage; only the owner, at its head
	// CAS, decides that the rewrite still holds on a newer head.
	ConflictCheck string `json:"conflict_check,omitempty"`
}

// ConflictCheckV1 is the conflict check of a cutover on a head that moved
// past its base (events/PUBLISHER.md): same lifetime and the base in the
// head's lineage, every removed input in the head with its checksum, no
// commit since the base adding records over the inputs' keys that are not
// ordered after them (deletes among them: rule 7), and the CCS facts the
// request carries still holding at the head CAS.
const ConflictCheckV1 = "v1"

// Clauses of ConflictCheckV1 a refusal names (CutoverAnswer.ConflictClause).
const (
	ClauseIncarnation     = "incarnation"       // another lifetime, or the base is not in the head's lineage
	ClauseInputGone       = "input_gone"        // a removed input is no longer in the head
	ClauseChecksumChanged = "checksum_changed"  // a removed input is in the head with another entry
	ClauseDeleteSinceBase = "delete_since_base" // a commit since the base added records over an input's keys not ordered after the inputs
	ClauseUnproven        = "unproven"          // the versions since the base could not all be read
)

// Inc is the lifetime the request's base belongs to.
func (r CutoverRequest) Inc() uint64 { return Lifetime(r.Incarnation) }

// FactsFence is the CCS facts a result was judged under: the facts
// version the coordinator read, the task kind and the digest of the facts
// that kind depends on (FactsDigest; absent: any change of facts_version
// counts). Facts still at FactsVersion, or whose digest for TaskKind is
// still Digest, are unchanged for the result.
type FactsFence struct {
	TaskKind     TaskKind `json:"task_kind"`
	FactsVersion uint64   `json:"facts_version"`
	Digest       string   `json:"digest,omitempty"`
}

// Changed says why facts f no longer hold for the fence ("" when they do).
func (ff FactsFence) Changed(f CollectionFacts) string {
	switch {
	case f.FactsVersion == ff.FactsVersion:
		return ""
	case ff.Digest == "":
		return fmt.Sprintf("CCS facts are v%d, the cutover was judged under v%d (no digest: any change counts)", f.FactsVersion, ff.FactsVersion)
	case FactsDigest(ff.TaskKind, f) != ff.Digest:
		return fmt.Sprintf("CCS facts v%d changed what %s depends on since v%d: now %s", f.FactsVersion, ff.TaskKind, ff.FactsVersion, DescribeFacts(ff.TaskKind, f))
	}
	return ""
}

func (r *CutoverRequest) validate() error {
	if err := checkSchema(r.SchemaVersion); err != nil {
		return err
	}
	switch {
	case r.RequestID == "":
		return invalid("request_id is empty")
	case !ValidCollection(r.Collection):
		return invalid("collection %q is not a valid collection name", r.Collection)
	case r.BaseVersion == 0 || !validChecksum(r.BaseChecksum):
		return invalid("base_version/base_checksum missing")
	case r.NotAfterUnixMs <= 0:
		return invalid("not_after_unix_ms missing: every cutover request carries its deadline")
	case len(r.Removed) == 0:
		return invalid("a cutover must remove at least one object")
	case r.CCSFacts != nil && !r.CCSFacts.TaskKind.Rewrites():
		return invalid("ccs_facts.task_kind %q is not a rewrite kind", r.CCSFacts.TaskKind)
	case r.CCSFacts != nil && r.CCSFacts.Digest != "" && !validFactsDigest(r.CCSFacts.Digest):
		return invalid("ccs_facts.digest %q is not facts-<32 hex>", r.CCSFacts.Digest)
	case r.ConflictCheck != "" && r.ConflictCheck != ConflictCheckV1:
		return invalid("conflict_check %q is not %q", r.ConflictCheck, ConflictCheckV1)
	}
	return nil
}

// DecodeCutoverRequest strictly decodes a cutover request.
func DecodeCutoverRequest(where string, b []byte) (CutoverRequest, error) {
	var r CutoverRequest
	err := Decode("cutover request", where, b, &r)
	return r, err
}

// CutoverRequestID is the identity of a cutover: the task and its exact coverage.
func CutoverRequestID(taskID string, cov Coverage) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s", taskID)
	for _, o := range cov.Removed {
		fmt.Fprintf(h, "|-%s:%s", o.Key, o.Checksum)
	}
	for _, o := range cov.Added {
		fmt.Fprintf(h, "|+%s:%s", o.Key, o.Checksum)
	}
	return "cutover-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Cutover answer statuses.
const (
	CutoverAccepted = "accepted" // the head now is (or already was) the result
	CutoverConflict = "conflict" // the head moved; nothing was applied
	CutoverRejected = "rejected" // the request is invalid against the base; nothing was applied
	CutoverExpired  = "expired"  // not_after passed before the publisher could apply it; nothing was applied
	// CutoverStaleFacts: the CCS facts the request was judged under
	// (ccs_facts) changed what its task kind depends on before the head
	// CAS; nothing was applied.
	CutoverStaleFacts = "stale_facts"
)

// CutoverAnswer is the publisher's reply.
type CutoverAnswer struct {
	SchemaVersion     int    `json:"schema_version"`
	RequestID         string `json:"request_id"`
	Status            string `json:"status"`
	CommittedVersion  uint64 `json:"committed_version,omitempty"`
	CommittedChecksum string `json:"committed_checksum,omitempty"`
	HeadVersion       uint64 `json:"head_version,omitempty"`
	Reason            string `json:"reason,omitempty"`
	// ConflictCheck is the conflict check the publisher runs on a head that
	// moved past the request's base (ConflictCheckV1): echoed on every
	// answer to a request that asked for it by a publisher with the
	// capability (how the coordinator learns it), always on an acceptance
	// on a newer head and on a refusal by one of its clauses. A "conflict"
	// without it, for a request that asked for the check, comes from a
	// publisher without the capability; an acceptance on a newer head
	// without it is a contract violation (PublisherUncheckedRebase).
	ConflictCheck string `json:"conflict_check,omitempty"`
	// AppliedOnVersion is the version an accepted request was applied on
	// (the committed version's parent): the base, or a newer head the
	// conflict check accepted it on.
	AppliedOnVersion uint64 `json:"applied_on_version,omitempty"`
	// ConflictClause names the clause of the conflict check that refused
	// the request (Clause*), with status conflict.
	ConflictClause string `json:"conflict_clause,omitempty"`
}

func (a *CutoverAnswer) validate() error {
	if err := checkSchema(a.SchemaVersion); err != nil {
		return err
	}
	switch a.Status {
	case CutoverAccepted, CutoverConflict, CutoverRejected, CutoverExpired, CutoverStaleFacts:
	default:
		return invalid("status %q is not accepted|conflict|rejected|expired|stale_facts", a.Status)
	}
	return nil
}

// DecodeCutoverAnswer strictly decodes a cutover answer.
func DecodeCutoverAnswer(where string, b []byte) (CutoverAnswer, error) {
	var a CutoverAnswer
	err := Decode("cutover answer", where, b, &a)
	return a, err
}
