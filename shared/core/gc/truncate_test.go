package gc

import (
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// A plan cut at its bound keeps the first deletes in stream order (oldest
// root first), counts what it left, and holds every version from the
// first candidate left behind up to the head (and the tombstone): none of
// their roots is trimmed in this sweep; the older, fully judged ones may be.
func TestTruncateKeepsTheOldestAndHoldsTheRest(t *testing.T) {
	roots := []contract.Manifest{{Version: 3}, {Version: 2}, {Version: 1}} // head first
	cd := func(k string, v uint64) Candidate {
		return Candidate{Entry: contract.ObjectEntry{Key: k}, EvictVersion: v}
	}
	for _, tc := range []struct {
		n          int
		keep       int
		held, free []uint64
	}{
		{n: 1, keep: 1, held: []uint64{1, 2, 3, 0}},
		{n: 2, keep: 2, held: []uint64{2, 3, 0}, free: []uint64{1}},
		{n: 4, keep: 4, held: []uint64{0}, free: []uint64{1, 2, 3}},
		{n: 5, keep: 5, free: []uint64{0, 1, 2, 3}}, // within the bound: not truncated
	} {
		p := newPlan("c", 0)
		p.Delete = []Candidate{cd("a", 1), cd("b", 1), cd("c", 2), cd("d", 2), cd("e", 0)}
		p.truncate(roots, tc.n)
		if len(p.Delete) != tc.keep || p.Delete[len(p.Delete)-1].Entry.Key != string(rune('a'+tc.keep-1)) {
			t.Errorf("n=%d: kept %v", tc.n, p.Delete)
		}
		if p.Truncated != (tc.n < 5) || p.Beyond != 5-tc.keep {
			t.Errorf("n=%d: truncated %v beyond %d", tc.n, p.Truncated, p.Beyond)
		}
		for _, v := range tc.held {
			if !p.held[v] {
				t.Errorf("n=%d: v%d not held", tc.n, v)
			}
		}
		for _, v := range tc.free {
			if p.held[v] {
				t.Errorf("n=%d: v%d held", tc.n, v)
			}
		}
	}
}
