package gc

import (
	"math"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// The pure decisions of a sweep: given what the reads established, what
// happens to a candidate, a proposed key, a manifest root. No I/O here.

// refs is what exact lookups in the walked roots say about one candidate.
type refs struct {
	newer     bool  // a root newer than the eviction holds it: a later event decides
	pinnedDue int64 // -1: no retained root holds it; else when the last such root stops being openable
}

// verdict on one candidate: skip it (a newer event decides), delete it
// (reason ""), or defer it with a reason until due.
type verdict struct {
	skip   bool
	reason string
	due    int64
}

// decide applies the delete predicate to one candidate (doc.go):
// (a) referenced by no manifest a token may still open, (b) evicted before
// global_safe_ts - retention_window, (c) past lifecycle retention by its
// maximum timestamp.
func decide(cd Candidate, r refs, fr *frame, cfg Config) verdict {
	switch {
	case r.newer:
		return verdict{skip: true}
	case !fr.gates:
		return verdict{}
	case r.pinnedDue >= 0:
		return verdict{reason: ReasonPinned, due: r.pinnedDue}
	}
	reason, due := judgeTime(cfg, fr.blocked != "", cd, fr.safe, fr.retentionMs, fr.now)
	return verdict{reason: reason, due: due}
}

// judgeTime applies gates (b) and (c); reason "" = eligible.
func judgeTime(cfg Config, blocked bool, cd Candidate, safe, retentionMs, now int64) (string, int64) {
	if blocked {
		return ReasonWatermark, now + cfg.RetryAfter.Milliseconds()
	}
	// (b) evict_commit_ts < global_safe_ts - retention_window.
	if limit := safe - cfg.RetentionWindow.Milliseconds(); cd.EvictTsUnixMs >= limit {
		due := int64(math.MaxInt64)
		if cd.EvictTsUnixMs != math.MaxInt64 {
			due = satAddMs(now, satAddMs(cd.EvictTsUnixMs-limit, 1))
		}
		return ReasonRetentionWindow, due
	}
	// (c) lifecycle retention, by the object's maximum timestamp. Written
	// without now - max_ts, which wraps for a far-past max_ts (deferring
	// forever), and with the due time saturating for a far-future one.
	if retentionMs > 0 && cd.Entry.MaxTsUnixMs > now-retentionMs {
		return ReasonLifecycle, satAddMs(cd.Entry.MaxTsUnixMs, retentionMs)
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

// proposal is what GC makes of one key a listing proposed under data/.
type proposal int

const (
	proposalCommitted proposal = iota // a walked manifest knows it: the lineage decides
	proposalForeign                   // another writer's upload: never deleted (rule 11)
	proposalYoung                     // the coordinator's, inside the reclaim grace
	proposalOrphan                    // the coordinator's never-committed output past the grace (rule 4)
)

// propose classifies a listed key. owned: its key is the coordinator's own
// output pattern (contract.OwnedOutputTask); known: a walked root
// references it or names it in its change.
func propose(owned, known bool, ageMs, graceMs int64, gates bool) proposal {
	switch {
	case known:
		return proposalCommitted
	case !owned:
		return proposalForeign
	case gates && ageMs < graceMs:
		return proposalYoung
	}
	return proposalOrphan
}

// orphanGrace is how old a never-committed output must be before it is
// reclaimed: no task that may still report it is alive (rule 4), and no
// publisher may still apply a cutover naming it. A task writes its outputs
// after it starts, so the largest not_after of a cutover that names an
// output is its write time + CutoverDeadline (+ one skew: the task's clock
// against S3's); the publisher stops at not_after on its own clock (+ one
// skew against this worker's).
func orphanGrace(cfg Config) time.Duration {
	g := cfg.MaxTaskLifetime + cfg.ClockSkew
	if cfg.Guards.CutoverDeadline {
		g = max(g, cfg.CutoverDeadline+2*cfg.ClockSkew)
	}
	return g
}

// planTrim plans root deletions oldest first (doc.go): a root may go only
// when no token can open it, it is not the head, and none of the
// candidates it alone indexes or references (evicted by it or by its
// child) is held back. Its parts go first, those no newer root references.
//
// Parts a protected root above the head references (protect) are never
// deleted: after a regression the new lineage can write a part under the
// very key an abandoned version wrote.
func planTrim(roots []contract.Manifest, retained []bool, held map[uint64]bool, deletes []Candidate, protect []contract.Manifest) []TrimStep {
	n := len(roots)
	refs := map[string]int{} // part key -> newer (or protected) roots referencing it
	for i := 0; i < n-1; i++ {
		for _, pr := range roots[i].Parts {
			refs[pr.Key]++
		}
	}
	for i := range protect {
		for _, pr := range protect[i].Parts {
			refs[pr.Key]++
		}
	}
	needs := map[uint64]int{}
	for _, cd := range deletes {
		needs[cd.EvictVersion]++
	}
	steps := []TrimStep{}
	for i := n - 1; i >= 1; i-- {
		v, child := roots[i].Version, roots[i-1].Version
		if retained[i] || held[v] || held[child] {
			break
		}
		st := TrimStep{Version: v, RootKey: roots[i-1].ParentKey, Parts: []string{}, NeedsVersions: []uint64{v, child}, Needs: needs[v] + needs[child]}
		for _, pr := range roots[i].Parts {
			if refs[pr.Key] == 0 && !slices.Contains(st.Parts, pr.Key) {
				st.Parts = append(st.Parts, pr.Key)
			}
		}
		for _, cp := range roots[i].Change.Parts { // only this version references its change parts
			st.Parts = append(st.Parts, cp.Key)
		}
		steps = append(steps, st)
		for _, pr := range roots[i-1].Parts { // roots[i-1] becomes the oldest next
			refs[pr.Key]--
		}
	}
	return steps
}
