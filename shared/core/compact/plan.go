package compact

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/policy"
)

// Job reasons.
const (
	ReasonFanOut        = "fan_out"
	ReasonDeleteDensity = "delete_density"
	ReasonFragmentation = "fragmentation"
)

// Snapshot is the object set of one committed manifest version: all of it,
// or (Levels non-nil) only the objects of the listed levels. A partial
// snapshot cannot prove that no older object outside a job holds a key, so
// Plan never drops delete markers from it and plans no delete-density
// rewrite (which needs every overlapping object); fan-out and fragmentation
// jobs need only their own level.
type Snapshot struct {
	Collection string
	Version    uint64
	Checksum   string
	Objects    []contract.ObjectEntry
	Levels     []int // nil: the full object set
}

// Policy tunes the tiered compaction policy. A zero field takes
// DefaultPolicy's value; a negative threshold disables its rule.
type Policy struct {
	// MergeFactor: a level is due when it holds at least this many objects
	// (below the top level), this many overlapping objects (top level), or
	// this many fragmented objects. At least 2.
	MergeFactor int
	// TargetObjectBytes is the size compaction outputs are split at.
	TargetObjectBytes int64
	// MaxJobInputs and MaxJobBytes bound one job, so that a busy collection
	// makes progress in bounded steps. A job always takes at least two
	// inputs (delete-density jobs: one), even past MaxJobBytes.
	MaxJobInputs int
	MaxJobBytes  int64
	// MaxLevel is the top level; fan-out never moves objects past it.
	// Capped at contract.MaxLevel.
	MaxLevel int
	// DeleteDensityThreshold: an object with delete_count/doc_count at or
	// above it is rewritten (with the older objects it overlaps) to drop
	// its delete markers.
	DeleteDensityThreshold float64
	// FragmentationThreshold: in levels >= 1 an object smaller than this
	// fraction of TargetObjectBytes is fragmented. Capped at 0.5 so that
	// merging fragmented objects always yields fewer objects.
	FragmentationThreshold float64
}

// DefaultPolicy is the policy used when nothing else is configured
// (policy.Default's compaction section).
func DefaultPolicy() Policy { return PolicyFrom(policy.Default().Compaction) }

// PolicyFrom is the compaction policy of a validated coordinator policy.
func PolicyFrom(c policy.Compaction) Policy {
	return Policy{
		MergeFactor:            c.MergeFactor,
		TargetObjectBytes:      c.TargetObjectBytes,
		MaxJobInputs:           c.MaxJobInputs,
		MaxJobBytes:            c.MaxJobBytes,
		MaxLevel:               c.MaxLevel,
		DeleteDensityThreshold: c.DeleteDensityThreshold,
		FragmentationThreshold: c.FragmentationThreshold,
	}
}

// Due reports whether a root with summary has compaction due under p: the
// observer's "compaction is due" is this very rule, so no task is enqueued
// that the executor plans nothing for (modulo what a summary cannot show).
func (p Policy) Due(summary contract.Summary) bool { return Debt(summary, p).Due() }

func (p Policy) normalized() Policy {
	d := DefaultPolicy()
	if p.MergeFactor == 0 {
		p.MergeFactor = d.MergeFactor
	}
	p.MergeFactor = max(p.MergeFactor, 2)
	if p.TargetObjectBytes <= 0 {
		p.TargetObjectBytes = d.TargetObjectBytes
	}
	if p.MaxJobInputs == 0 {
		p.MaxJobInputs = d.MaxJobInputs
	}
	p.MaxJobInputs = max(p.MaxJobInputs, 2)
	if p.MaxJobBytes <= 0 {
		p.MaxJobBytes = d.MaxJobBytes
	}
	if p.MaxLevel <= 0 {
		p.MaxLevel = d.MaxLevel
	}
	p.MaxLevel = min(p.MaxLevel, contract.MaxLevel) // deepest level the key layout names
	if p.DeleteDensityThreshold == 0 {
		p.DeleteDensityThreshold = d.DeleteDensityThreshold
	}
	if p.FragmentationThreshold == 0 {
		p.FragmentationThreshold = d.FragmentationThreshold
	}
	p.FragmentationThreshold = min(p.FragmentationThreshold, 0.5)
	return p
}

// Job is one planned rewrite: merge Inputs into objects of OutputLevel in Tier.
type Job struct {
	Tier        string
	Inputs      []contract.ObjectEntry // sorted by object key
	OutputLevel int
	Reason      string
	// DropDeletes is true only when no object outside the job can hold an
	// older version of a key in the job's key range: every such overlapping
	// object is strictly newer than everything in the job.
	DropDeletes bool
	Debt        float64
}

// Bytes is the total size of the job's inputs (saturating: sizes come
// from a manifest).
func (j Job) Bytes() int64 { return sumBytes(j.Inputs) }

// Plan chooses the compaction jobs worth running on snap, highest debt
// first. It is pure: the result depends only on its arguments, not on the
// order of snap.Objects. At most one job targets each (tier, output level),
// and no object is the input of two jobs. now is accepted so that age-aware
// rules can be added without changing callers; no rule uses it yet.
func Plan(snap Snapshot, policy Policy, now time.Time) []Job {
	p := policy.normalized()
	objs := slices.Clone(snap.Objects)
	slices.SortFunc(objs, byKey)
	var cands []Job
	for _, g := range groups(objs) {
		cands = append(cands, groupCandidates(g, p)...)
	}
	partial := snap.Levels != nil
	if !partial {
		cands = append(cands, deleteDensityCandidates(objs, p)...)
	}
	for i := range cands {
		cands[i].DropDeletes = !partial && dropDeletesSafe(cands[i].Inputs, objs)
	}
	slices.SortStableFunc(cands, byPriority)
	return admit(cands)
}

// group is the objects of one (tier, level), oldest first.
type group struct {
	tier  string
	level int
	objs  []contract.ObjectEntry
}

func groups(objs []contract.ObjectEntry) []group {
	type gk struct {
		tier  string
		level int
	}
	idx := map[gk]int{}
	var gs []group
	for _, o := range objs {
		k := gk{o.Tier, o.Level}
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, group{tier: o.Tier, level: o.Level})
		}
		gs[i].objs = append(gs[i].objs, o)
	}
	for i := range gs {
		slices.SortFunc(gs[i].objs, oldestFirst)
	}
	return gs
}

func groupCandidates(g group, p Policy) []Job {
	var out []Job
	if j, ok := fanOut(g, p); ok {
		out = append(out, j)
	}
	if j, ok := fragmentation(g, p); ok {
		out = append(out, j)
	}
	return out
}

// fanOut: below the top level, a level holding MergeFactor objects moves its
// oldest objects one level up. At the top level objects stay, so only the
// objects stacked over one key (read amplification) count; merging them
// leaves disjoint outputs, so the same objects never trigger twice.
func fanOut(g group, p Policy) (Job, bool) {
	if g.level < p.MaxLevel {
		if len(g.objs) < p.MergeFactor {
			return Job{}, false
		}
		return newJob(g.tier, bounded(g.objs, p, 2), g.level+1, ReasonFanOut, ratio(len(g.objs), p.MergeFactor)), true
	}
	stack := deepestStack(g.objs)
	if len(stack) < p.MergeFactor {
		return Job{}, false
	}
	return newJob(g.tier, bounded(stack, p, 2), g.level, ReasonFanOut, ratio(len(stack), p.MergeFactor)), true
}

// fragmentation: in levels >= 1, MergeFactor objects much smaller than the
// target are merged, neighbours by key first, into the same level.
func fragmentation(g group, p Policy) (Job, bool) {
	if g.level < 1 || p.FragmentationThreshold < 0 {
		return Job{}, false
	}
	limit := int64(p.FragmentationThreshold * float64(p.TargetObjectBytes))
	var small []contract.ObjectEntry
	for _, o := range g.objs {
		if o.Size < limit {
			small = append(small, o)
		}
	}
	if len(small) < p.MergeFactor {
		return Job{}, false
	}
	slices.SortFunc(small, byRecordKey)
	return newJob(g.tier, bounded(small, p, 2), g.level, ReasonFragmentation, ratio(len(small), p.MergeFactor)), true
}

// maxDensityTries bounds how many dense objects Plan tries to close over.
const maxDensityTries = 16

// deleteDensityCandidates: an object dense with delete markers is rewritten
// together with every object that keeps its markers alive (older overlapping
// objects, transitively), so the job can drop them. A closure that does not
// fit the job bounds or crosses tiers yields no job: rewriting without
// dropping the markers would not lower the density and would repeat forever.
func deleteDensityCandidates(objs []contract.ObjectEntry, p Policy) []Job {
	if p.DeleteDensityThreshold < 0 {
		return nil
	}
	var dense []contract.ObjectEntry
	for _, o := range objs {
		if density(o) >= p.DeleteDensityThreshold && o.DeleteCount > 0 {
			dense = append(dense, o)
		}
	}
	slices.SortFunc(dense, func(a, b contract.ObjectEntry) int {
		return cmp.Or(cmp.Compare(density(b), density(a)), byKey(a, b))
	})
	var out []Job
	for i, d := range dense {
		if i == maxDensityTries {
			break
		}
		inputs, ok := closure(d, objs, p)
		if !ok {
			continue
		}
		level := 0
		for _, o := range inputs {
			level = max(level, o.Level)
		}
		out = append(out, newJob(d.Tier, inputs, level, ReasonDeleteDensity, density(d)/p.DeleteDensityThreshold))
	}
	return out
}

// closure grows {seed} with every object that overlaps it and is not
// strictly newer, until nothing is added or a bound is crossed.
func closure(seed contract.ObjectEntry, objs []contract.ObjectEntry, p Policy) ([]contract.ObjectEntry, bool) {
	in := map[string]bool{seed.Key: true}
	job := []contract.ObjectEntry{seed}
	for {
		r := rangeOf(job)
		added := false
		for _, o := range objs {
			if in[o.Key] || !r.blocks(o) {
				continue
			}
			if o.Tier != seed.Tier {
				return nil, false
			}
			in[o.Key] = true
			job = append(job, o)
			added = true
		}
		if len(job) > p.MaxJobInputs || (len(job) > 1 && sumBytes(job) > p.MaxJobBytes) {
			return nil, false
		}
		if !added {
			return job, true
		}
	}
}

// keyRange is the record key and seq extent of a set of objects.
type keyRange struct {
	lo, hi string
	maxSeq uint64
	empty  bool
}

func rangeOf(objs []contract.ObjectEntry) keyRange {
	r := keyRange{empty: true}
	for _, o := range objs {
		if o.DocCount == 0 {
			continue
		}
		if r.empty {
			r = keyRange{lo: o.MinRecordKey, hi: o.MaxRecordKey, maxSeq: o.MaxSeq}
			continue
		}
		r.lo, r.hi = min(r.lo, o.MinRecordKey), max(r.hi, o.MaxRecordKey)
		r.maxSeq = max(r.maxSeq, o.MaxSeq)
	}
	return r
}

// blocks reports whether o, outside a job with range r, could hold an older
// version of a key in r: it overlaps r and is not strictly newer than r.
func (r keyRange) blocks(o contract.ObjectEntry) bool {
	return !r.empty && o.DocCount > 0 && o.MinRecordKey <= r.hi && o.MaxRecordKey >= r.lo && o.MinSeq <= r.maxSeq
}

// dropDeletesSafe implements Job.DropDeletes over the full object set.
func dropDeletesSafe(inputs, objs []contract.ObjectEntry) bool {
	in := make(map[string]bool, len(inputs))
	for _, o := range inputs {
		in[o.Key] = true
	}
	r := rangeOf(inputs)
	for _, o := range objs {
		if !in[o.Key] && r.blocks(o) {
			return false
		}
	}
	return true
}

// deepestStack returns the objects covering the record key covered by the
// most objects (the smallest such key on a tie), oldest first.
func deepestStack(objs []contract.ObjectEntry) []contract.ObjectEntry {
	var best []contract.ObjectEntry
	bestKey := ""
	for _, o := range objs {
		if o.DocCount == 0 {
			continue
		}
		var stack []contract.ObjectEntry
		for _, s := range objs {
			if s.DocCount > 0 && s.MinRecordKey <= o.MinRecordKey && o.MinRecordKey <= s.MaxRecordKey {
				stack = append(stack, s)
			}
		}
		if len(stack) > len(best) || (len(stack) == len(best) && o.MinRecordKey < bestKey) {
			best, bestKey = stack, o.MinRecordKey
		}
	}
	return best
}

// bounded takes objects in order while the job stays within MaxJobInputs and
// MaxJobBytes, but always at least atLeast of them.
func bounded(objs []contract.ObjectEntry, p Policy, atLeast int) []contract.ObjectEntry {
	var n int
	var size int64
	for _, o := range objs {
		if n >= p.MaxJobInputs || (n >= atLeast && o.Size > p.MaxJobBytes-size) {
			break
		}
		n++
		size = saturatingAdd(size, o.Size)
	}
	return objs[:n]
}

func newJob(tier string, inputs []contract.ObjectEntry, level int, reason string, debt float64) Job {
	in := slices.Clone(inputs)
	slices.SortFunc(in, byKey)
	return Job{Tier: tier, Inputs: in, OutputLevel: level, Reason: reason, Debt: debt}
}

// admit keeps, in priority order, each job whose (tier, output level) has no
// job yet and whose inputs are all unclaimed.
func admit(cands []Job) []Job {
	type slot struct {
		tier  string
		level int
	}
	used := map[slot]bool{}
	claimed := map[string]bool{}
	var out []Job
next:
	for _, j := range cands {
		s := slot{j.Tier, j.OutputLevel}
		if used[s] {
			continue
		}
		for _, o := range j.Inputs {
			if claimed[o.Key] {
				continue next
			}
		}
		used[s] = true
		for _, o := range j.Inputs {
			claimed[o.Key] = true
		}
		out = append(out, j)
	}
	return out
}

var reasonRank = map[string]int{ReasonDeleteDensity: 0, ReasonFanOut: 1, ReasonFragmentation: 2}

// byPriority orders jobs by debt (highest first), then by a fixed total
// order so that ties are deterministic.
func byPriority(a, b Job) int {
	return cmp.Or(
		cmp.Compare(b.Debt, a.Debt),
		cmp.Compare(reasonRank[a.Reason], reasonRank[b.Reason]),
		cmp.Compare(a.Tier, b.Tier),
		cmp.Compare(a.OutputLevel, b.OutputLevel),
		cmp.Compare(a.Inputs[0].Key, b.Inputs[0].Key),
	)
}

func byKey(a, b contract.ObjectEntry) int { return cmp.Compare(a.Key, b.Key) }

func oldestFirst(a, b contract.ObjectEntry) int {
	return cmp.Or(cmp.Compare(a.MaxSeq, b.MaxSeq), cmp.Compare(a.MinSeq, b.MinSeq), byKey(a, b))
}

func byRecordKey(a, b contract.ObjectEntry) int {
	return cmp.Or(cmp.Compare(a.MinRecordKey, b.MinRecordKey), cmp.Compare(a.MaxRecordKey, b.MaxRecordKey), byKey(a, b))
}

func density(o contract.ObjectEntry) float64 {
	if o.DocCount <= 0 {
		return 0
	}
	return float64(o.DeleteCount) / float64(o.DocCount)
}

func ratio(n, d int) float64 { return float64(n) / float64(d) }

func sumBytes(objs []contract.ObjectEntry) int64 {
	var n int64
	for _, o := range objs {
		n = saturatingAdd(n, o.Size)
	}
	return n
}

// saturatingAdd adds two sizes (each >= 0, as the contract validates)
// without wrapping past math.MaxInt64.
func saturatingAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// LevelDebt is the debt of one level, derived from the manifest summary.
type LevelDebt struct {
	Level         int
	Objects       int64
	Bytes         int64
	FanOut        float64 // objects (top level: estimated sorted runs) / MergeFactor; >= 1 is due
	DeleteDensity float64 // delete_count / doc_count
	Fragmentation float64 // objects / MergeFactor when the average object is fragmented, else 0
}

// DebtReport is a collection's compaction debt as the observer sees it from
// the manifest root alone. It approximates what Plan would find in the
// parts: the summary has no per-object key ranges or sizes.
type DebtReport struct {
	Levels        []LevelDebt
	FanOut        float64 // the largest level fan-out ratio
	DeleteDensity float64 // collection-wide delete_count / doc_count
	// Score sums, over levels, every ratio that reached its trigger (fan-out,
	// fragmentation, delete density / threshold). Zero: nothing is due.
	Score float64
}

// Due reports whether any level reached a trigger.
func (d DebtReport) Due() bool { return d.Score > 0 }

// PlanLevels says which levels a planner must load for this debt: the
// levels whose fan-out or fragmentation is due (empty when nothing is due:
// load nothing), or nil (everything) when delete density is due somewhere,
// since a delete-density plan needs the full object set.
func (d DebtReport) PlanLevels(policy Policy) []int {
	p := policy.normalized()
	levels := []int{}
	for _, l := range d.Levels {
		if p.DeleteDensityThreshold > 0 && l.DeleteDensity >= p.DeleteDensityThreshold {
			return nil
		}
		if l.FanOut >= 1 || l.Fragmentation >= 1 {
			levels = append(levels, l.Level)
		}
	}
	return levels
}

// Debt computes the debt report of a manifest summary under policy.
func Debt(summary contract.Summary, policy Policy) DebtReport {
	p := policy.normalized()
	levels := slices.Clone(summary.Levels)
	slices.SortFunc(levels, func(a, b contract.LevelSummary) int { return cmp.Compare(a.Level, b.Level) })
	r := DebtReport{DeleteDensity: fraction(summary.DeleteCount, summary.DocCount)}
	for _, l := range levels {
		ld := levelDebt(l, p)
		r.Levels = append(r.Levels, ld)
		r.FanOut = max(r.FanOut, ld.FanOut)
		r.Score += due(ld.FanOut, 1) + due(ld.Fragmentation, 1)
		if p.DeleteDensityThreshold > 0 {
			r.Score += due(ld.DeleteDensity/p.DeleteDensityThreshold, 1)
		}
	}
	return r
}

func levelDebt(l contract.LevelSummary, p Policy) LevelDebt {
	ld := LevelDebt{Level: l.Level, Objects: l.Objects, Bytes: l.Bytes, DeleteDensity: fraction(l.DeleteCount, l.DocCount)}
	if l.Objects == 0 {
		return ld
	}
	runs := float64(l.Objects)
	if l.Level >= p.MaxLevel {
		// A fully compacted top level needs ceil(bytes/target) disjoint
		// objects; objects beyond that are (at most) extra sorted runs.
		full := math.Ceil(float64(l.Bytes) / float64(p.TargetObjectBytes))
		runs = max(1, float64(l.Objects)-full+1)
	}
	ld.FanOut = runs / float64(p.MergeFactor)
	avg := float64(l.Bytes) / float64(l.Objects)
	if l.Level >= 1 && p.FragmentationThreshold > 0 && l.Objects >= int64(p.MergeFactor) && avg < p.FragmentationThreshold*float64(p.TargetObjectBytes) {
		ld.Fragmentation = float64(l.Objects) / float64(p.MergeFactor)
	}
	return ld
}

func due(ratio, trigger float64) float64 {
	if ratio >= trigger {
		return ratio
	}
	return 0
}

func fraction(n, d int64) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / float64(d)
}
