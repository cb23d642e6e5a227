package gc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// Reasons a candidate is deferred (the GCDeferred metric's Reason dimension).
const (
	ReasonPinned          = "pinned_manifest"     // a manifest a token may still open references it
	ReasonWatermark       = "watermark"           // global_safe_ts cannot be read
	ReasonRetentionWindow = "retention_window"    // evict_commit_ts >= global_safe_ts - retention_window
	ReasonLifecycle       = "lifecycle_retention" // now - max_ts < lifecycle retention_ms
)

// Refusal reasons (the GCRefused metric's Reason dimension).
const (
	RefusedManifest = "manifest" // a head/root/part cannot be opened, verified or understood
	RefusedFacts    = "facts"    // CCS facts cannot be read
	RefusedLineage  = "lineage"  // the head moved in a way no publisher commit explains
)

// ErrRefused marks a definite refusal: GC deleted nothing for the
// collection and says why (unknown field, checksum mismatch, missing
// retained root, unreadable facts).
var ErrRefused = errors.New("gc refused")

// RefusedError carries a refusal's reason.
type RefusedError struct {
	Collection string
	Reason     string
	Err        error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("gc of %s refused (%s): %v", e.Collection, e.Reason, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refuse(c, reason string, err error) error {
	return &RefusedError{Collection: c, Reason: reason, Err: err}
}

// definite reports whether a lineage read error is a definite answer (the
// document is wrong or gone) rather than a transient failure to retry.
func definite(err error) bool {
	return errors.Is(err, contract.ErrUnknownField) || errors.Is(err, contract.ErrInvalid) ||
		errors.Is(err, contract.ErrSchemaVersion) || errors.Is(err, contract.ErrChecksumMismatch) ||
		errors.Is(err, store.ErrNotFound)
}

func lineageErr(c string, err error) error {
	if definite(err) {
		return refuse(c, RefusedManifest, err)
	}
	return fmt.Errorf("gc of %s: %w", c, err)
}

// Candidate is an object that left the committed object set: its entry as
// last evicted and the eviction that counts (the newest).
type Candidate struct {
	Entry         contract.ObjectEntry `json:"entry"`
	EvictVersion  uint64               `json:"evict_version"` // 0: evicted by the tombstone
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
// references, then the root. NeedsGone are the objects that must be
// confirmed gone (in the same run) before the step may start.
type TrimStep struct {
	Version   uint64   `json:"version"`
	RootKey   string   `json:"root_key"`
	Parts     []string `json:"parts"`
	NeedsGone []string `json:"needs_gone"`
}

// Orphan is a never-committed data object (rule 4).
type Orphan struct {
	Key                string `json:"key"`
	LastModifiedUnixMs int64  `json:"last_modified_unix_ms"`
}

// Plan is what one sweep of a collection would do, computed with reads
// only. Apply re-checks every decision at execution time.
type Plan struct {
	Collection           string              `json:"collection"`
	NowUnixMs            int64               `json:"now_unix_ms"`
	Tombstoned           bool                `json:"tombstoned"`
	FactsVersion         uint64              `json:"facts_version"`
	LifecycleRetentionMs int64               `json:"lifecycle_retention_ms"`
	TombstoneEvictTs     int64               `json:"tombstone_evict_ts_unix_ms,omitempty"`
	HeadVersion          uint64              `json:"head_version"`
	HeadChecksum         string              `json:"head_checksum"`
	HeadRootKey          string              `json:"head_root_key"`
	Roots                int                 `json:"roots"`          // existing roots in the lineage
	OldestVersion        uint64              `json:"oldest_version"` // oldest existing root
	LineageComplete      bool                `json:"lineage_complete"`
	Retained             []uint64            `json:"retained"` // versions a token may still open
	GlobalSafeTsUnixMs   int64               `json:"global_safe_ts_unix_ms"`
	Blocked              string              `json:"blocked,omitempty"` // non-empty: nothing is deleted
	Delete               []Candidate         `json:"delete"`
	Deferred             []Deferred          `json:"deferred"`
	DeferredByReason     map[string]int      `json:"deferred_by_reason"`
	Trim                 []TrimStep          `json:"trim"`
	Orphans              []Orphan            `json:"orphans"`
	OrphansYoung         int                 `json:"orphans_young"` // proposed but inside max task lifetime + skew
	OrphanDueUnixMs      int64               `json:"orphan_due_unix_ms,omitempty"`
	ListingError         string              `json:"listing_error,omitempty"`
	Remaining            []string            `json:"remaining_dependencies,omitempty"`
	roots                []contract.Manifest // for Apply (immutable, verified)
	retainedIdx          []bool
}

// NextDueUnixMs is the earliest time any deferred debt may become deletable (0: none).
func (p *Plan) NextDueUnixMs() int64 {
	var due int64
	for _, d := range p.Deferred {
		if due == 0 || d.DueUnixMs < due {
			due = d.DueUnixMs
		}
	}
	if p.OrphanDueUnixMs > 0 && (due == 0 || p.OrphanDueUnixMs < due) {
		due = p.OrphanDueUnixMs
	}
	return due
}

func (p *Plan) defer_(c Candidate, reason string, due int64) {
	p.Deferred = append(p.Deferred, Deferred{Key: c.Entry.Key, Reason: reason, DueUnixMs: due, EvictVersion: c.EvictVersion, Bytes: c.Entry.Size})
	p.DeferredByReason[reason]++
}

// PlanSweep computes a plan for collection at now with read-only ports.
func PlanSweep(ctx context.Context, ports ReadPorts, cfg Config, collection string, now time.Time) (Plan, error) {
	cfg = cfg.withDefaults()
	return planner{ports: ports, cfg: cfg, lin: lineage.New(ports.Objects, cfg.PartCache)}.plan(ctx, collection, now)
}

type planner struct {
	ports ReadPorts
	cfg   Config
	lin   *lineage.Reader
}

// history is what the changes of the walked lineage say about one key.
// Indexes are into the walk's roots (0 = head, larger = older).
type history struct {
	removeIdx int // newest version that removed it (-1: none)
	addIdx    int // newest version that added it (-1: none)
	entry     contract.ObjectEntry
	live      bool // the newest event is an add
}

func satAdd(a int64, d time.Duration) int64 {
	if a > math.MaxInt64-d.Milliseconds() {
		return math.MaxInt64
	}
	return a + d.Milliseconds()
}

func (pl planner) plan(ctx context.Context, c string, nowT time.Time) (Plan, error) {
	cfg := pl.cfg
	gates := cfg.Guards.DeleteGates
	now := nowT.UnixMilli()
	p := Plan{Collection: c, NowUnixMs: now, DeferredByReason: map[string]int{}, Delete: []Candidate{}, Deferred: []Deferred{},
		Trim: []TrimStep{}, Orphans: []Orphan{}}

	// CCS facts: lifecycle retention and tombstone. Fail closed.
	facts, err := pl.ports.Facts.Facts(ctx, c)
	if err != nil {
		if gates {
			return p, refuse(c, RefusedFacts, err)
		}
		facts = contract.CollectionFacts{Collection: c}
	}
	p.Tombstoned, p.FactsVersion, p.LifecycleRetentionMs = facts.Tombstoned, facts.FactsVersion, facts.Lifecycle.RetentionMs

	// The committed lineage from the head: every root verified against the
	// checksum that names it and strictly decoded (unknown field => refuse).
	walk, err := pl.walk(ctx, c, gates)
	if err != nil {
		return p, lineageErr(c, err)
	}
	roots := walk.Roots
	n := len(roots)
	p.roots = roots
	p.HeadVersion, p.HeadChecksum, p.HeadRootKey = walk.Head.Version, walk.Head.ManifestChecksum, walk.Head.ManifestKey
	p.Roots, p.OldestVersion, p.LineageComplete = n, roots[n-1].Version, walk.Complete

	// Supersession times: a root is superseded when its child commits; the
	// head only by a tombstone (at the CCS reservation horizon, see doc.go).
	sup := make([]int64, n)
	sup[0] = math.MaxInt64
	if facts.Tombstoned && facts.ReservationHorizonUnixMs > 0 {
		sup[0] = facts.ReservationHorizonUnixMs
		p.TombstoneEvictTs = facts.ReservationHorizonUnixMs
	}
	for i := 1; i < n; i++ {
		sup[i] = roots[i-1].CommitTsUnixMs
	}
	// A token may open a superseded root for TokenLifetime on the clocks
	// of the query plane and the publisher; judged on this worker's clock,
	// that is TokenLifetime plus the clock-skew allowance.
	retain := (cfg.TokenLifetime + cfg.ClockSkew).Milliseconds()
	p.retainedIdx = make([]bool, n)
	for i := range roots {
		if sup[i] > now-retain {
			p.retainedIdx[i] = true
			p.Retained = append(p.Retained, roots[i].Version)
		}
	}
	if !walk.Complete && gates && roots[n-1].CommitTsUnixMs > now-retain {
		// The missing parent of the oldest root is still inside the token
		// lifetime: a retained manifest is gone. Delete nothing.
		return p, refuse(c, RefusedManifest, fmt.Errorf("retained manifest v%d (parent of v%d) is missing: %w", roots[n-1].ParentVersion, roots[n-1].Version, store.ErrNotFound))
	}

	// The global watermark. Unreadable => delete nothing.
	safe := int64(math.MaxInt64)
	if wm, err := pl.ports.Watermark.Watermark(ctx); err != nil {
		if gates {
			p.Blocked = "watermark unreadable: " + err.Error()
		}
	} else {
		safe = wm.GlobalSafeTsUnixMs
		p.GlobalSafeTsUnixMs = safe
	}

	// Candidates come only from the lineage's changes (never from listing).
	hist := map[string]*history{}
	get := func(k string) *history {
		h, ok := hist[k]
		if !ok {
			h = &history{removeIdx: -1, addIdx: -1}
			hist[k] = h
		}
		return h
	}
	for i := n - 1; i >= 0; i-- { // oldest to newest: the last event wins
		for _, o := range roots[i].Change.Removed {
			h := get(o.Key)
			h.removeIdx, h.entry, h.live = i, o, false
		}
		for _, o := range roots[i].Change.Added { // a version's adds apply after its removes
			h := get(o.Key)
			h.addIdx, h.live = i, true
		}
	}
	var cands []Candidate
	for _, h := range hist {
		if !h.live && h.removeIdx >= 0 {
			r := roots[h.removeIdx]
			cands = append(cands, Candidate{Entry: h.entry, EvictVersion: r.Version, EvictTsUnixMs: r.CommitTsUnixMs})
		}
	}
	if facts.Tombstoned {
		// Everything the head still references was evicted by the tombstone.
		err := pl.lin.Each(ctx, &roots[0], nil, func(o contract.ObjectEntry) error {
			cands = append(cands, Candidate{Entry: o, EvictVersion: 0, EvictTsUnixMs: sup[0]})
			return nil
		})
		if err != nil {
			return p, lineageErr(c, err)
		}
	}
	slices.SortFunc(cands, func(a, b Candidate) int { return cmp.Compare(a.Entry.Key, b.Entry.Key) })

	for _, cd := range cands {
		if !gates {
			p.Delete = append(p.Delete, cd)
			continue
		}
		reason, due, err := pl.judge(ctx, &p, sup, cd, safe, facts, now)
		if err != nil {
			return p, lineageErr(c, err)
		}
		if reason != "" {
			p.defer_(cd, reason, due)
			continue
		}
		p.Delete = append(p.Delete, cd)
	}
	if p.Blocked != "" {
		return p, nil // nothing else is deleted either
	}

	// Manifest trimming, oldest first (see doc.go for the order).
	pl.trim(&p, hist)

	// Never-committed outputs: listing proposes, the lineage decides.
	if err := pl.orphans(ctx, &p, hist, now); err != nil {
		return p, lineageErr(c, err)
	}
	if p.Tombstoned {
		p.Remaining = []string{contract.HeadKey(c), p.HeadRootKey}
	}
	return p, nil
}

// judge applies the delete predicate to one candidate; reason "" = delete.
func (pl planner) judge(ctx context.Context, p *Plan, sup []int64, cd Candidate, safe int64, facts contract.CollectionFacts, now int64) (string, int64, error) {
	cfg := pl.cfg
	// (a) referenced by no manifest a token may still open: exact lookups.
	pinnedDue := int64(-1)
	for i := range p.roots {
		if !p.retainedIdx[i] {
			continue
		}
		_, found, err := pl.lin.Lookup(ctx, &p.roots[i], cd.Entry.Key)
		if err != nil {
			return "", 0, err
		}
		if found {
			pinnedDue = max(pinnedDue, satAdd(sup[i], cfg.TokenLifetime+cfg.ClockSkew))
		}
	}
	if pinnedDue >= 0 {
		return ReasonPinned, pinnedDue, nil
	}
	return judgeTime(cfg, p.Blocked != "", cd, safe, facts.Lifecycle.RetentionMs, now)
}

// judgeTime applies gates (b) and (c).
func judgeTime(cfg Config, blocked bool, cd Candidate, safe, retentionMs, now int64) (string, int64, error) {
	if blocked {
		return ReasonWatermark, now + cfg.RetryAfter.Milliseconds(), nil
	}
	// (b) evict_commit_ts < global_safe_ts - retention_window.
	if limit := safe - cfg.RetentionWindow.Milliseconds(); cd.EvictTsUnixMs >= limit {
		due := int64(math.MaxInt64)
		if cd.EvictTsUnixMs != math.MaxInt64 {
			due = now + (cd.EvictTsUnixMs - limit) + 1
		}
		return ReasonRetentionWindow, due, nil
	}
	// (c) lifecycle retention, by the object's maximum timestamp.
	if retentionMs > 0 && now-cd.Entry.MaxTsUnixMs < retentionMs {
		return ReasonLifecycle, cd.Entry.MaxTsUnixMs + retentionMs, nil
	}
	return "", 0, nil
}

// trim plans root deletions oldest first: a root may go only when no token
// can open it, it is not the head, and every object it alone indexes or
// alone references (its own removals and its child's) is confirmed gone or
// was re-added later.
func (pl planner) trim(p *Plan, hist map[string]*history) {
	roots := p.roots
	n := len(roots)
	refs := map[string]int{} // part key -> newer roots referencing it
	for i := 0; i < n-1; i++ {
		for _, pr := range roots[i].Parts {
			refs[pr.Key]++
		}
	}
	needs := func(i int) []string {
		var out []string
		seen := map[string]bool{}
		for _, o := range roots[i].Change.Removed {
			h := hist[o.Key]
			if seen[o.Key] || h.live || (h.addIdx >= 0 && h.addIdx < i) {
				continue // still live, or re-added later: its later events index it
			}
			seen[o.Key] = true
			out = append(out, o.Key)
		}
		return out
	}
	for i := n - 1; i >= 1; i-- {
		if p.retainedIdx[i] {
			break
		}
		st := TrimStep{Version: roots[i].Version, RootKey: rootKeyOf(roots, i), Parts: []string{}}
		for _, pr := range roots[i].Parts {
			if refs[pr.Key] == 0 && !slices.Contains(st.Parts, pr.Key) {
				st.Parts = append(st.Parts, pr.Key)
			}
		}
		st.NeedsGone = append(needs(i), needs(i-1)...)
		slices.Sort(st.NeedsGone)
		st.NeedsGone = slices.Compact(st.NeedsGone)
		if st.NeedsGone == nil {
			st.NeedsGone = []string{}
		}
		p.Trim = append(p.Trim, st)
		for _, pr := range roots[i-1].Parts { // roots[i-1] becomes the oldest next
			refs[pr.Key]--
		}
	}
}

// rootKeyOf is the key of roots[i], as its child names it.
func rootKeyOf(roots []contract.Manifest, i int) string {
	return roots[i-1].ParentKey
}

// orphans checks every key a listing proposes under the data prefix
// against the committed lineage. A proposed key is a never-committed output
// only if the lineage's changes never mention it (so no existing root can
// reference it: every object of an older root is in the head or removed by
// a newer root of the walk), the head and every retained root do not
// reference it (exact lookups), and it is older than the maximum task
// lifetime plus the clock-skew allowance.
func (pl planner) orphans(ctx context.Context, p *Plan, hist map[string]*history, now int64) error {
	if pl.ports.Lister == nil {
		return nil
	}
	listed, err := pl.ports.Lister.List(ctx, contract.DataPrefix(p.Collection))
	if err != nil {
		p.ListingError = err.Error()
		return nil
	}
	grace := (pl.cfg.MaxTaskLifetime + pl.cfg.ClockSkew).Milliseconds()
	for _, l := range listed {
		if !contract.IsDataKey(p.Collection, l.Key) {
			continue
		}
		if _, known := hist[l.Key]; known {
			continue // committed: the lineage's changes decide
		}
		referenced := false
		for i := range p.roots {
			if i != 0 && !p.retainedIdx[i] {
				continue
			}
			_, found, err := pl.lin.Lookup(ctx, &p.roots[i], l.Key)
			if err != nil {
				return err
			}
			if found {
				referenced = true
				break
			}
		}
		if referenced {
			continue
		}
		lm := l.LastModified.UnixMilli()
		if pl.cfg.Guards.DeleteGates && now-lm < grace {
			p.OrphansYoung++
			if due := lm + grace; p.OrphanDueUnixMs == 0 || due < p.OrphanDueUnixMs {
				p.OrphanDueUnixMs = due
			}
			continue
		}
		p.Orphans = append(p.Orphans, Orphan{Key: l.Key, LastModifiedUnixMs: lm})
	}
	return nil
}

// walk reads the lineage from the head. Strict decoding is the rule; the
// lenient path exists only for the mutation proof with DeleteGates off
// (a reader that ignores fields it does not understand).
func (pl planner) walk(ctx context.Context, c string, strict bool) (lineage.Walk, error) {
	if strict {
		return pl.lin.WalkFrom(ctx, c, 1)
	}
	var w lineage.Walk
	hk := contract.HeadKey(c)
	b, err := pl.ports.Objects.Get(ctx, hk)
	if err != nil {
		return w, err
	}
	if err := json.Unmarshal(b, &w.Head); err != nil {
		return w, err
	}
	key, sum := w.Head.ManifestKey, w.Head.ManifestChecksum
	for key != "" {
		b, err := pl.ports.Objects.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) && len(w.Roots) > 0 {
			return w, nil
		}
		if err != nil {
			return w, err
		}
		if err := contract.VerifyChecksum(key, b, sum); err != nil {
			return w, err
		}
		var m contract.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return w, err
		}
		w.Roots = append(w.Roots, m)
		key, sum = m.ParentKey, m.ParentChecksum
	}
	w.Complete = true
	return w, nil
}
