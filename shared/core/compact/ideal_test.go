package compact

import (
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

func idealAppends(n int, size int64) []contract.ObjectEntry {
	out := make([]contract.ObjectEntry, n)
	for i := range out {
		out[i] = contract.ObjectEntry{Key: contract.AppendSegmentKey("c", 1, uint64(i+2), 0), Size: size, Tier: contract.TierHot, Level: 0,
			DocCount: 50, MinSeq: uint64(50*i + 1), MaxSeq: uint64(50*i + 50), MinRecordKey: "doc-000000", MaxRecordKey: "doc-000399", MinTsUnixMs: int64(i), MaxTsUnixMs: int64(i)}
	}
	return out
}

// The ideal replays the policy: every level-0 byte is written once into
// level 1 when merge_factor objects gathered, and the small outputs above
// level 0 are gathered again by the fragmentation rule.
func TestIdealWritesReplaysThePolicy(t *testing.T) {
	p := DefaultPolicy()
	w := IdealWrites(p, nil, idealAppends(4, 100))
	if w[1] != 400 || len(w) != 1 {
		t.Fatalf("4 appends of 100 bytes at merge factor 4: ideal %v, want 400 bytes into level 1", w)
	}
	if w := IdealWrites(p, nil, idealAppends(3, 100)); len(w) != 0 {
		t.Fatalf("3 appends: ideal %v, want nothing written", w)
	}
	// 64 appends: every byte written once into each of levels 1, 2, 3.
	w = IdealWrites(p, nil, idealAppends(64, 1000))
	if w[1] != 64000 || w[2] != 64000 || w[3] != 64000 || len(w) != 3 {
		t.Fatalf("64 appends of 1000 bytes: ideal %v, want 64000 bytes into each of levels 1-3", w)
	}
	// Starting from a settled object set writes only what the appends add.
	if w := IdealWrites(p, idealAppends(4, 100)[:3], idealAppends(4, 100)[3:]); w[1] != 400 {
		t.Fatalf("3 objects then one append: ideal %v, want 400 bytes into level 1", w)
	}
}
