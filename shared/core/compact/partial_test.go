package compact

import (
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// A plan over a partial snapshot (only the due levels were read) keeps
// every delete marker: objects it did not read may hold older versions.
func TestPartialSnapshotNeverDropsDeletes(t *testing.T) {
	objs := []contract.ObjectEntry{l0(1), l0(2), l0(3), l0(4)}
	for i := range objs {
		objs[i].DeleteCount = 10
	}
	full := Plan(snap(objs...), testPolicy(), now)
	if len(full) == 0 || !full[0].DropDeletes {
		t.Fatalf("full snapshot: want a job that may drop deletes (nothing older exists), got %+v", view(full))
	}
	part := snap(objs...)
	part.Levels = []int{0}
	got := Plan(part, testPolicy(), now)
	if len(got) == 0 {
		t.Fatal("partial snapshot: want the same fan-out job")
	}
	for _, j := range got {
		if j.DropDeletes || j.Reason == ReasonDeleteDensity {
			t.Fatalf("partial snapshot planned %+v", view(got))
		}
	}
}

func TestPlanLevelsLoadsOnlyWhatIsDue(t *testing.T) {
	p := testPolicy()
	sum := contract.Summary{Levels: []contract.LevelSummary{
		{Level: 0, Objects: 5, Bytes: 50 * mib, DocCount: 500},
		{Level: 2, Objects: 3, Bytes: 900 * mib, DocCount: 90000},
	}}
	if got := Debt(sum, p).PlanLevels(p); len(got) != 1 || got[0] != 0 {
		t.Fatalf("fan-out due at level 0 only: PlanLevels = %v", got)
	}
	sum.Levels[1].DeleteCount = 45000
	if got := Debt(sum, p).PlanLevels(p); got != nil {
		t.Fatalf("delete density due: PlanLevels = %v, want nil (full set)", got)
	}
}

func TestLevelPartsSelectsTheLevelsKeyRange(t *testing.T) {
	c := "c"
	ref := func(first, last string) contract.PartRef { return contract.PartRef{FirstKey: first, LastKey: last} }
	keep := levelParts(c, []int{1})
	cases := []struct {
		ref  contract.PartRef
		want bool
	}{
		{ref(contract.AppendSegmentKey(c, 1, 1, 0), contract.AppendSegmentKey(c, 1, 9, 0)), false},
		{ref(contract.AppendSegmentKey(c, 1, 9, 0), contract.RewriteOutputKey(c, 1, "t", 0)), true},
		{ref(contract.RewriteOutputKey(c, 1, "a", 0), contract.RewriteOutputKey(c, 1, "z", 3)), true},
		{ref(contract.RewriteOutputKey(c, 1, "z", 9), contract.RewriteOutputKey(c, 3, "a", 0)), true},
		{ref(contract.RewriteOutputKey(c, 2, "a", 0), contract.RewriteOutputKey(c, 3, "a", 0)), false},
	}
	for i, tc := range cases {
		if got := keep(tc.ref); got != tc.want {
			t.Errorf("case %d [%s, %s]: keep = %v, want %v", i, tc.ref.FirstKey, tc.ref.LastKey, got, tc.want)
		}
	}
	if levelParts(c, nil) != nil {
		t.Error("nil levels must keep every part")
	}
}
