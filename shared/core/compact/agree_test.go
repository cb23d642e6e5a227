package compact

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"pgregory.net/rapid"
)

// summarize is the manifest summary of an object set (as the publisher
// writes it: per level, across tiers).
func summarize(objs []contract.ObjectEntry) contract.Summary {
	levels := map[int]contract.LevelSummary{}
	var s contract.Summary
	for _, o := range objs {
		l := levels[o.Level]
		l.Level = o.Level
		l.Objects++
		l.Bytes += o.Size
		l.DocCount += o.DocCount
		l.DeleteCount += o.DeleteCount
		levels[o.Level] = l
		s.Objects++
		s.Bytes += o.Size
		s.DocCount += o.DocCount
		s.DeleteCount += o.DeleteCount
	}
	for _, lv := range slices.Sorted(maps.Keys(levels)) {
		s.Levels = append(s.Levels, levels[lv])
	}
	return s
}

// memLoad loads the objects of the listed levels (nil: all) from objs, as
// PlanRoot loads them from a root's parts.
func memLoad(objs []contract.ObjectEntry) func([]int) (Snapshot, error) {
	return func(levels []int) (Snapshot, error) {
		s := snap()
		s.Levels = levels
		for _, o := range objs {
			if levels == nil || slices.Contains(levels, o.Level) {
				s.Objects = append(s.Objects, o)
			}
		}
		return s, nil
	}
}

// tiered is the state a lifecycle transition leaves (seed 4830): level 0
// holds 2 hot and 2 warm objects, one warm object dense with deletes.
func tiered() []contract.ObjectEntry {
	objs := []contract.ObjectEntry{l0(1), l0(2), l0(3), l0(4)}
	objs[0].Tier, objs[1].Tier = contract.TierWarm, contract.TierWarm
	objs[0].DeleteCount = 40 // 0.4 >= 0.3 alone; the level's density is 0.1
	return objs
}

// The summary counts a level across tiers: fan-out 4/4 is due, yet no
// (tier, level) group reaches the merge factor. The executor must then see
// what the full plan sees (the delete-density job), not "nothing".
func TestExecutorPlanFindsWhatTheSummaryMisses(t *testing.T) {
	p := testPolicy()
	objs := tiered()
	if !Debt(summarize(objs), p).Due() {
		t.Fatal("debt: want due (4 level-0 objects across tiers)")
	}
	full := Plan(snap(objs...), p, now)
	if len(full) == 0 || full[0].Reason != ReasonDeleteDensity {
		t.Fatalf("full plan: want a delete-density job, got %+v", view(full))
	}
	_, jobs, err := planStaged(summarize(objs), p, now, memLoad(objs))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) == 0 || jobs[0].Reason != ReasonDeleteDensity {
		t.Fatalf("executor plan: want the full plan's delete-density job, got %+v", view(jobs))
	}

	// Without the dense object the debt stays due with nothing to plan:
	// the head the executor records as idle (observe.Observed.CompactionOwed).
	objs[0].DeleteCount = 0
	if !Debt(summarize(objs), p).Due() {
		t.Fatal("debt: want due")
	}
	if _, jobs, _ := planStaged(summarize(objs), p, now, memLoad(objs)); len(jobs) != 0 {
		t.Fatalf("2 hot + 2 warm: want no job, got %+v", view(jobs))
	}
}

// Over generated level/tier mixes: whenever the summary says compaction is
// due, the executor's plan has a job exactly when the full plan has one,
// so "due" never sends the executor to a head it plans nothing for while
// the full object set holds work (and when the full plan is empty too, the
// executor records the head idle and reconciliation stops enqueueing it).
// Fan-out below the top level is never missed by the summary: a (tier,
// level) group reaching the merge factor makes its level reach it.
func TestDebtAndExecutorPlanAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Policy{
			MergeFactor: rapid.IntRange(2, 5).Draw(t, "mf"), TargetObjectBytes: 64 * mib,
			MaxJobInputs: rapid.IntRange(2, 8).Draw(t, "maxInputs"), MaxJobBytes: rapid.Int64Range(1, 400).Draw(t, "maxMiB") * mib,
			MaxLevel: rapid.IntRange(1, 3).Draw(t, "maxLevel"), DeleteDensityThreshold: 0.3, FragmentationThreshold: 0.25,
		}
		tiers := []string{contract.TierHot, contract.TierWarm, contract.TierCold}
		n := rapid.IntRange(0, 24).Draw(t, "objects")
		objs := make([]contract.ObjectEntry, n)
		for i := range objs {
			lo := rapid.IntRange(0, 25).Draw(t, "lo")
			hi := lo + rapid.IntRange(0, 25-lo).Draw(t, "width")
			minSeq := rapid.Uint64Range(0, 1000).Draw(t, "minSeq")
			docs := rapid.Int64Range(0, 100).Draw(t, "docs")
			objs[i] = ob(fmt.Sprintf("o%02d", i), rapid.IntRange(0, 3).Draw(t, "level"), rapid.Int64Range(1, 80).Draw(t, "size"),
				string(rune('a'+lo)), string(rune('a'+hi)), minSeq, minSeq+rapid.Uint64Range(0, 300).Draw(t, "seqWidth"),
				docs, rapid.Int64Range(0, docs).Draw(t, "deletes"))
			objs[i].Tier = rapid.SampledFrom(tiers).Draw(t, "tier")
		}
		sum := summarize(objs)
		debt := Debt(sum, p)
		full := Plan(snap(objs...), p, now)
		for _, j := range full {
			if j.Reason == ReasonFanOut && j.OutputLevel > j.Inputs[0].Level && !debt.Due() {
				t.Fatalf("full plan has fan-out job %+v, the summary's debt is not due", view([]Job{j}))
			}
		}
		if !debt.Due() {
			return
		}
		_, jobs, err := planStaged(sum, p, now, memLoad(objs))
		if err != nil {
			t.Fatal(err)
		}
		if (len(jobs) > 0) != (len(full) > 0) {
			t.Fatalf("debt due: executor plan %+v, full plan %+v", view(jobs), view(full))
		}
	})
}
