package contract

import "testing"

// OfLifetime is what a dropped lifetime's cleanup, the handoff and the CCS
// stand-in count as left of it: its manifest keys, its tasks' rewrite
// outputs and its append segments; never another lifetime's, never
// another writer's key.
func TestOfLifetime(t *testing.T) {
	sum := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		key  string
		inc  uint64
		want bool
	}{
		{AppendSegmentKey("c1", 1, 3, 0), 1, true},
		{AppendSegmentKey("c1", 1, 3, 12), 0, true},
		{AppendSegmentKey("c1", 2, 3, 0), 2, true},
		{AppendSegmentKey("c1", 2, 3, 0), 1, false},
		{AppendSegmentKey("c1", 1, 3, 0), 2, false},
		{AppendSegmentKey("c12", 1, 3, 0), 1, false},
		{ManifestKey("c1", 2, 3, sum), 2, true},
		{PartKey("c1", 1, 3, sum), 1, true},
		{RewriteOutputKey("c1", 1, NewTask(KindCompaction, "c1", 3, sum, 1, 0).TaskID, 0), 1, true},
		{DataPrefix("c1") + "l1/import-2026-01-01/0000.seg", 1, false},
		{DataPrefix("c1") + "l0/bulk-load-7.seg", 1, false},
		{DataPrefix("c1") + "l0/00000000000000000003-x.seg", 1, false},
		{HeadKey("c1"), 1, false},
	} {
		if got := OfLifetime("c1", tc.inc, tc.key); got != tc.want {
			t.Errorf("OfLifetime(c1, %d, %s) = %v, want %v", tc.inc, tc.key, got, tc.want)
		}
	}
	if inc, ok := RootKeyIncarnation("c1", ManifestKey("c1", 3, 7, sum)); !ok || inc != 3 {
		t.Errorf("root key: %d %v", inc, ok)
	}
	if _, ok := RootKeyIncarnation("c1", PartKey("c1", 1, 7, sum)); ok {
		t.Error("a part is not a root")
	}
}

func TestRootKeyVersion(t *testing.T) {
	sum := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, inc := range []uint64{0, 1, 2, 17} {
		if v, ok := RootKeyVersion("c1", ManifestKey("c1", inc, 42, sum)); !ok || v != 42 {
			t.Errorf("incarnation %d: %d %v", inc, v, ok)
		}
	}
	if _, ok := RootKeyVersion("c1", PartKey("c1", 1, 42, sum)); ok {
		t.Error("a part has no root version")
	}
}
