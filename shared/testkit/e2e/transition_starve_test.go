package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
)

// Issue 12 item 4: after one transition, parts mix old objects already
// cold with young hot ones. Judged by a part's overall minimum max_ts,
// every new head looks "transition due", each transition moves nothing and
// (a due transition taking precedence) compaction is never scheduled: 13
// level-0 objects with merge factor 4 and no compaction. Judged per tier,
// the young appends are compacted as without a lifecycle policy.
func TestTransitionThatMovesNothingDoesNotStarveCompaction(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	for _, tc := range []struct {
		name      string
		g         guard.Set
		lifecycle contract.Lifecycle
		starved   bool
	}{
		{"no_lifecycle", guard.All(), contract.Lifecycle{}, false},
		{"guarded", guard.All(), toCold, false},
		{"transition_per_tier_off", without(t, "transition_per_tier"), toCold, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newCxClock()
			env := cxStart(t, localenv.Options{Now: clock.Now, Policy: cxPolicy(4)})
			registerObserver(env, tc.g)
			ctx := context.Background()
			if err := env.Workload.Create(ctx, "c1", tc.lifecycle); err != nil {
				t.Fatal(err)
			}
			cxAppend(t, env, "c1", 3) // below the merge factor: nothing to compact
			cxSettle(t, env)
			clock.Advance(2 * time.Hour)
			// One transition (with a lifecycle policy): the three old
			// objects go cold, the new append stays hot, in the same part.
			cxAppend(t, env, "c1", 1)
			cxSettle(t, env)
			moved := cxMetric(env, "LifecycleObjectsMoved")
			compactionsBefore := cxMetric(env, "CompactionsRun")
			for range 12 { // young appends, each observed on its own
				cxAppend(t, env, "c1", 1)
				cxSettle(t, env)
			}
			roots := cxLineage(t, env, "c1")
			l0 := level0(roots[0])
			compactions := cxMetric(env, "CompactionsRun") - compactionsBefore
			transitions := cxMetric(env, "LifecycleTransitions")
			t.Logf("moved %v in the first transition; after 12 young appends: %d level-0 objects, %v compactions, %v transitions run",
				moved, l0, compactions, transitions)
			if tc.lifecycle.TransitionAfterMs > 0 && moved != 3 {
				t.Fatalf("first transition moved %v objects, want 3", moved)
			}
			if tc.starved {
				if compactions != 0 || l0 < 13 {
					t.Fatalf("mutation: want compaction starved (0 compactions, >= 13 level-0), got %v compactions and %d level-0", compactions, l0)
				}
				return
			}
			if compactions == 0 || l0 >= 4+3 {
				t.Fatalf("compaction starved: %v compactions, %d level-0 objects", compactions, l0)
			}
			cxVerify(t, env, "c1")
		})
	}
}
