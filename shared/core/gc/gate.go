package gc

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// The delete gate (SYSTEM rule 15): one function, judge, decides whether a
// key may go, for every path that deletes (sweep, retention reclaim,
// never-committed reclaim, regression reclaim, tombstone cleanup of
// objects, manifest keys and control artifacts). It evaluates the whole of
// rule 3 (and 4, 11, 12) for one key at one moment and answers with one
// explanation type, Hold. The paths differ only in what they put to it:
// what the key is (subject) and what the moment's readings are (moment).
// Nothing else in the package decides that a key may go; a key the gate
// admits is then deleted only inside a ProvenBatch (gate_proof.go), sent by
// deleteProven (gate_send.go) after every wait.

// Hold is why the gate keeps a key, and until when: the one explanation of
// "held" a plan, a report, `bcc gc-plan` and the status snapshot show.
type Hold struct {
	Reason    string `json:"reason"`
	DueUnixMs int64  `json:"due_unix_ms,omitempty"` // earliest it may go (math.MaxInt64: not by waiting)
	Detail    string `json:"detail,omitempty"`
}

func (h Hold) String() string {
	s := h.Reason
	if h.DueUnixMs > 0 && h.DueUnixMs != math.MaxInt64 {
		s += fmt.Sprintf(" until %d", h.DueUnixMs)
	}
	if h.Detail != "" {
		s += ": " + h.Detail
	}
	return s
}

// heldUntil is a hold's due time as an operator reads it (UTC, and the
// milliseconds the JSON carries).
func heldUntil(ms int64) string {
	if ms <= 0 || ms == math.MaxInt64 {
		return "no known time"
	}
	return fmt.Sprintf("%s (%d)", time.UnixMilli(ms).UTC().Format(time.RFC3339), ms)
}

// keyKind is what a key put to the gate is.
type keyKind int

const (
	kindObject   keyKind = iota // a committed data object the lineage (or the tombstone) evicted: rule 3
	kindOutput                  // a never-committed output: the coordinator's own only (rules 4, 11)
	kindPart                    // a manifest part or change part
	kindRoot                    // a manifest root
	kindStray                   // a manifest key of a dropped incarnation no walk names (a publisher's lost CAS)
	kindArtifact                // a control artifact CCS names for a dropped incarnation
)

var kindNames = [...]string{"object", "output", "part", "root", "stray manifest", "control artifact"}

func (k keyKind) String() string { return kindNames[k] }

// subject is one key put to the gate, with what the reads established
// about it (lookups are I/O; the gate is pure).
type subject struct {
	kind keyKind
	key  string
	// entry is an object's entry as last evicted: its maximum timestamp
	// is what lifecycle retention is judged by (gate (c)).
	entry contract.ObjectEntry
	// evictTs is when the key left the committed lineage (rule 16: the
	// later of the evicting commit's commit_ts and its root's
	// LastModified; for a tombstone, the later of CCS's tombstoned_at and
	// the coordinator's first sighting). 0: not judged by gate (b).
	evictTs int64
	// pinnedDue: a manifest a continuation token may still open holds the
	// key until then (<= now: none does).
	pinnedDue int64
	// referenced: a root committed since the plan, or one newer than the
	// eviction, references it or names it in its change.
	referenced bool
	needs      int   // parts, roots of a trim step: candidates it (or an older step) alone indexes, not yet confirmed gone (proveManifests)
	owned      bool  // outputs: the key is the coordinator's own output pattern
	writtenAt  int64 // outputs, strays: S3's LastModified
}

// moment is what every gate reads, at one instant: the clock, the
// watermark and the CCS facts (lifecycle, tombstone) of one lifetime.
type moment struct {
	now         int64
	collection  string
	incarnation uint64 // the lifetime the keys must be of (rule 12)
	tombstone   bool   // a dropped incarnation's cleanup: keys of exactly that lifetime
	safe        int64  // global_safe_ts
	blocked     string // non-empty: the watermark could not be read: nothing goes
	retentionMs int64  // lifecycle retention_ms (0: none)
}

// judge is the delete gate: ok is true when key may go at m; otherwise the
// Hold says why not and until when.
func judge(cfg Config, m moment, s subject) (Hold, bool) {
	if h, held := owns(cfg, m, s); held {
		return h, false
	}
	switch s.kind {
	case kindObject:
		return judgeObject(cfg, m, s)
	case kindOutput, kindStray:
		return judgeUncommitted(cfg, m, s)
	case kindPart, kindRoot, kindArtifact:
		return judgeManifest(cfg, m, s)
	}
	return Hold{Reason: ReasonNotOurs, DueUnixMs: math.MaxInt64, Detail: "unknown kind of key"}, false
}

// owns applies rules 11 and 12: the coordinator deletes only what it owns,
// of the lifetime it judges.
func owns(cfg Config, m moment, s subject) (Hold, bool) {
	c := m.collection
	never := func(detail string) (Hold, bool) {
		return Hold{Reason: ReasonNotOurs, DueUnixMs: math.MaxInt64, Detail: detail}, true
	}
	if !strings.HasPrefix(s.key, contract.CollectionPrefix(c)) || s.key == contract.HeadKey(c) {
		return never("not a key of the collection's own, or its head (the publisher's)")
	}
	switch s.kind {
	case kindOutput:
		id, own := contract.OwnedOutputTask(c, s.key)
		if !own && cfg.Guards.OrphanOwnership {
			return never("another writer's upload no manifest names (rule 11)")
		}
		if own && m.tombstone && contract.TaskIncarnation(c, id) != m.incarnation && cfg.Guards.IncarnationFence {
			return never("an output of another lifetime of the name")
		}
	case kindStray:
		if inc, ok := contract.ManifestKeyIncarnation(c, s.key); !ok || inc != m.incarnation {
			return never("not a manifest key of this lifetime")
		}
	case kindArtifact:
		if !strings.HasPrefix(s.key, contract.ControlPrefix(c)) {
			return never("not under the collection's control prefix")
		}
	}
	return Hold{}, false
}

// judgeObject is rule 3 for a committed object: (a) referenced by no
// manifest a token may still open, (b) evicted before global_safe_ts -
// retention_window, (c) past lifecycle retention by its maximum timestamp.
func judgeObject(cfg Config, m moment, s subject) (Hold, bool) {
	switch {
	case !cfg.Guards.DeleteGates:
		return Hold{}, true // mutation proof only
	case s.referenced:
		return Hold{Reason: ReasonPinned, DueUnixMs: satAdd(m.now, cfg.TokenLifetime), Detail: "a root committed since the plan references it"}, false
	case s.pinnedDue > m.now:
		return Hold{Reason: ReasonPinned, DueUnixMs: s.pinnedDue}, false
	}
	if reason, due := judgeTime(cfg, m.blocked != "", s.evictTs, s.entry.MaxTsUnixMs, m.safe, m.retentionMs, m.now); reason != "" {
		return Hold{Reason: reason, DueUnixMs: due}, false
	}
	return Hold{}, true
}

// judgeUncommitted is rule 4 for a key no committed manifest names: a
// never-committed output, a dropped lifetime's stray manifest key. It goes
// only once no commit can still name it, and never while the watermark
// cannot be read (rule 3: an unreadable watermark deletes nothing, of
// every kind of key; a key judged uncommitted may be a committed one the
// reads could not place).
func judgeUncommitted(cfg Config, m moment, s subject) (Hold, bool) {
	if s.referenced {
		return Hold{Reason: ReasonReferenced, DueUnixMs: math.MaxInt64, Detail: "a walked manifest names it: the lineage decides"}, false
	}
	if cfg.Guards.DeleteGates && m.blocked != "" {
		return Hold{Reason: ReasonWatermark, DueUnixMs: m.now + cfg.RetryAfter.Milliseconds(), Detail: m.blocked}, false
	}
	if grace := orphanGrace(cfg).Milliseconds(); cfg.Guards.DeleteGates && m.now-s.writtenAt < grace {
		return Hold{Reason: ReasonYoung, DueUnixMs: satAddMs(s.writtenAt, grace), Detail: "a cutover may still commit it"}, false
	}
	return Hold{}, true
}

// judgeManifest: a manifest key (or a dropped lifetime's control
// artifact) goes when no manifest a token may open needs it, nothing
// newer references it, and the objects only it indexes are gone first
// (guard.ManifestBeforeObjects); a dropped lifetime's keys also wait for
// the tombstone's gates (b). Nothing goes while the watermark cannot be
// read (rule 3).
func judgeManifest(cfg Config, m moment, s subject) (Hold, bool) {
	switch {
	case s.referenced:
		return Hold{Reason: ReasonReferenced, DueUnixMs: math.MaxInt64, Detail: "a newer, retained or protected root references it"}, false
	case !cfg.Guards.DeleteGates:
		return Hold{}, true
	case m.blocked != "":
		return Hold{Reason: ReasonWatermark, DueUnixMs: m.now + cfg.RetryAfter.Milliseconds(), Detail: m.blocked}, false
	case s.pinnedDue > m.now:
		return Hold{Reason: ReasonPinned, DueUnixMs: s.pinnedDue}, false
	case s.needs > 0 && cfg.Guards.ManifestBeforeObjects:
		return Hold{Reason: ReasonIndexes, Detail: fmt.Sprintf("%d objects it alone indexes are not confirmed gone", s.needs)}, false
	}
	if s.evictTs > 0 {
		if reason, due := judgeTime(cfg, m.blocked != "", s.evictTs, math.MinInt64, m.safe, 0, m.now); reason != "" {
			return Hold{Reason: reason, DueUnixMs: due}, false
		}
	}
	return Hold{}, true
}

// judgeTime applies gates (b) and (c); reason "" = eligible. maxTs is the
// object's maximum timestamp (math.MinInt64: none to judge).
func judgeTime(cfg Config, blocked bool, evictTs, maxTs, safe, retentionMs, now int64) (string, int64) {
	if blocked {
		return ReasonWatermark, now + cfg.RetryAfter.Milliseconds()
	}
	// No reader's safe point is ahead of now: a watermark ahead of this
	// function's clock (a query plane's clock ahead, a corrupt or forged
	// watermark) opens no window early (rule 16; guard.WatermarkClockCap).
	if cfg.Guards.WatermarkClockCap && safe > now {
		safe = now
	}
	// (b) evict_commit_ts < global_safe_ts - retention_window.
	if limit := safe - cfg.RetentionWindow.Milliseconds(); evictTs >= limit {
		due := int64(math.MaxInt64)
		if evictTs != math.MaxInt64 {
			due = satAddMs(now, satAddMs(evictTs-limit, 1))
		}
		return ReasonRetentionWindow, due
	}
	// (c) lifecycle retention, by the object's maximum timestamp, on this
	// function's clock less the skew allowance (the clock may run ahead).
	// Written without now - max_ts, which wraps for a far-past max_ts
	// (deferring forever), and with the due time saturating for a
	// far-future one.
	if hold := satAddMs(retentionMs, cfg.ClockSkew.Milliseconds()); retentionMs > 0 && maxTs > now-hold {
		return ReasonLifecycle, satAddMs(maxTs, hold)
	}
	return "", 0
}

// satAddMs is a + b (milliseconds, b >= 0) clamped at math.MaxInt64:
// timestamps come from manifests.
func satAddMs(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// pinnedUntil is when a root superseded at sup stops being openable.
func pinnedUntil(sup int64, cfg Config) int64 {
	return satAdd(sup, cfg.TokenLifetime+cfg.ClockSkew)
}

func satAdd(a int64, d time.Duration) int64 {
	if a > math.MaxInt64-d.Milliseconds() {
		return math.MaxInt64
	}
	return a + d.Milliseconds()
}

// orphanGrace is how old a never-committed output must be before it is
// reclaimed: no task that may still report it is alive (rule 4), and no
// publisher may still apply a cutover naming it. The handoff counts a
// cutover's not_after from the earlier of the task's start and the
// earliest LastModified of the outputs it names (guard
// cutover_from_written), so the largest not_after of a cutover that names
// an output is its LastModified + CutoverDeadline, whatever the completion
// claims (one skew of margin for S3's clock against ours); the publisher
// stops at not_after on its own clock (+ one skew against this worker's).
func orphanGrace(cfg Config) time.Duration {
	g := cfg.MaxTaskLifetime + cfg.ClockSkew
	if cfg.Guards.CutoverDeadline {
		g = max(g, cfg.CutoverDeadline+2*cfg.ClockSkew)
	}
	return g
}

// evictedAt is when a commit evicted what its change removed (rule 16):
// the later of the commit_ts the publisher wrote and the LastModified S3
// gave its root (0: unknown, the commit_ts alone). A publisher's clock, or
// a forged commit_ts, cannot date a commit earlier than its root exists.
func evictedAt(commitTs, rootWritten int64) int64 {
	return max(commitTs, rootWritten)
}

// tombstoneEvict is when a dropped lifetime's objects count as evicted
// (rule 16): the later of what CCS says (tombstoned_at, else the
// reservation horizon) and when the coordinator first saw the tombstone
// (firstSeen; a lost record is seen again later, never earlier), and
// never before the head's own commit (guard.TombstoneSighting). 0: not
// tombstoned.
func tombstoneEvict(cfg Config, f contract.CollectionFacts, firstSeen, headCommit int64) int64 {
	at := f.EvictedAtUnixMs()
	if at <= 0 && !f.Tombstoned {
		return 0
	}
	if !cfg.Guards.TombstoneSighting {
		firstSeen = 0 // mutation proof only: CCS's time (and the head's commit) alone
	}
	return max(at, firstSeen, headCommit)
}
