package observe

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// A head whose summary says compaction is due but whose full plan a worker
// found empty (2 hot + 2 warm level-0 objects, merge factor 4) is owed no
// compaction: reconciliation enqueues nothing for it at any later pass,
// and the compaction class is not signalled due (its oldest-due alarm
// would fire for a healthy collection). A new head is judged afresh.
func TestReconcileStopsAtAHeadRecordedIdle(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GCSweepInterval = time.Hour
	const t0 = int64(50_000_000)
	cur := Observed{Collection: "c1", Incarnation: 1, Version: 7, Checksum: "sha256:7", ObservedAtUnixMs: t0,
		Debt: Debt{CompactionDue: true, CompactionDueSinceUnixMs: t0, GCSweptAtUnixMs: t0 + 10*time.Hour.Milliseconds()}}
	res := Result{Outcome: OutcomeDuplicate, Collection: "c1", Incarnation: 1, Version: 7}
	compactions := func(c Observed, nowMs int64) (tasks, signals int) {
		for _, d := range PlanReconcile(cfg, c, res, nowMs) {
			if d.Task.Kind == contract.KindCompaction {
				tasks++
			}
		}
		for _, d := range DueClasses(cfg, c, res, nowMs) {
			if d.Kind == contract.KindCompaction {
				signals++
			}
		}
		return tasks, signals
	}
	if n, s := compactions(cur, t0+1000); n != 1 || s != 1 {
		t.Fatalf("due, not recorded idle: %d tasks, %d signals; want 1 and 1", n, s)
	}
	idle := cur
	idle.CompactionIdleVersion, idle.CompactionIdleChecksum, idle.CompactionIdlePolicy = 7, "sha256:7", cfg.CompactionPolicy
	for pass := int64(0); pass < 10; pass++ {
		if n, s := compactions(idle, t0+pass*time.Hour.Milliseconds()); n != 0 || s != 0 {
			t.Fatalf("pass %d at a head recorded idle: %d compaction tasks, %d signals; want none", pass, n, s)
		}
	}
	// The record names another head (same version number, another
	// checksum, or an older version) or was made under another compaction
	// policy: compaction is owed again.
	for _, other := range []Observed{
		{CompactionIdleVersion: 7, CompactionIdleChecksum: "sha256:other", CompactionIdlePolicy: cfg.CompactionPolicy},
		{CompactionIdleVersion: 6, CompactionIdleChecksum: "sha256:7", CompactionIdlePolicy: cfg.CompactionPolicy},
		{CompactionIdleVersion: 7, CompactionIdleChecksum: "sha256:7", CompactionIdlePolicy: "another-policy"},
	} {
		c := cur
		c.CompactionIdleVersion, c.CompactionIdleChecksum, c.CompactionIdlePolicy = other.CompactionIdleVersion, other.CompactionIdleChecksum, other.CompactionIdlePolicy
		if n, _ := compactions(c, t0+2*time.Hour.Milliseconds()); n != 1 {
			t.Fatalf("idle recorded for v%d %s under policy %q, head v7 sha256:7 under %q: %d compaction tasks, want 1",
				other.CompactionIdleVersion, other.CompactionIdleChecksum, other.CompactionIdlePolicy, cfg.CompactionPolicy, n)
		}
	}
}
