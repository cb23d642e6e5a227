package gc

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Candidate is an object that left the committed object set: its entry as
// last evicted and the eviction that counts (the newest).
type Candidate struct {
	Entry         contract.ObjectEntry `json:"entry"`
	EvictVersion  uint64               `json:"evict_version"` // 0: evicted by the tombstone, or named by an abandoned root of a confirmed regression (abandonedIndex)
	EvictTsUnixMs int64                `json:"evict_ts_unix_ms"`
}

// Deferred is a candidate that may not be deleted yet.
type Deferred struct {
	Key          string `json:"key"`
	Reason       string `json:"reason"`
	DueUnixMs    int64  `json:"due_unix_ms"` // earliest time it may become deletable (estimate)
	EvictVersion uint64 `json:"evict_version"`
	Bytes        int64  `json:"bytes"`
}

// TrimStep deletes one manifest root: first its parts that no newer root
// references, then the root. It may start only when every candidate the
// root alone indexes or alone references (those evicted by Version or by
// its child, NeedsVersions) is confirmed gone in the same run.
type TrimStep struct {
	Version       uint64   `json:"version"`
	RootKey       string   `json:"root_key"`
	Parts         []string `json:"parts"`
	NeedsVersions []uint64 `json:"needs_versions"`
	Needs         int      `json:"needs"` // candidates still to be confirmed gone first
}

// Orphan is a never-committed output of the coordinator's own (rule 4).
type Orphan struct {
	Key                string `json:"key"`
	LastModifiedUnixMs int64  `json:"last_modified_unix_ms"`
}

// maxListedDeferred bounds the deferred candidates a plan lists one by one
// (the counts are always complete).
const maxListedDeferred = 1000

// Plan is what one sweep of a collection would do, computed with reads
// only. Apply re-checks every decision at execution time.
type Plan struct {
	Collection           string   `json:"collection"`
	Incarnation          uint64   `json:"incarnation"` // the head's
	NowUnixMs            int64    `json:"now_unix_ms"`
	Tombstoned           bool     `json:"tombstoned"`
	FactsVersion         uint64   `json:"facts_version"`
	LifecycleRetentionMs int64    `json:"lifecycle_retention_ms"`
	TombstoneEvictTs     int64    `json:"tombstone_evict_ts_unix_ms,omitempty"`
	HeadVersion          uint64   `json:"head_version"`
	HeadChecksum         string   `json:"head_checksum"`
	HeadRootKey          string   `json:"head_root_key"`
	Roots                int      `json:"roots"`          // existing roots in the lineage
	OldestVersion        uint64   `json:"oldest_version"` // oldest existing root
	LineageComplete      bool     `json:"lineage_complete"`
	Retained             []uint64 `json:"retained"` // versions a token may still open
	// RootsAbove are the keys of roots that exist above the head (a
	// publisher's uncommitted root, or the abandoned versions of a head
	// regression); HighestObserved is the highest head version the
	// coordinator remembers; LineageConfirmed: an operator confirmed a
	// regression (their references stay protected for a token lifetime).
	RootsAbove []string `json:"roots_above_head,omitempty"`
	// UnverifiedFromVersion is the recorded head the observer advanced
	// from over a gap, not yet found in the walked lineage (0: none).
	UnverifiedFromVersion   uint64 `json:"unverified_from_version,omitempty"`
	UnverifiedFromChecksum  string `json:"unverified_from_checksum,omitempty"`
	unverifiedHeld          bool   // the walked lineage holds it
	HighestObserved         uint64 `json:"highest_observed,omitempty"`
	HighestObservedChecksum string `json:"highest_observed_checksum,omitempty"`
	LineageConfirmed        bool   `json:"lineage_confirmed,omitempty"`
	// Confirmation is the operator's confirmation GC judged by (of the
	// head's incarnation; nil: none).
	Confirmation       *contract.LineageConfirmation `json:"lineage_confirmation,omitempty"`
	GlobalSafeTsUnixMs int64                         `json:"global_safe_ts_unix_ms"`
	Blocked            string                        `json:"blocked,omitempty"` // non-empty: nothing is deleted
	// Delete are the candidates eligible now that still exist (as far as
	// the listing shows); AlreadyGone counts eligible ones already deleted.
	Delete      []Candidate `json:"delete"`
	AlreadyGone int         `json:"already_gone"`
	// Truncated: more eligible candidates than one sweep holds; the rest
	// are found by the next sweep.
	Truncated bool `json:"truncated,omitempty"`
	// Beyond counts the eligible candidates a truncated plan judged and
	// left to the next sweep (a lower bound of what is left: streaming
	// stopped there). They are recorded as debt due now, so a lost
	// continuation leaves the rest to the next reconciliation, not to the
	// next periodic sweep.
	Beyond            int            `json:"beyond,omitempty"`
	Deferred          []Deferred     `json:"deferred"` // the first maxListedDeferred
	DeferredCount     int            `json:"deferred_count"`
	DeferredBytes     int64          `json:"deferred_bytes"`
	DeferredByReason  map[string]int `json:"deferred_by_reason"`
	DeferredDueUnixMs int64          `json:"deferred_due_unix_ms,omitempty"` // earliest due of any deferred candidate
	// RetentionDeferred counts the candidates held by lifecycle retention
	// alone (gate (c): every other gate passed); RetentionDueUnixMs is the
	// earliest time one of them may go. That window is the
	// retention_reclaim class's work: reconciliation enqueues a
	// retention_reclaim task once it is due (the other deferrals are GC
	// debt, due at gateDueUnixMs).
	RetentionDeferred  int        `json:"retention_deferred,omitempty"`
	RetentionDueUnixMs int64      `json:"retention_due_unix_ms,omitempty"`
	gateDueUnixMs      int64      // earliest due of a candidate deferred by another gate than lifecycle retention
	Trim               []TrimStep `json:"trim"`
	Orphans            []Orphan   `json:"orphans"`
	OrphansYoung       int        `json:"orphans_young"` // the coordinator's, inside the reclaim grace
	OrphanDueUnixMs    int64      `json:"orphan_due_unix_ms,omitempty"`
	// ForeignUncommitted counts keys under data/ that no manifest of the
	// lineage references and that are not the coordinator's outputs:
	// another writer's uploads. They are never deleted (rule 11).
	ForeignUncommitted int    `json:"foreign_uncommitted"`
	ListingError       string `json:"listing_error,omitempty"`
	// CorruptParts are the manifest parts of the walked lineage (or of a
	// root above the head) that fail verification, whether or not this
	// sweep needed them: the collection is refused until they are fixed.
	CorruptParts []CorruptPart `json:"corrupt_parts,omitempty"`
	Remaining    []string      `json:"remaining_dependencies,omitempty"`
	// LifecycleRetention is, for a dropped collection, the release
	// dependency "lifecycle retention passed" as this plan sees it: pending
	// while an object of the lineage is inside its lifecycle retention by
	// its maximum timestamp (whatever else holds it), confirmed when none
	// is (nil: not tombstoned). The cleanup waits for it, and so does the
	// release.
	LifecycleRetention *contract.Dependency `json:"lifecycle_retention_dependency,omitempty"`
	lifecycleDue       int64                // the latest time an object considered leaves its lifecycle retention

	facts       contract.CollectionFacts // the CCS facts read (for the completion's facts digest)
	roots       []contract.Manifest      // for Apply (immutable, verified)
	retainedIdx []bool
	held        map[uint64]bool // evict versions with a candidate deferred or not reached
}

// BlockedWatermark opens Plan.Blocked when the watermark could not be
// read (the error follows): nothing is deleted, and a view of the plan is
// a blind read.
const BlockedWatermark = "watermark unreadable: "

// NextDueUnixMs is the earliest time any deferred debt may become deletable (0: none).
func (p *Plan) NextDueUnixMs() int64 {
	return earliest(p.DeferredDueUnixMs, p.OrphanDueUnixMs)
}

// sweepDueUnixMs is the earliest time deferred debt other than a
// lifecycle retention window may become deletable (0: none).
func (p *Plan) sweepDueUnixMs() int64 {
	return earliest(p.gateDueUnixMs, p.OrphanDueUnixMs)
}

func earliest(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0 || a < b:
		return a
	}
	return b
}

func newPlan(c string, now int64) Plan {
	return Plan{Collection: c, NowUnixMs: now, DeferredByReason: map[string]int{}, Delete: []Candidate{}, Deferred: []Deferred{},
		Trim: []TrimStep{}, Orphans: []Orphan{}, held: map[uint64]bool{}}
}

func (p *Plan) deferCandidate(c Candidate, reason string, due int64) {
	if len(p.Deferred) < maxListedDeferred {
		p.Deferred = append(p.Deferred, Deferred{Key: c.Entry.Key, Reason: reason, DueUnixMs: due, EvictVersion: c.EvictVersion, Bytes: c.Entry.Size})
	}
	p.DeferredCount++
	p.DeferredBytes += c.Entry.Size
	p.DeferredByReason[reason]++
	p.DeferredDueUnixMs = earliest(p.DeferredDueUnixMs, due)
	if reason == ReasonLifecycle {
		p.RetentionDeferred++
		p.RetentionDueUnixMs = earliest(p.RetentionDueUnixMs, due)
	} else {
		p.gateDueUnixMs = earliest(p.gateDueUnixMs, due)
	}
	p.held[c.EvictVersion] = true
}

// PlanSweep computes a plan for collection at now with read-only ports.
func PlanSweep(ctx context.Context, ports ReadPorts, cfg Config, collection string, now time.Time) (Plan, error) {
	cfg = cfg.withDefaults()
	return planner{ports: ports, cfg: cfg, lin: lineageOf(ports, cfg), seen: readSighting(ports, cfg, now), confSeen: readConfirmationSighting(ports, now), retired: true}.plan(ctx, collection, now)
}

type planner struct {
	ports ReadPorts
	cfg   Config
	lin   Lineage
	now   time.Time
	// seen is when the coordinator first saw a tombstone: read-only for a
	// plan (readSighting), recorded by the executor (Executor.sighting).
	seen func(ctx context.Context, f contract.CollectionFacts) (int64, error)
	// confSeen is when the coordinator first saw a lineage confirmation
	// (read-only for a plan, recorded by the executor).
	confSeen func(ctx context.Context, c contract.LineageConfirmation) (int64, error)
	// retired: a plan (never a sweep) of a dropped lifetime whose head was
	// retired walks from its newest listed root (retiredWalk).
	retired bool
}

// readConfirmationSighting reads a recorded first sighting of a lineage
// confirmation; without one it is seen now (later, never earlier).
func readConfirmationSighting(ports ReadPorts, now time.Time) func(context.Context, contract.LineageConfirmation) (int64, error) {
	return func(ctx context.Context, c contract.LineageConfirmation) (int64, error) {
		if ports.Seen == nil {
			return now.UnixMilli(), nil
		}
		at, ok, err := ports.Seen.FirstConfirmationSighting(ctx, c.Collection, c.Inc(), ConfirmationID(c))
		if err != nil || !ok {
			return now.UnixMilli(), err
		}
		return at, nil
	}
}

// readSighting reads a recorded first sighting; without one the
// tombstone is seen now (rule 16: later, never earlier).
func readSighting(ports ReadPorts, cfg Config, now time.Time) func(context.Context, contract.CollectionFacts) (int64, error) {
	return func(ctx context.Context, f contract.CollectionFacts) (int64, error) {
		if ports.Seen == nil {
			return now.UnixMilli(), nil
		}
		at, ok, err := ports.Seen.FirstSighting(ctx, f.Collection, f.Inc(), f.EvictedAtUnixMs(), sightingFacts(cfg, f))
		if err != nil || !ok {
			return now.UnixMilli(), err
		}
		return at, nil
	}
}

// plan is the sweep's read phase followed by its decisions: read facts,
// lineage and watermark; frame the retention and refusals (pure); judge
// every candidate the lineage's changes name; check what a listing of the
// data prefix proposes; plan the manifest trimming (pure).
func (pl planner) plan(ctx context.Context, c string, nowT time.Time) (Plan, error) {
	now := nowT.UnixMilli()
	pl.now = nowT
	p := newPlan(c, now)
	v, err := pl.read(ctx, c)
	if err != nil {
		return p, err
	}
	fr, err := newFrame(v, pl.cfg, now)
	p.describe(v, fr)
	if err != nil {
		return p, err
	}
	if err := pl.readProtected(ctx, &v, &fr); err != nil {
		return p, err
	}
	if err := pl.candidates(ctx, &v, &fr, &p); err != nil {
		return p, p.partFailed(c, err)
	}
	if err := pl.verifyParts(ctx, &v, &fr, &p); err != nil {
		return p, err
	}
	if p.Blocked != "" {
		p.truncate(v.walk.Roots, pl.cfg.MaxSweepCandidates)
		return p, nil // nothing else is deleted either
	}
	if err := pl.scanData(ctx, &v, &fr, &p); err != nil {
		return p, p.partFailed(c, err)
	}
	// What still exists is bounded (candidates already gone never count).
	p.truncate(v.walk.Roots, pl.cfg.MaxSweepCandidates)
	held := p.held
	if !pl.cfg.Guards.ManifestBeforeObjects {
		held = nil // mutation proof only: roots are trimmed whatever their objects' state
	}
	p.Trim = planTrim(v.walk.Roots, fr.retained, held, p.Delete, fr.protectedAbove())
	if p.Tombstoned {
		p.Remaining = []string{contract.HeadKey(c), p.HeadRootKey}
	}
	p.retentionDependency()
	return p, nil
}

// retentionDependency fills LifecycleRetention for a dropped collection.
func (p *Plan) retentionDependency() {
	if !p.Tombstoned {
		return
	}
	d := contract.Dependency{Name: contract.DepLifecycleRetention, State: contract.DependencyConfirmed, Evidence: "no lifecycle retention"}
	switch {
	case p.LifecycleRetentionMs > 0 && p.lifecycleDue > p.NowUnixMs:
		d.State, d.Evidence = contract.DependencyPending, fmt.Sprintf("retention_ms %d: objects of the lineage are held until %s", p.LifecycleRetentionMs, heldUntil(p.lifecycleDue))
	case p.LifecycleRetentionMs > 0:
		d.Evidence = fmt.Sprintf("retention_ms %d passed for every object of the lineage judged", p.LifecycleRetentionMs)
	}
	p.LifecycleRetention = &d
}

// describe copies what the read phase saw into the plan.
func (p *Plan) describe(v view, fr frame) {
	roots := v.walk.Roots
	p.Tombstoned, p.FactsVersion, p.LifecycleRetentionMs = v.facts.Tombstoned, v.facts.FactsVersion, v.facts.Lifecycle.RetentionMs
	p.facts = v.facts
	p.Incarnation = v.walk.Head.Inc()
	p.HeadVersion, p.HeadChecksum, p.HeadRootKey = v.walk.Head.Version, v.walk.Head.ManifestChecksum, v.walk.Head.ManifestKey
	p.Roots, p.LineageComplete = len(roots), v.walk.Complete
	if len(roots) > 0 {
		p.OldestVersion = roots[len(roots)-1].Version
	}
	p.roots, p.retainedIdx = roots, fr.retained
	for i, r := range fr.retained {
		if r {
			p.Retained = append(p.Retained, roots[i].Version)
		}
	}
	p.Blocked, p.TombstoneEvictTs = fr.blocked, fr.tombstoneEvict
	p.RootsAbove = v.aboveKeys
	p.HighestObserved, p.HighestObservedChecksum, p.LineageConfirmed = v.highest, v.highSum, v.conf != nil
	p.Confirmation = v.conf
	p.UnverifiedFromVersion, p.UnverifiedFromChecksum = v.fromV, v.fromSum
	p.unverifiedHeld = v.fromV > 0 && agrees(v, v.fromV, v.fromSum)
	if v.wmErr == nil {
		p.GlobalSafeTsUnixMs = v.safe
	}
}
