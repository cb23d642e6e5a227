package contract

import (
	"strings"
	"testing"
)

// A retention_reclaim task carries the due time of its window; no other
// kind carries one.
func TestRetentionReclaimTaskCarriesItsDueTime(t *testing.T) {
	sum := "sha256:" + strings.Repeat("a", 64)
	ok := NewRetentionReclaimTask("c1", 3, sum, 2, 5_000_000, 6_000_000).In(2)
	b, err := Encode(ok)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTask("m1", b)
	if err != nil || got.DueUnixMs != 5_000_000 || got.Kind != KindRetentionReclaim {
		t.Fatalf("decode %s: %+v %v", b, got, err)
	}
	noDue := ok
	noDue.DueUnixMs = 0
	gcDue := NewSweepTask(KindGC, "c1", 3, sum, 2, 6_000_000)
	gcDue.DueUnixMs = 5
	for name, tk := range map[string]Task{"retention_reclaim without due": noDue, "gc with due": gcDue} {
		b, err := Encode(tk)
		if err == nil {
			_, err = DecodeTask("m2", b)
		}
		if err == nil || !strings.Contains(err.Error(), "due_unix_ms") {
			t.Errorf("%s: %v, want a due_unix_ms error", name, err)
		}
	}
}
