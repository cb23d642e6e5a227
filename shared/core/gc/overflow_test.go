package gc

import (
	"math"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// Timestamps come from manifests: lifecycle retention and the retention
// window judge far-past and far-future values without wrapping (issue 19).
// A far-past max_ts wrapped now - max_ts negative and deferred the object
// forever; a far-future one wrapped its due time into the past.
func TestJudgeTimeDoesNotOverflow(t *testing.T) {
	cfg := DefaultConfig()
	now, safe, retention := int64(1_800_000_000_000), int64(1_799_999_000_000), int64(7*24*3600*1000)
	old := Candidate{Entry: contract.ObjectEntry{MaxTsUnixMs: math.MinInt64 + 1}, EvictTsUnixMs: 1}
	if reason, _ := judgeTime(cfg, false, old.EvictTsUnixMs, old.Entry.MaxTsUnixMs, safe, retention, now); reason != "" {
		t.Fatalf("an object with a far-past max_ts is deferred (%s)", reason)
	}
	future := Candidate{Entry: contract.ObjectEntry{MaxTsUnixMs: math.MaxInt64 - 1000}, EvictTsUnixMs: 1}
	if reason, due := judgeTime(cfg, false, future.EvictTsUnixMs, future.Entry.MaxTsUnixMs, safe, retention, now); reason != ReasonLifecycle || due != math.MaxInt64 {
		t.Fatalf("far-future max_ts: %s due %d, want lifecycle at MaxInt64", reason, due)
	}
	late := Candidate{EvictTsUnixMs: math.MaxInt64 - 1}
	if reason, due := judgeTime(cfg, false, late.EvictTsUnixMs, late.Entry.MaxTsUnixMs, safe, retention, now); reason != ReasonRetentionWindow || due < now {
		t.Fatalf("far-future eviction: %s due %d", reason, due)
	}
}
