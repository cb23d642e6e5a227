package gc

import (
	"slices"

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

// decide puts one candidate to the gate (judge): (a) referenced by no
// manifest a token may still open, (b) evicted before global_safe_ts -
// retention_window, (c) past lifecycle retention by its maximum
// timestamp. A candidate a newer walked root holds is not the lineage's
// debt (a later event decides).
func decide(cd Candidate, r refs, fr *frame, cfg Config) verdict {
	if r.newer {
		return verdict{skip: true}
	}
	s := cd.subject()
	s.pinnedDue = r.pinnedDue
	if h, ok := judge(cfg, fr.moment, s); !ok {
		return verdict{reason: h.Reason, due: h.DueUnixMs}
	}
	return verdict{}
}

// proposal is what GC makes of one key a listing proposed under data/.
type proposal int

const (
	proposalCommitted proposal = iota // a walked manifest knows it: the lineage decides
	proposalForeign                   // another writer's upload: never deleted (rule 11)
	proposalYoung                     // the coordinator's, inside the reclaim grace
	proposalOrphan                    // the coordinator's never-committed output past the grace (rule 4)
)

// propose classifies a listed key by the gate: known (a walked root
// references it or names it in its change) is the lineage's to decide;
// otherwise the gate judges it as a never-committed output (rules 4, 11).
func propose(cfg Config, m moment, key string, known bool, writtenAt int64) proposal {
	if known {
		return proposalCommitted
	}
	_, owned := contract.OwnedOutputTask(m.collection, key)
	h, ok := judge(cfg, m, subject{kind: kindOutput, key: key, owned: owned, writtenAt: writtenAt})
	switch {
	case ok:
		return proposalOrphan
	case h.Reason == ReasonYoung:
		return proposalYoung
	}
	return proposalForeign
}

// planTrim plans root deletions oldest first (doc.go): a root may go only
// when no token can open it, it is not the head, and none of the
// candidates it alone indexes or references (evicted by it or by its
// child) is held back. Its parts go first, those no newer root references.
//
// Parts a protected root above the head references (protect) are never
// deleted: after a regression the new lineage can write a part under the
// very key an abandoned version wrote. A root with such a part is not
// trimmed while the protection lasts (its part would be left behind).
func planTrim(roots []contract.Manifest, retained []bool, held map[uint64]bool, deletes []Candidate, protect []contract.Manifest) []TrimStep {
	n := len(roots)
	refs := map[string]int{} // part key -> newer (or protected) roots referencing it
	for i := 0; i < n-1; i++ {
		for _, pr := range roots[i].Parts {
			refs[pr.Key]++
		}
	}
	protected := map[string]bool{}
	for i := range protect {
		for _, pr := range protect[i].Parts {
			refs[pr.Key]++
			protected[pr.Key] = true
		}
	}
	needs := map[uint64]int{}
	for _, cd := range deletes {
		needs[cd.EvictVersion]++
	}
	steps := []TrimStep{}
	for i := n - 1; i >= 1; i-- {
		v, child := roots[i].Version, roots[i-1].Version
		if retained[i] || held[v] || held[child] || slices.ContainsFunc(roots[i].Parts, func(pr contract.PartRef) bool { return protected[pr.Key] }) {
			// A part a protected root (above the head, or abandoned and
			// passed by the new lineage) references would outlive this
			// root: no later trim step would ever delete it. The root
			// waits until that protection ends.
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
