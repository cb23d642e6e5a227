package observe_test

import (
	"context"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/observe"
)

// transitionEnqueued observes "c1" whose root has parts (min object max_ts,
// tier) under a transition to cold after afterMs, at nowMs.
func transitionEnqueued(t *testing.T, nowMs, afterMs int64, parts ...contract.PartRef) bool {
	t.Helper()
	objs, q := memObjects{}, &recQueue{}
	commitRoot(t, objs, 1, parts...)
	facts := fixedFacts{contract.CollectionFacts{Collection: "c1", FactsVersion: 1, Lifecycle: contract.Lifecycle{TransitionAfterMs: afterMs, TransitionToTier: contract.TierCold}}}
	cfg := observe.DefaultConfig()
	cfg.CompactionDue = func(contract.Summary) bool { return false }
	if _, err := observe.New(objs, memState{}, q, facts, func() time.Time { return time.UnixMilli(nowMs) }, cfg, nil, nil).Observe(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	for _, tk := range q.tasks {
		if tk.Kind == contract.KindLifecycleTransition {
			return true
		}
	}
	return false
}

// A part whose objects carry a far-future max_ts is never due: max_ts +
// transition_after_ms saturates instead of wrapping into the past (which
// enqueued a transition that moves nothing, every sweep minute).
func TestTransitionDueFarFutureMaxTs(t *testing.T) {
	nowMs := int64(1_800_000_000_000)
	if transitionEnqueued(t, nowMs, 30*24*hour, part(math.MaxInt64-hour, "hot")) {
		t.Fatal("far-future max_ts judged due")
	}
	if !transitionEnqueued(t, nowMs, 30*24*hour, part(math.MaxInt64-hour, "hot"), part(nowMs-31*24*hour, "warm")) {
		t.Fatal("an old part beside a far-future one is not due")
	}
}

// FuzzTransitionDue: the observer enqueues a lifecycle transition exactly
// when a part holding a tier other than the target has min max_ts +
// transition_after_ms <= the sweep minute, computed without overflow.
func FuzzTransitionDue(f *testing.F) {
	f.Add(int64(1_800_000_000_000), int64(hour), int64(1_800_000_000_000-2*hour), int64(0), uint16(1))
	f.Add(int64(1_800_000_000_000), int64(30*24*hour), int64(math.MaxInt64-hour), int64(1), uint16(1))
	f.Fuzz(func(t *testing.T, nowMs, afterMs, ts1, ts2 int64, tiers uint16) {
		nowMs &= math.MaxInt64 >> 1 // a time, not a sign
		if afterMs < 0 {
			afterMs = -(afterMs + 1)
		}
		var parts []contract.PartRef
		names := []string{contract.TierCold, contract.TierHot, contract.TierWarm}
		for i, ts := range []int64{ts1, ts2} {
			p := part(ts, names[int(tiers>>(2*i))%3])
			parts = append(parts, p)
		}
		sweep := big.NewInt(contract.SweepMinute(nowMs))
		want := false
		for _, p := range parts {
			due := new(big.Int).Add(big.NewInt(p.MinObjectMaxTsUnixMs), big.NewInt(afterMs))
			if afterMs > 0 && p.Tiers[0] != contract.TierCold && due.Cmp(sweep) <= 0 {
				want = true
			}
		}
		if got := transitionEnqueued(t, nowMs, afterMs, parts...); got != want {
			t.Fatalf("transition enqueued = %v, want %v (now %d, after %d, parts %+v)", got, want, nowMs, afterMs, parts)
		}
	})
}
