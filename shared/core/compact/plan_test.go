package compact

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"pgregory.net/rapid"
)

const mib = 1 << 20

var now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ob builds an object entry: name, level, size in MiB, record key range,
// seq range, docs and deletes. Tier is hot unless changed.
func ob(name string, level int, sizeMiB int64, lo, hi string, minSeq, maxSeq uint64, docs, deletes int64) contract.ObjectEntry {
	return contract.ObjectEntry{
		Key: "collections/c/data/" + name + ".seg", Size: sizeMiB * mib, Checksum: "sha256:" + fmt.Sprintf("%064d", 0),
		Tier: contract.TierHot, Level: level, DocCount: docs, DeleteCount: deletes,
		MinSeq: minSeq, MaxSeq: maxSeq, MinRecordKey: lo, MaxRecordKey: hi,
	}
}

func snap(objs ...contract.ObjectEntry) Snapshot {
	return Snapshot{Collection: "c", Version: 7, Checksum: "sha256:x", Objects: objs}
}

// l0 is the i-th append: level 0, 10 MiB, keys [a,m], seqs 100i..100i+99.
func l0(i int) contract.ObjectEntry {
	return ob(fmt.Sprintf("append/%02d", i), 0, 10, "a", "m", uint64(100*i), uint64(100*i+99), 100, 0)
}

func testPolicy() Policy {
	return Policy{MergeFactor: 4, TargetObjectBytes: 64 * mib, MaxJobInputs: 16, MaxJobBytes: 1024 * mib, MaxLevel: 3, DeleteDensityThreshold: 0.3, FragmentationThreshold: 0.25}
}

func names(objs []contract.ObjectEntry) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Key[len("collections/c/data/"):len(o.Key)-len(".seg")])
	}
	return out
}

// jobView is the comparable essence of a job for table tests.
type jobView struct {
	Inputs      []string
	OutputLevel int
	Reason      string
	DropDeletes bool
	Debt        float64
}

func view(jobs []Job) []jobView {
	var out []jobView
	for _, j := range jobs {
		out = append(out, jobView{names(j.Inputs), j.OutputLevel, j.Reason, j.DropDeletes, j.Debt})
	}
	return out
}

func TestPlan(t *testing.T) {
	withPolicy := func(f func(*Policy)) Policy { p := testPolicy(); f(&p); return p }
	cases := []struct {
		name   string
		policy Policy
		objs   []contract.ObjectEntry
		want   []jobView
	}{
		{
			name:   "no job below the merge factor",
			policy: testPolicy(),
			objs:   []contract.ObjectEntry{l0(1), l0(2), l0(3)},
		},
		{
			name:   "fan-out moves level 0 up, dropping deletes when nothing older overlaps",
			policy: testPolicy(),
			objs:   []contract.ObjectEntry{l0(4), l0(2), l0(1), l0(3), l0(5)},
			want:   []jobView{{[]string{"append/01", "append/02", "append/03", "append/04", "append/05"}, 1, ReasonFanOut, true, 5.0 / 4}},
		},
		{
			name:   "bounded by inputs: the oldest MaxJobInputs move, newer ones wait",
			policy: withPolicy(func(p *Policy) { p.MaxJobInputs = 4 }),
			objs:   []contract.ObjectEntry{l0(6), l0(5), l0(4), l0(3), l0(2), l0(1)},
			// The job leaves newer overlapping objects outside: they are newer, so deletes may still go.
			want: []jobView{{[]string{"append/01", "append/02", "append/03", "append/04"}, 1, ReasonFanOut, true, 6.0 / 4}},
		},
		{
			name:   "bounded by bytes: oldest objects while they fit",
			policy: withPolicy(func(p *Policy) { p.MaxJobBytes = 35 * mib }),
			objs:   []contract.ObjectEntry{l0(1), l0(2), l0(3), l0(4), l0(5)},
			want:   []jobView{{[]string{"append/01", "append/02", "append/03"}, 1, ReasonFanOut, true, 5.0 / 4}},
		},
		{
			name:   "bounded by bytes still takes two inputs to make progress",
			policy: withPolicy(func(p *Policy) { p.MaxJobBytes = 1 * mib }),
			objs:   []contract.ObjectEntry{l0(1), l0(2), l0(3), l0(4)},
			want:   []jobView{{[]string{"append/01", "append/02"}, 1, ReasonFanOut, true, 1}},
		},
		{
			name:   "an older overlapping object outside the job keeps deletes",
			policy: testPolicy(),
			objs:   []contract.ObjectEntry{l0(1), l0(2), l0(3), l0(4), ob("old-l1", 1, 10, "c", "d", 1, 50, 10, 0)},
			want:   []jobView{{[]string{"append/01", "append/02", "append/03", "append/04"}, 1, ReasonFanOut, false, 1}},
		},
		{
			name:   "an older object outside the job with a disjoint key range does not",
			policy: testPolicy(),
			objs:   []contract.ObjectEntry{l0(1), l0(2), l0(3), l0(4), ob("old-l1", 1, 10, "n", "z", 1, 50, 10, 0)},
			want:   []jobView{{[]string{"append/01", "append/02", "append/03", "append/04"}, 1, ReasonFanOut, true, 1}},
		},
		{
			name:   "an outside object whose seqs interleave with the job's keeps deletes",
			policy: withPolicy(func(p *Policy) { p.MaxJobInputs = 4 }),
			// other-l1 is not older than the job (max_seq 450 > job min seq 100),
			// but its min_seq 150 is below the job's max seq: it may hold an older version.
			objs: []contract.ObjectEntry{l0(1), l0(2), l0(3), l0(4), ob("other-l1", 1, 10, "b", "c", 150, 450, 10, 0)},
			want: []jobView{{[]string{"append/01", "append/02", "append/03", "append/04"}, 1, ReasonFanOut, false, 1}},
		},
		{
			name:   "delete density rewrites a dense object alone when nothing older overlaps",
			policy: testPolicy(),
			objs:   []contract.ObjectEntry{ob("dense", 2, 40, "k", "p", 500, 600, 100, 50), ob("older-elsewhere", 3, 60, "q", "z", 1, 10, 100, 0), ob("newer", 1, 5, "k", "l", 700, 800, 10, 0)},
			want:   []jobView{{[]string{"dense"}, 2, ReasonDeleteDensity, true, 0.5 / 0.3}},
		},
		{
			name:   "delete density pulls in the older objects it overlaps, transitively",
			policy: testPolicy(),
			objs: []contract.ObjectEntry{
				ob("dense", 1, 40, "k", "p", 500, 600, 100, 60),
				ob("older", 3, 60, "a", "l", 1, 100, 100, 0),   // overlaps dense, older
				ob("oldest", 3, 60, "b", "c", 0, 0, 100, 0),    // overlaps older only
				ob("unrelated", 3, 60, "x", "z", 0, 5, 100, 0), // overlaps nothing
			},
			want: []jobView{{[]string{"dense", "older", "oldest"}, 3, ReasonDeleteDensity, true, 0.6 / 0.3}},
		},
		{
			name:   "no delete-density job when the closure does not fit the bounds",
			policy: withPolicy(func(p *Policy) { p.MaxJobBytes = 50 * mib }),
			objs:   []contract.ObjectEntry{ob("dense", 1, 40, "k", "p", 500, 600, 100, 60), ob("older", 3, 60, "a", "l", 1, 100, 100, 0)},
		},
		{
			name:   "no delete-density job across tiers",
			policy: testPolicy(),
			objs: []contract.ObjectEntry{ob("dense", 1, 40, "k", "p", 500, 600, 100, 60), func() contract.ObjectEntry {
				o := ob("older-cold", 3, 60, "a", "l", 1, 100, 100, 0)
				o.Tier = contract.TierCold
				return o
			}()},
		},
		{
			name:   "below the density threshold nothing happens",
			policy: testPolicy(),
			objs:   []contract.ObjectEntry{ob("sparse", 2, 40, "k", "p", 500, 600, 100, 29)},
		},
		{
			name:   "fragmentation merges small top-level objects, key neighbours first",
			policy: withPolicy(func(p *Policy) { p.MaxJobInputs = 4 }),
			objs: []contract.ObjectEntry{
				ob("s-e", 3, 2, "e", "e", 5, 5, 1, 0), ob("s-a", 3, 2, "a", "a", 9, 9, 1, 0), ob("s-c", 3, 2, "c", "c", 1, 1, 1, 0),
				ob("s-b", 3, 2, "b", "b", 3, 3, 1, 0), ob("s-d", 3, 2, "d", "d", 2, 2, 1, 0), ob("big", 3, 60, "f", "g", 4, 4, 1, 0),
			},
			want: []jobView{{[]string{"s-a", "s-b", "s-c", "s-d"}, 3, ReasonFragmentation, true, 5.0 / 4}},
		},
		{
			name:   "fragmentation needs the merge factor",
			policy: testPolicy(),
			objs:   []contract.ObjectEntry{ob("s-a", 3, 2, "a", "a", 9, 9, 1, 0), ob("s-b", 3, 2, "b", "b", 3, 3, 1, 0), ob("s-c", 3, 2, "c", "c", 1, 1, 1, 0)},
		},
		{
			name:   "top level: stacked full-size objects are merged in place",
			policy: testPolicy(),
			objs: []contract.ObjectEntry{
				ob("t1", 3, 64, "a", "z", 1, 10, 10, 0), ob("t2", 3, 64, "b", "y", 11, 20, 10, 0), ob("t3", 3, 64, "c", "x", 21, 30, 10, 0),
				ob("t4", 3, 64, "d", "e", 31, 40, 10, 0), ob("t5", 3, 64, "za", "zz", 41, 50, 10, 0),
			},
			want: []jobView{{[]string{"t1", "t2", "t3", "t4"}, 3, ReasonFanOut, true, 1}},
		},
		{
			name:   "top level: disjoint full-size objects are done",
			policy: testPolicy(),
			objs: []contract.ObjectEntry{
				ob("t1", 3, 64, "a", "b", 1, 10, 10, 0), ob("t2", 3, 64, "c", "d", 1, 10, 10, 0),
				ob("t3", 3, 64, "e", "f", 1, 10, 10, 0), ob("t4", 3, 64, "g", "h", 1, 10, 10, 0), ob("t5", 3, 64, "i", "j", 1, 10, 10, 0),
			},
		},
		{
			name:   "highest debt first, one job per output level, no shared inputs",
			policy: testPolicy(),
			objs: []contract.ObjectEntry{
				l0(11), l0(12), l0(13), l0(14), l0(15), l0(16), l0(17), l0(18),
				ob("l1-a", 1, 30, "a", "m", 1, 50, 10, 0), ob("l1-b", 1, 30, "a", "m", 51, 99, 10, 0),
				ob("l1-c", 1, 30, "a", "m", 100, 150, 10, 0), ob("l1-d", 1, 30, "a", "m", 151, 199, 10, 0),
				ob("l1-e", 1, 30, "a", "m", 5, 9, 10, 0),
				// Debt 0.3/0.3 = 1 < 1.25, and its closure needs the L1 objects: no job.
				ob("l2-dense", 2, 30, "a", "m", 200, 299, 10, 3),
			},
			want: []jobView{
				// Older L1 objects overlap the appends: their deletes must stay.
				{[]string{"append/11", "append/12", "append/13", "append/14", "append/15", "append/16", "append/17", "append/18"}, 1, ReasonFanOut, false, 2},
				// Everything outside the L1 job that overlaps it is newer.
				{[]string{"l1-a", "l1-b", "l1-c", "l1-d", "l1-e"}, 2, ReasonFanOut, true, 5.0 / 4},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := view(Plan(snap(tc.objs...), tc.policy, now))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Plan =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestPlanIsDeterministicUnderShuffle(t *testing.T) {
	objs := []contract.ObjectEntry{
		l0(1), l0(2), l0(3), l0(4), l0(5), l0(6),
		ob("l1-a", 1, 30, "a", "m", 1, 50, 10, 0), ob("l1-b", 1, 1, "n", "p", 51, 99, 10, 0),
		ob("dense", 2, 40, "q", "r", 40, 60, 100, 60), ob("top-1", 3, 1, "s", "s", 1, 1, 1, 0),
		ob("top-2", 3, 1, "t", "t", 1, 1, 1, 0), ob("top-3", 3, 1, "u", "u", 1, 1, 1, 0), ob("top-4", 3, 1, "v", "v", 1, 1, 1, 0),
	}
	want := Plan(snap(objs...), testPolicy(), now)
	if len(want) < 3 {
		t.Fatalf("expected several jobs, got %+v", view(want))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		shuffled := slices.Clone(objs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := Plan(snap(shuffled...), testPolicy(), now); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled input changed the plan:\n got %+v\nwant %+v", view(got), view(want))
		}
	}
}

func TestPlanDoesNotModifyItsInput(t *testing.T) {
	objs := []contract.ObjectEntry{l0(3), l0(1), l0(2), l0(4)}
	before := slices.Clone(objs)
	Plan(snap(objs...), testPolicy(), now)
	if !reflect.DeepEqual(objs, before) {
		t.Fatal("Plan reordered or changed the snapshot's objects")
	}
}

// Invariants over random snapshots: disjoint inputs, one job per (tier,
// output level), highest debt first, inputs sorted, jobs within bounds, and
// DropDeletes only when no outside object overlaps without being newer.
func TestPlanInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Policy{
			MergeFactor: rapid.IntRange(2, 5).Draw(t, "mf"), TargetObjectBytes: 64 * mib,
			MaxJobInputs: rapid.IntRange(2, 8).Draw(t, "maxInputs"), MaxJobBytes: rapid.Int64Range(1, 400).Draw(t, "maxMiB") * mib,
			MaxLevel: rapid.IntRange(1, 3).Draw(t, "maxLevel"), DeleteDensityThreshold: 0.3, FragmentationThreshold: 0.25,
		}
		n := rapid.IntRange(0, 30).Draw(t, "objects")
		objs := make([]contract.ObjectEntry, n)
		for i := range objs {
			lo := rapid.IntRange(0, 25).Draw(t, "lo")
			hi := lo + rapid.IntRange(0, 25-lo).Draw(t, "width")
			minSeq := rapid.Uint64Range(0, 1000).Draw(t, "minSeq")
			docs := rapid.Int64Range(0, 100).Draw(t, "docs")
			objs[i] = ob(fmt.Sprintf("o%02d", i), rapid.IntRange(0, 4).Draw(t, "level"), rapid.Int64Range(1, 80).Draw(t, "size"),
				string(rune('a'+lo)), string(rune('a'+hi)), minSeq, minSeq+rapid.Uint64Range(0, 300).Draw(t, "seqWidth"),
				docs, rapid.Int64Range(0, docs).Draw(t, "deletes"))
			if rapid.IntRange(0, 4).Draw(t, "cold") == 0 {
				objs[i].Tier = contract.TierCold
			}
		}
		jobs := Plan(snap(objs...), p, now)
		claimed := map[string]bool{}
		slots := map[string]bool{}
		for i, j := range jobs {
			if i > 0 && j.Debt > jobs[i-1].Debt {
				t.Fatalf("job %d has more debt than job %d", i, i-1)
			}
			if j.Debt < 1 {
				t.Fatalf("job %d is not due: debt %v", i, j.Debt)
			}
			slot := fmt.Sprint(j.Tier, j.OutputLevel)
			if slots[slot] {
				t.Fatalf("two jobs for %s", slot)
			}
			slots[slot] = true
			if !slices.IsSortedFunc(j.Inputs, byKey) {
				t.Fatalf("job %d inputs not sorted", i)
			}
			minInputs := 2
			if j.Reason == ReasonDeleteDensity {
				minInputs = 1
			}
			if len(j.Inputs) < minInputs || len(j.Inputs) > p.MaxJobInputs || (len(j.Inputs) > 2 && j.Bytes() > p.MaxJobBytes) {
				t.Fatalf("job %d out of bounds: %d inputs, %d bytes", i, len(j.Inputs), j.Bytes())
			}
			in := map[string]bool{}
			for _, o := range j.Inputs {
				if claimed[o.Key] {
					t.Fatalf("object %s in two jobs", o.Key)
				}
				claimed[o.Key], in[o.Key] = true, true
				if o.Tier != j.Tier {
					t.Fatalf("job %d mixes tiers", i)
				}
			}
			if j.DropDeletes {
				checkDropDeletes(t, j, in, objs)
			}
		}
		shuffled := slices.Clone(objs)
		rapid.Permutation(shuffled).Draw(t, "perm")
		if again := Plan(snap(shuffled...), p, now); !reflect.DeepEqual(again, jobs) {
			t.Fatalf("plan depends on object order")
		}
	})
}

// checkDropDeletes re-derives DropDeletes the slow way: no outside object
// may share a key with the job's range and have a version at or below the
// job's newest seq.
func checkDropDeletes(t *rapid.T, j Job, in map[string]bool, objs []contract.ObjectEntry) {
	var lo, hi string
	var maxSeq uint64
	first := true
	for _, o := range j.Inputs {
		if o.DocCount == 0 {
			continue
		}
		if first || o.MinRecordKey < lo {
			lo = o.MinRecordKey
		}
		if first || o.MaxRecordKey > hi {
			hi = o.MaxRecordKey
		}
		maxSeq = max(maxSeq, o.MaxSeq)
		first = false
	}
	for _, o := range objs {
		if in[o.Key] || o.DocCount == 0 || first {
			continue
		}
		for k := o.MinRecordKey; k <= o.MaxRecordKey; k = string(rune(k[0] + 1)) {
			if k >= lo && k <= hi && o.MinSeq <= maxSeq {
				t.Fatalf("DropDeletes with %s (keys %s..%s, min seq %d) outside job over %s..%s up to seq %d", o.Key, o.MinRecordKey, o.MaxRecordKey, o.MinSeq, lo, hi, maxSeq)
			}
		}
	}
}

func TestDebt(t *testing.T) {
	p := testPolicy()
	cases := []struct {
		name    string
		summary contract.Summary
		check   func(t *testing.T, d DebtReport)
	}{
		{"empty collection owes nothing", contract.Summary{}, func(t *testing.T, d DebtReport) {
			if d.Due() || d.Score != 0 || len(d.Levels) != 0 {
				t.Fatalf("%+v", d)
			}
		}},
		{"level 0 fan-out below and at the merge factor", contract.Summary{Objects: 7, DocCount: 100, Levels: []contract.LevelSummary{
			{Level: 1, Objects: 3, Bytes: 30 * mib, DocCount: 50}, {Level: 0, Objects: 4, Bytes: 40 * mib, DocCount: 50},
		}}, func(t *testing.T, d DebtReport) {
			if len(d.Levels) != 2 || d.Levels[0].Level != 0 || d.Levels[0].FanOut != 1 || d.Levels[1].FanOut != 0.75 {
				t.Fatalf("levels %+v", d.Levels)
			}
			if !d.Due() || d.Score != 1 || d.FanOut != 1 {
				t.Fatalf("%+v", d)
			}
		}},
		{"delete density per level and overall", contract.Summary{Objects: 2, DocCount: 200, DeleteCount: 60, Levels: []contract.LevelSummary{
			{Level: 2, Objects: 1, Bytes: 10 * mib, DocCount: 100, DeleteCount: 60}, {Level: 3, Objects: 1, Bytes: 60 * mib, DocCount: 100},
		}}, func(t *testing.T, d DebtReport) {
			if d.DeleteDensity != 0.3 || d.Levels[0].DeleteDensity != 0.6 || d.Score != 2 {
				t.Fatalf("%+v", d)
			}
		}},
		{"a compacted top level is not fan-out debt", contract.Summary{Objects: 10, DocCount: 10, Levels: []contract.LevelSummary{
			{Level: 3, Objects: 10, Bytes: 640 * mib, DocCount: 10},
		}}, func(t *testing.T, d DebtReport) {
			if d.Due() || d.Levels[0].FanOut != 0.25 {
				t.Fatalf("%+v", d)
			}
		}},
		{"a top level of many small objects is fragmented", contract.Summary{Objects: 8, DocCount: 8, Levels: []contract.LevelSummary{
			{Level: 3, Objects: 8, Bytes: 16 * mib, DocCount: 8},
		}}, func(t *testing.T, d DebtReport) {
			if !d.Due() || d.Levels[0].Fragmentation != 2 || d.Levels[0].FanOut != 2 {
				t.Fatalf("%+v", d)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Debt(tc.summary, p)) })
	}
}

func TestPolicyDefaultsFillZeroFields(t *testing.T) {
	if got := (Policy{}).normalized(); got != DefaultPolicy() {
		t.Fatalf("zero policy normalizes to %+v, want %+v", got, DefaultPolicy())
	}
	p := Policy{MergeFactor: 1, MaxJobInputs: 1, MaxLevel: contract.MaxLevel + 5, FragmentationThreshold: 0.9, DeleteDensityThreshold: -1}.normalized()
	if p.MergeFactor != 2 || p.MaxJobInputs != 2 || p.MaxLevel != contract.MaxLevel || p.FragmentationThreshold != 0.5 || p.DeleteDensityThreshold != -1 {
		t.Fatalf("%+v", p)
	}
}
