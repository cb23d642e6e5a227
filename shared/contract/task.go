package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// TaskKind names a class of background work.
type TaskKind string

// Task kinds. Compaction and lifecycle transitions rewrite objects and hand a
// cutover to the publisher; the others delete and may end in a CCS release.
const (
	KindCompaction          TaskKind = "compaction"
	KindLifecycleTransition TaskKind = "lifecycle_transition"
	KindGC                  TaskKind = "gc"
	KindRetentionReclaim    TaskKind = "retention_reclaim"
	KindTombstoneCleanup    TaskKind = "tombstone_cleanup"
	KindOrphanReclaim       TaskKind = "orphan_reclaim"
)

// Rewrites reports whether a kind produces a cutover candidate.
func (k TaskKind) Rewrites() bool { return k == KindCompaction || k == KindLifecycleTransition }

// Valid reports whether k is a known kind.
func (k TaskKind) Valid() bool { return k.valid() }

func (k TaskKind) valid() bool {
	switch k {
	case KindCompaction, KindLifecycleTransition, KindGC, KindRetentionReclaim, KindTombstoneCleanup, KindOrphanReclaim:
		return true
	}
	return false
}

// Task is the SQS FIFO message body. MessageGroupId is the collection and
// MessageDeduplicationId is TaskID, so a duplicate enqueue within five minutes
// collapses and a collection's tasks run in order without blocking others.
type Task struct {
	SchemaVersion int      `json:"schema_version"`
	TaskID        string   `json:"task_id"`
	Kind          TaskKind `json:"task_kind"`
	Collection    string   `json:"collection"`
	// Incarnation is the lifetime of the collection the task works on
	// (absent: 1). An executor acts only while the head and the CCS facts
	// name the same incarnation (guard.IncarnationFence).
	Incarnation          uint64 `json:"incarnation,omitempty"`
	BaseManifestVersion  uint64 `json:"base_manifest_version"`
	BaseManifestChecksum string `json:"base_manifest_checksum"`
	CCSFactsVersion      uint64 `json:"ccs_facts_version"`
	// CCSFactsDigest is FactsDigest of the facts at CCSFactsVersion for
	// the task's kind (absent: not known when it was enqueued). An
	// executor compares it with current CCS facts before it starts, so
	// work whose facts already changed is dropped early and an unrelated
	// facts change does not drop it; the handoff's check (and the
	// publisher's at its head CAS) stays the authority. Not part of the
	// identity (it is a function of the pinned facts version).
	CCSFactsDigest string `json:"ccs_facts_digest,omitempty"`
	// SweepUnixMs distinguishes repeated sweeps of an unchanged head (GC
	// re-checks deferred debt on every reconciliation); zero for tasks
	// whose identity is the head alone.
	SweepUnixMs int64 `json:"sweep_unix_ms,omitempty"`
	// DueUnixMs is, for a retention_reclaim task, the time the lifecycle
	// retention of the window it reclaims became due (the earliest
	// retention-deferred object's max_ts + retention_ms, as the last sweep
	// judged it). A hint for scheduling and signals only: the GC executor
	// re-judges every gate at execution time, so a task delivered early
	// deletes nothing early. Not part of the identity.
	DueUnixMs        int64 `json:"due_unix_ms,omitempty"`
	EnqueuedAtUnixMs int64 `json:"enqueued_at_unix_ms"`
}

func (t *Task) validate() error {
	if err := checkSchema(t.SchemaVersion); err != nil {
		return err
	}
	switch {
	case !t.Kind.valid():
		return invalid("task_kind %q is unknown", t.Kind)
	case !ValidCollection(t.Collection):
		return invalid("collection %q is not a valid collection name", t.Collection)
	case t.Kind == KindTombstoneCleanup && t.BaseManifestVersion == 0 && t.BaseManifestChecksum == "":
		// A tombstone cleanup that continues after the dropped
		// incarnation's head is gone has no base.
	case t.BaseManifestVersion == 0:
		return invalid("base_manifest_version must be >= 1")
	case !validChecksum(t.BaseManifestChecksum):
		return invalid("base_manifest_checksum %q is not sha256:<64 hex>", t.BaseManifestChecksum)
	}
	if err := checkTaskIDLength(t.TaskID); err != nil {
		return err
	}
	switch {
	case t.Kind == KindLifecycleTransition && t.SweepUnixMs <= 0:
		return invalid("a lifecycle_transition task needs sweep_unix_ms (the time its due objects are judged at)")
	case t.Kind == KindRetentionReclaim && t.DueUnixMs <= 0:
		return invalid("a retention_reclaim task needs due_unix_ms (when the retention of the window it reclaims became due)")
	case t.CCSFactsDigest != "" && !validFactsDigest(t.CCSFactsDigest):
		return invalid("ccs_facts_digest %q is not facts-<32 hex>", t.CCSFactsDigest)
	case t.Kind != KindRetentionReclaim && t.DueUnixMs != 0:
		return invalid("due_unix_ms is only for retention_reclaim tasks (task_kind %q)", t.Kind)
	case t.TaskID != sweepTaskID(t.Kind, t.Collection, t.Inc(), t.BaseManifestVersion, t.BaseManifestChecksum, t.CCSFactsVersion, t.SweepUnixMs):
		return invalid("task_id %q is not the identity of its fields", t.TaskID)
	}
	return nil
}

// DecodeTask strictly decodes a task message body (where: the message id).
func DecodeTask(where string, b []byte) (Task, error) {
	var t Task
	err := Decode("task", where, b, &t)
	return t, err
}

// MaxTaskIDLength bounds every task identity by construction: SQS limits
// MessageDeduplicationId to 128 characters, and the longest id derived from
// a task id (a cleanup completion's CompletionID, "<task id>.partial") adds
// 8. A task id longer than this is refused by DecodeTask and DecodeCompletion.
const MaxTaskIDLength = 128 - len(".partial")

// TaskID is the deterministic identity of a task: equal inputs, equal id.
// It is safe as an S3 key segment and as an SQS deduplication id: it is at
// most MaxTaskIDLength characters for any valid collection name, version
// and incarnation.
//
// A task of incarnation N > 1 carries "i<N>" in its identity (and so in
// the keys of its outputs): no task of one lifetime shares an identity, a
// deduplication id or an output key with a task of another.
//
// Its readable form is <kind>-<collection>-[i<N>-]v<version>-<16 hex>; the
// 16 hex digits are a hash of every field of the identity. Where that form
// would be longer than MaxTaskIDLength (a later lifetime of a long name
// with very large incarnation and version numbers) the collection is left
// out: <kind>-i<N>-v<version>-<16 hex>. Output keys already name the
// collection in their prefix, and the incarnation an output belongs to
// stays readable from its key (TaskIncarnation), which tombstone cleanup
// relies on (rule 12). Which form a (collection, incarnation, version)
// takes is fixed by the length alone, so a key parses one way only.
func TaskID(kind TaskKind, collection string, version uint64, checksum string, factsVersion uint64) string {
	return sweepTaskID(kind, collection, 1, version, checksum, factsVersion, 0)
}

func sweepTaskID(kind TaskKind, collection string, incarnation, version uint64, checksum string, factsVersion uint64, sweep int64) string {
	id := fmt.Sprintf("%s|%s|%d|%s|%d", kind, collection, version, checksum, factsVersion)
	if sweep != 0 {
		id += fmt.Sprintf("|sweep=%d", sweep)
	}
	if Lifetime(incarnation) > 1 {
		id += fmt.Sprintf("|incarnation=%d", incarnation)
	}
	h := sha256.Sum256([]byte(id))
	return readableTaskID(kind, collection, incarnation, version, hex.EncodeToString(h[:8]))
}

// readableTaskID is the readable form of a task identity whose hash is sum
// (see TaskID): the full form when it fits MaxTaskIDLength, else the form
// without the collection.
func readableTaskID(kind TaskKind, collection string, incarnation, version uint64, sum string) string {
	k := strings.ReplaceAll(string(kind), "_", "")
	tail := fmt.Sprintf("%sv%d-%s", IncarnationTag(incarnation), version, sum)
	if longTaskID(kind, collection, incarnation, version) {
		return k + "-" + tail
	}
	return k + "-" + collection + "-" + tail
}

// longTaskID reports whether the full readable form of a task identity of
// these fields would exceed MaxTaskIDLength (and so leaves the collection
// out).
func longTaskID(kind TaskKind, collection string, incarnation, version uint64) bool {
	n := len(strings.ReplaceAll(string(kind), "_", "")) + 1 + len(collection) + 1 +
		len(IncarnationTag(incarnation)) + len(fmt.Sprintf("v%d-", version)) + 16
	return n > MaxTaskIDLength
}

// checkTaskIDLength refuses an identity longer than MaxTaskIDLength with
// the limit named (no task or completion of this build carries one).
func checkTaskIDLength(id string) error {
	if len(id) > MaxTaskIDLength {
		return invalid("task_id is %d characters; the limit is %d (SQS deduplication ids are at most 128, and %q is appended to a cleanup's completion id)", len(id), MaxTaskIDLength, ".partial")
	}
	return nil
}

// WithFacts returns the task carrying the digest of f for its kind when f
// are the facts it pins (same collection, incarnation and facts version);
// otherwise the task unchanged.
func (t Task) WithFacts(f CollectionFacts) Task {
	if f.Collection == t.Collection && f.Inc() == t.Inc() && f.FactsVersion == t.CCSFactsVersion {
		t.CCSFactsDigest = FactsDigest(t.Kind, f)
	}
	return t
}

// In returns the task for incarnation (its identity recomputed).
func (t Task) In(incarnation uint64) Task {
	t.Incarnation = incarnation
	if Lifetime(incarnation) == 1 {
		t.Incarnation = 0 // the first lifetime is written as absent
	}
	t.TaskID = sweepTaskID(t.Kind, t.Collection, t.Incarnation, t.BaseManifestVersion, t.BaseManifestChecksum, t.CCSFactsVersion, t.SweepUnixMs)
	return t
}

// NewSweepTask builds a task that repeats for an unchanged head: its
// identity includes the sweep time, truncated to a minute so that
// reconciliations racing within one minute still collapse.
//
// A lifecycle_transition task is always a sweep task: its sweep time is the
// time its due objects are judged at (cutoff = sweep - transition_after_ms),
// so every attempt of one identity selects the same objects and rewrites
// them under the same output keys.
func NewSweepTask(kind TaskKind, collection string, version uint64, checksum string, factsVersion uint64, nowMs int64) Task {
	t := NewTask(kind, collection, version, checksum, factsVersion, nowMs)
	t.SweepUnixMs = SweepMinute(nowMs)
	t.TaskID = sweepTaskID(kind, collection, 1, version, checksum, factsVersion, t.SweepUnixMs)
	return t
}

// NewRetentionReclaimTask builds the retention_reclaim sweep of one
// collection's head whose lifecycle retention window became due at dueMs
// (its identity is the sweep minute's, like every sweep task's: racing
// reconciliations within one minute collapse).
func NewRetentionReclaimTask(collection string, version uint64, checksum string, factsVersion uint64, dueMs, nowMs int64) Task {
	t := NewSweepTask(KindRetentionReclaim, collection, version, checksum, factsVersion, nowMs)
	t.DueUnixMs = dueMs
	return t
}

// NewContinuationTask is the next slice of a sweep task (gc,
// retention_reclaim) that stopped at its bound with eligible work left:
// the same kind, collection, incarnation, base and facts, a sweep time of
// nowMs to the millisecond (a fresh identity, never deduplicated against
// the sweep it continues, which carries a whole minute), enqueued at the
// tail of the queue behind every collection already waiting.
func NewContinuationTask(t Task, nowMs int64) Task {
	sweep := nowMs
	if sweep == t.SweepUnixMs || sweep%60000 == 0 {
		sweep++ // never a minute's identity, never the task it continues
	}
	c := Task{SchemaVersion: SchemaVersion, Kind: t.Kind, Collection: t.Collection, Incarnation: t.Incarnation,
		BaseManifestVersion: t.BaseManifestVersion, BaseManifestChecksum: t.BaseManifestChecksum, CCSFactsVersion: t.CCSFactsVersion,
		SweepUnixMs: sweep, DueUnixMs: t.DueUnixMs, EnqueuedAtUnixMs: nowMs}
	c.TaskID = sweepTaskID(c.Kind, c.Collection, c.Incarnation, c.BaseManifestVersion, c.BaseManifestChecksum, c.CCSFactsVersion, c.SweepUnixMs)
	return c
}

// EnqueuedAt is t as enqueued at nowMs by a writer taking its time from
// its own clock (rule 16), whatever time t was planned at: its
// enqueued_at_unix_ms is nowMs and a sweep task's sweep time (part of its
// identity, and a lifecycle transition's cutoff: sweep -
// transition_after_ms) is nowMs's minute, its identity recomputed. A task
// whose identity is its head alone keeps its identity.
func (t Task) EnqueuedAt(nowMs int64) Task {
	t.EnqueuedAtUnixMs = nowMs
	if t.SweepUnixMs != 0 {
		t.SweepUnixMs = SweepMinute(nowMs)
		t.TaskID = sweepTaskID(t.Kind, t.Collection, t.Inc(), t.BaseManifestVersion, t.BaseManifestChecksum, t.CCSFactsVersion, t.SweepUnixMs)
	}
	return t
}

// SweepMinute truncates nowMs to the minute: the sweep time of a sweep task.
func SweepMinute(nowMs int64) int64 { return nowMs - nowMs%60000 }

// NewTask builds a task with its identity filled in.
func NewTask(kind TaskKind, collection string, version uint64, checksum string, factsVersion uint64, nowMs int64) Task {
	return Task{
		SchemaVersion: SchemaVersion, TaskID: TaskID(kind, collection, version, checksum, factsVersion),
		Kind: kind, Collection: collection, BaseManifestVersion: version, BaseManifestChecksum: checksum,
		CCSFactsVersion: factsVersion, EnqueuedAtUnixMs: nowMs,
	}
}

// Lease is the coordinator's record that one holder works on one task. It is
// a DynamoDB item written only by conditional writes. It avoids duplicate work;
// it is never what keeps data safe (the owners' fences are).
type Lease struct {
	TaskID               string   `json:"task_id"`
	Kind                 TaskKind `json:"task_kind"`
	Collection           string   `json:"collection"`
	Incarnation          uint64   `json:"incarnation,omitempty"`
	BaseManifestVersion  uint64   `json:"base_manifest_version"`
	BaseManifestChecksum string   `json:"base_manifest_checksum"`
	LeaseEpoch           uint64   `json:"lease_epoch"`
	LeaseExpiryUnixMs    int64    `json:"lease_expiry_unix_ms"`
	Holder               string   `json:"holder"`
	AcquiredAtUnixMs     int64    `json:"acquired_at_unix_ms"`
	// HeartbeatAtUnixMs is when the holder last wrote the lease (its
	// acquisition or its latest heartbeat, on the holder's clock) and
	// HeartbeatMs the interval it heartbeats at: the record says how
	// overdue its holder is, so no reader judges it by a lease duration
	// or a heartbeat interval of its own (an input, rule 16). Both belong
	// to the current acquisition only when HeartbeatAtUnixMs is not
	// before AcquiredAtUnixMs (a writer that does not know them leaves a
	// previous holder's behind); absent or stale, nobody may call the
	// holder overdue before the lease expires (lease.Classify).
	HeartbeatAtUnixMs int64 `json:"heartbeat_at_unix_ms,omitempty"`
	HeartbeatMs       int64 `json:"heartbeat_interval_ms,omitempty"`
}

// Heartbeat is the holder's own account of its heartbeats: when it last
// wrote the lease and how often it does. ok is false when the record does
// not carry one for its current acquisition (written by a holder that
// records none, or left behind by an earlier holder).
func (l Lease) Heartbeat() (at time.Time, every time.Duration, ok bool) {
	if l.HeartbeatAtUnixMs <= 0 || l.HeartbeatMs <= 0 || l.HeartbeatAtUnixMs < l.AcquiredAtUnixMs {
		return time.Time{}, 0, false
	}
	return time.UnixMilli(l.HeartbeatAtUnixMs), time.Duration(l.HeartbeatMs) * time.Millisecond, true
}
