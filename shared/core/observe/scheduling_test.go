package observe

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// The aging rule between the rewrite classes: a due transition goes before
// compaction until compaction has been due without a cutover for
// compaction.max_wait_behind_transition_ms; then the classes take turns of
// that length, compaction first (a collection whose transitions keep coming
// due still gets its compaction; a compaction that never lands does not
// hold the transition back for good).
func TestPlanReconcileAgesCompactionPastADueTransition(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CompactionMaxWait = time.Hour
	now := int64(100_000_000)
	res := Result{Outcome: OutcomeDuplicate, Collection: "c1", Version: 5, Debt: Debt{TransitionDue: true, TransitionDueAtUnixMs: now - 1000}}
	for _, tc := range []struct {
		name  string
		since int64
		want  contract.TaskKind
	}{
		{"due 10 minutes", now - (10 * time.Minute).Milliseconds(), contract.KindLifecycleTransition},
		{"due exactly max_wait", now - time.Hour.Milliseconds(), contract.KindCompaction},
		{"due 1h59m: compaction's turn", now - (119 * time.Minute).Milliseconds(), contract.KindCompaction},
		{"due 2h30m: the transition's turn", now - (150 * time.Minute).Milliseconds(), contract.KindLifecycleTransition},
		{"due 3 hours: compaction's turn again", now - (3 * time.Hour).Milliseconds(), contract.KindCompaction},
	} {
		cur := Observed{Collection: "c1", Version: 5, ObservedAtUnixMs: now - 1000,
			Debt: Debt{CompactionDue: true, CompactionDueSinceUnixMs: tc.since, GCSweptAtUnixMs: now - 1000}}
		var rewrites []contract.TaskKind
		for _, d := range PlanReconcile(cfg, cur, res, now) {
			if d.Task.Kind.Rewrites() {
				rewrites = append(rewrites, d.Task.Kind)
			}
		}
		if len(rewrites) != 1 || rewrites[0] != tc.want {
			t.Errorf("%s: rewrites %v, want exactly %s", tc.name, rewrites, tc.want)
		}
		// Both classes are owed either way: the signals see both.
		due := map[contract.TaskKind]int64{}
		for _, d := range DueClasses(cfg, cur, res, now) {
			due[d.Kind] = d.SinceUnixMs
		}
		if due[contract.KindCompaction] != tc.since || due[contract.KindLifecycleTransition] != now-1000 {
			t.Errorf("%s: due classes %v", tc.name, due)
		}
	}
}
