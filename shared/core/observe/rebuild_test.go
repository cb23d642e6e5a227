package observe

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// A compaction still owed at an unchanged head whose task was taken (its
// result did not land: a rejected cutover, a dropped result) is derived
// again under a fresh identity CompactionRebuildAfter after the head was
// observed, then at 2x, ... under the sweep interval: one identity per
// step, whatever the number of passes. A task still pending in the queue
// (claims above taken) is never duplicated, and 0 keeps only the
// sweep-interval rebuild.
func TestPlanReconcileRebuildsOwedCompactionWithBackoff(t *testing.T) {
	const t0 = int64(50_000_000)
	base := Observed{Collection: "c1", Incarnation: 1, Version: 7, Checksum: "sha256:7", ObservedAtUnixMs: t0,
		RewriteClaims: 1, RewriteTaken: 1,
		Debt: Debt{CompactionDue: true, CompactionDueSinceUnixMs: t0, GCSweptAtUnixMs: t0 + 10*time.Hour.Milliseconds()}}
	res := Result{Outcome: OutcomeDuplicate, Collection: "c1", Incarnation: 1, Version: 7}
	ids := func(cfg Config, cur Observed) map[string]int64 {
		seen := map[string]int64{}
		for now := t0 + 1000; now < t0+cfg.GCSweepInterval.Milliseconds(); now += time.Minute.Milliseconds() {
			for _, d := range PlanReconcile(cfg, cur, res, now) {
				if d.Task.Kind == contract.KindCompaction {
					if _, ok := seen[d.Task.TaskID]; !ok {
						seen[d.Task.TaskID] = now - t0
					}
				}
			}
		}
		return seen
	}
	cfg := DefaultConfig()
	cfg.GCSweepInterval = time.Hour
	cfg.CompactionRebuildAfter = 15 * time.Minute
	got := ids(cfg, base)
	if len(got) != 3 {
		t.Fatalf("%d compaction identities in a sweep interval (first seen after %v ms), want 3: the head's, at 15 and at 30 min", len(got), got)
	}
	for _, at := range got {
		if at != 1000 && at != (15*time.Minute).Milliseconds()+1000 && at != (30*time.Minute).Milliseconds()+1000 {
			t.Fatalf("identities first seen after %v ms, want at the first pass after 0, 15 and 30 min", got)
		}
	}
	pending := base
	pending.RewriteClaims = 2
	if got := ids(cfg, pending); len(got) != 1 {
		t.Fatalf("a rewrite task still pending: %d identities, want 1 (never duplicated)", len(got))
	}
	off := cfg
	off.CompactionRebuildAfter = 0
	if got := ids(off, base); len(got) != 1 {
		t.Fatalf("rebuild_after 0: %d identities under the sweep interval, want 1", len(got))
	}
}
