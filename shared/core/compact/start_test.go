package compact

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// The start rule of a coalesced rewrite (issue 16 item 1): wait for a
// still head, bounded; past the bound, start right after a commit.
func TestStartRuleWaitsForAStillHeadWithinItsBound(t *testing.T) {
	r := StartRule{Quiet: time.Second, MaxWait: 2 * time.Second}
	now := time.UnixMilli(1_000_000)
	head := func(v uint64, age time.Duration) contract.Head {
		return contract.Head{Version: v, CommittedAtUnixMs: now.Add(-age).UnixMilli()}
	}
	for _, tc := range []struct {
		name     string
		waited   time.Duration
		head     contract.Head
		aligning bool
		prev     uint64
		start    bool
		why      string
		sleep    time.Duration
	}{
		{"still head starts", 0, head(5, 1500*time.Millisecond), false, 0, true, StartQuiet, 0},
		{"fresh head waits until it would be still", 0, head(5, 300*time.Millisecond), false, 0, false, "", 700 * time.Millisecond},
		{"the wait never passes max wait", 1800 * time.Millisecond, head(5, 100*time.Millisecond), false, 5, false, "", 200 * time.Millisecond},
		{"past max wait it polls for the next commit", 2 * time.Second, head(7, 50*time.Millisecond), false, 6, false, "", 50 * time.Millisecond},
		{"past max wait, a commit since the last look starts it", 2100 * time.Millisecond, head(8, 10*time.Millisecond), true, 7, true, StartAligned, 0},
		{"past max wait, no commit since the last look", 2100 * time.Millisecond, head(8, 60*time.Millisecond), true, 8, false, "", 50 * time.Millisecond},
		{"max wait + quiet is the last bound", 3 * time.Second, head(9, 10*time.Millisecond), true, 9, true, StartMaxWait, 0},
		{"a head committed in the future (skew) waits, bounded", 0, head(5, -time.Minute), false, 0, false, "", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, why, d := r.decide(tc.waited, now, tc.head, tc.aligning, tc.prev)
			if start != tc.start || why != tc.why || d != tc.sleep {
				t.Fatalf("decide = %v %q %s, want %v %q %s", start, why, d, tc.start, tc.why, tc.sleep)
			}
		})
	}
	if start, why, _ := (StartRule{}).decide(0, now, head(1, 0), false, 0); !start || why != StartNoWait {
		t.Fatal("a zero rule must start at once")
	}
	// However the clock behaves, the head reads of one wait are bounded.
	if n := r.maxPolls(); n < 2 || n > 100 {
		t.Fatalf("maxPolls %d", n)
	}
}
