package gc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
)

const t0 = int64(1_700_000_000_000)

func entry(c, key string, level int, minTs, maxTs int64) contract.ObjectEntry {
	return contract.ObjectEntry{Key: key, Size: 100, Checksum: contract.Checksum([]byte(key)), Tier: contract.TierHot, Level: level,
		DocCount: 1, MinTsUnixMs: minTs, MaxTsUnixMs: maxTs, MinSeq: 1, MaxSeq: 1, MinRecordKey: "a", MaxRecordKey: "b"}
}

// history is a model of the committed versions: the full object set of
// every version, materialized (the brute force's view).
type modelHistory struct {
	sets   []map[string]contract.ObjectEntry // index = version (0 unused)
	commit []int64
}

// TestChangeBasedEligibilityEqualsFullReferenceCheck drives the real
// stand-in publisher (parts, content addressing, shared parts) through
// random adds, removes, re-adds and compactions, then compares the plan
// (candidates from changes, exact lookups in retained roots) with a brute
// force over every version's full object set.
func TestChangeBasedEligibilityEqualsFullReferenceCheck(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		const c = "prop"
		mem := newMem()
		clock := t0
		now := func() time.Time { return time.UnixMilli(clock) }
		pub := publisher.New(mem, now, publisher.Options{MaxPartObjects: rapid.IntRange(1, 6).Draw(rt, "maxPart")}, nil)
		head, err := pub.Create(ctx, c)
		if err != nil {
			rt.Fatal(err)
		}
		h := modelHistory{sets: []map[string]contract.ObjectEntry{nil, {}}, commit: []int64{0, head.CommittedAtUnixMs}}
		removed := map[string]contract.ObjectEntry{} // ever removed, for re-adds
		steps := rapid.IntRange(1, 14).Draw(rt, "steps")
		for s := 0; s < steps; s++ {
			clock += rapid.Int64Range(0, int64(30*time.Minute/time.Millisecond)).Draw(rt, "advance")
			cur := h.sets[len(h.sets)-1]
			next := maps.Clone(cur)
			present := slices.Sorted(maps.Keys(cur))
			v := uint64(len(h.sets))
			var ch publisher.Change
			mk := func(key string, level int) contract.ObjectEntry {
				minTs := clock - rapid.Int64Range(0, int64(2*time.Hour/time.Millisecond)).Draw(rt, "age")
				maxTs := minTs + rapid.Int64Range(0, clock-minTs).Draw(rt, "span")
				return entry(c, key, level, minTs, maxTs)
			}
			removeSome := func(k int) {
				for range k {
					if len(present) == 0 {
						return
					}
					i := rapid.IntRange(0, len(present)-1).Draw(rt, "rm")
					key := present[i]
					present = slices.Delete(present, i, i+1)
					ch.Removed = append(ch.Removed, cur[key])
					removed[key] = cur[key]
					delete(next, key)
				}
			}
			switch op := rapid.IntRange(0, 3).Draw(rt, "op"); op {
			case 0: // append
				for i := range rapid.IntRange(1, 3).Draw(rt, "adds") {
					e := mk(contract.AppendSegmentKey(c, 1, v, i), 0)
					ch.Added = append(ch.Added, e)
					next[e.Key] = e
				}
			case 1: // remove
				removeSome(rapid.IntRange(1, 2).Draw(rt, "rms"))
			case 2: // re-add something removed earlier
				var gone []string
				for k := range removed {
					if _, ok := cur[k]; !ok {
						gone = append(gone, k)
					}
				}
				slices.Sort(gone)
				if len(gone) == 0 {
					continue
				}
				e := removed[gone[rapid.IntRange(0, len(gone)-1).Draw(rt, "readd")]]
				ch.Added = append(ch.Added, e)
				next[e.Key] = e
			case 3: // compaction: remove some, add one output
				removeSome(2)
				if len(ch.Removed) == 0 {
					continue
				}
				e := mk(contract.RewriteOutputKey(c, 1, fmt.Sprintf("task-%d", v), 0), 1)
				ch.Added = append(ch.Added, e)
				next[e.Key] = e
			}
			if len(ch.Added) == 0 && len(ch.Removed) == 0 {
				continue
			}
			ch.Origin = contract.Origin{Kind: contract.OriginAppend}
			hd, err := pub.Commit(ctx, c, func(context.Context, publisher.Snapshot) (publisher.Change, error) { return ch, nil })
			if err != nil {
				rt.Fatal(err)
			}
			h.sets = append(h.sets, next)
			h.commit = append(h.commit, hd.CommittedAtUnixMs)
		}

		nowMs := clock + rapid.Int64Range(0, int64(3*time.Hour/time.Millisecond)).Draw(rt, "now")
		cfg := DefaultConfig()
		cfg.TokenLifetime = time.Duration(rapid.Int64Range(0, 40).Draw(rt, "tokenMin")) * time.Minute
		cfg.RetentionWindow = time.Duration(rapid.Int64Range(0, 20).Draw(rt, "rwMin")) * time.Minute
		safe := max(t0, nowMs-rapid.Int64Range(0, int64(90*time.Minute/time.Millisecond)).Draw(rt, "safeLag"))
		retention := rapid.SampledFrom([]int64{0, int64(10 * time.Minute / time.Millisecond), int64(time.Hour / time.Millisecond), int64(3 * time.Hour / time.Millisecond)}).Draw(rt, "retention")
		ports := ReadPorts{Objects: mem, Facts: staticFacts{contract.CollectionFacts{Collection: c, Lifecycle: contract.Lifecycle{RetentionMs: retention}}},
			Watermark: staticWatermark{safe: safe}}
		plan, err := PlanSweep(ctx, ports, cfg, c, time.UnixMilli(nowMs))
		if err != nil {
			rt.Fatal(err)
		}
		got := map[string]string{}
		for _, d := range plan.Delete {
			got[d.Entry.Key] = "delete"
		}
		for _, d := range plan.Deferred {
			got[d.Key] = d.Reason
		}
		want := bruteForce(h, nowMs, safe, retention, cfg)
		if !maps.Equal(got, want) {
			rt.Fatalf("change-based plan differs from the full reference check\n got  %v\n want %v", got, want)
		}
	})
}

// bruteForce judges every object that was ever committed against the full
// object sets of all versions.
func bruteForce(h modelHistory, now, safe, retention int64, cfg Config) map[string]string {
	head := len(h.sets) - 1
	retained := map[int]bool{head: true}
	for v := 1; v < head; v++ {
		if h.commit[v+1] > now-(cfg.TokenLifetime+cfg.ClockSkew).Milliseconds() {
			retained[v] = true
		}
	}
	out := map[string]string{}
	for v := 1; v <= head; v++ {
		for k := range h.sets[v] {
			if _, live := h.sets[head][k]; live {
				continue
			}
			if _, done := out[k]; done {
				continue
			}
			// last eviction: the newest version that does not hold k while its parent does
			ev := 0
			for w := 2; w <= head; w++ {
				if _, had := h.sets[w-1][k]; had {
					if _, has := h.sets[w][k]; !has {
						ev = w
					}
				}
			}
			e := h.sets[ev-1][k]
			pinned := false
			for r := range retained {
				if _, ok := h.sets[r][k]; ok {
					pinned = true
				}
			}
			switch {
			case pinned:
				out[k] = ReasonPinned
			case !(h.commit[ev] < safe-cfg.RetentionWindow.Milliseconds()):
				out[k] = ReasonRetentionWindow
			case retention > 0 && now-e.MaxTsUnixMs < retention+cfg.ClockSkew.Milliseconds():
				out[k] = ReasonLifecycle
			default:
				out[k] = "delete"
			}
		}
	}
	return out
}
