package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/lineage"
)

// WriteAmp is a workload's compaction write amplification (issue 26):
// bytes written by compaction merges — every merge, the dropped ones too
// (compaction.MergeBytesWritten, counted when the merge wrote them) — per
// byte appended, per output level, against the policy's ideal
// (compact.IdealWrites: every job planned right after each commit, none
// dropped). Also the waste and the level-0 debt figures of the same run.
type WriteAmp struct {
	Collections   int   `json:"collections"`
	Commits       int   `json:"commits"`
	AppendedBytes int64 `json:"appended_bytes"`
	// MergeBytesWritten by output level ("1", "2", ...), and their total.
	MergeBytesWritten map[string]int64 `json:"merge_bytes_written_by_level"`
	MergeBytes        int64            `json:"merge_bytes_written"`
	// PerAppendedByte is MergeBytes / AppendedBytes; PerLevel the same
	// per output level.
	PerAppendedByte float64            `json:"per_appended_byte"`
	PerLevel        map[string]float64 `json:"per_appended_byte_by_level"`
	// Ideal and IdealPerLevel are the policy's ideal per appended byte;
	// VsIdeal is PerAppendedByte / Ideal (goal: at most 1.3).
	Ideal         float64            `json:"ideal_per_appended_byte"`
	IdealPerLevel map[string]float64 `json:"ideal_per_appended_byte_by_level"`
	VsIdeal       float64            `json:"vs_ideal"`
	// Merges run, and those whose result was dropped (stale at the
	// executor or the handoff, refused by the publisher, a delete gain,
	// expired, stale facts).
	Merges        int `json:"merges"`
	MergesDropped int `json:"merges_dropped"`
	// DroppedBy: the dropped merges by the metric that counted them (and
	// the publisher's refusals among them by clause).
	DroppedBy  map[string]int `json:"merges_dropped_by,omitempty"`
	DroppedPct float64        `json:"merges_dropped_pct"`
	// Cutovers in the collections' lineages over the run, and commits
	// per cutover (goal: at most 2 x merge_factor).
	Cutovers          int     `json:"cutovers"`
	CommitsPerCutover float64 `json:"commits_per_cutover"`
	// MaxLevel0Objects is the most level-0 objects any committed head of
	// the run held (the level-0 debt a reader pays).
	MaxLevel0Objects int64 `json:"max_level0_objects"`
	// RebasedCutovers: cutovers the publisher applied on a head newer
	// than their base after its conflict check (handoff.CutoversRebased).
	RebasedCutovers int `json:"rebased_cutovers"`
}

// Heads is each collection's head version before a measured run (0 or
// absent: measured from version 1).
type Heads map[string]uint64

// MeasureHeads reads the current head versions of collections.
func MeasureHeads(ctx context.Context, lin *lineage.Reader, collections []string) (Heads, error) {
	h := Heads{}
	for _, c := range collections {
		head, err := lin.Head(ctx, c)
		if err != nil {
			return nil, err
		}
		h[c] = head.Version
	}
	return h, nil
}

// MeasureWriteAmp measures collections from their versions in from to
// their heads, with metrics the summed EMF counters the functions emitted
// over the same run ("function.Metric|Dim=Value", as sumEMF sums them).
// The lineage must still hold every version of the run (measure before
// GC reclaims the superseded roots).
func MeasureWriteAmp(ctx context.Context, lin *lineage.Reader, p compact.Policy, collections []string, from Heads, metrics map[string]float64) (WriteAmp, error) {
	wa := WriteAmp{Collections: len(collections), MergeBytesWritten: map[string]int64{}, PerLevel: map[string]float64{}, IdealPerLevel: map[string]float64{}}
	ideal := map[int]int64{}
	for _, c := range collections {
		floor := max(from[c], 1)
		walk, err := lin.WalkFrom(ctx, c, floor)
		if err != nil {
			return wa, fmt.Errorf("write amplification of %s: %w", c, err)
		}
		if last := walk.Roots[len(walk.Roots)-1]; last.Version != floor {
			return wa, fmt.Errorf("write amplification of %s: the lineage no longer holds v%d (oldest v%d)", c, floor, last.Version)
		}
		var start, appends []contract.ObjectEntry
		base := walk.Roots[len(walk.Roots)-1]
		if err := lin.Each(ctx, &base, nil, func(o contract.ObjectEntry) error { start = append(start, o); return nil }); err != nil {
			return wa, err
		}
		for i := len(walk.Roots) - 1; i >= 0; i-- {
			m := walk.Roots[i]
			for _, l := range m.Summary.Levels {
				if l.Level == 0 {
					wa.MaxLevel0Objects = max(wa.MaxLevel0Objects, l.Objects)
				}
			}
			if m.Version == floor {
				continue
			}
			switch m.Origin.Kind {
			case contract.OriginAppend:
				wa.Commits++
				if err := lin.EachChange(ctx, &m, contract.ChangeAdded, func(o contract.ObjectEntry) error {
					wa.AppendedBytes += o.Size
					appends = append(appends, o)
					return nil
				}); err != nil {
					return wa, err
				}
			case contract.OriginCutover:
				wa.Cutovers++
			}
		}
		for l, b := range compact.IdealWrites(p, start, appends) {
			ideal[l] += b
		}
	}
	total := func(name string) int {
		var t float64
		for k, v := range metrics {
			if k == name || strings.HasPrefix(k, name+"|") {
				t += v
			}
		}
		return int(t)
	}
	for k, v := range metrics {
		if lv, ok := strings.CutPrefix(k, "compaction.MergeBytesWritten|Level="); ok {
			wa.MergeBytesWritten[lv] += int64(v)
			wa.MergeBytes += int64(v)
		}
	}
	wa.Merges = total("compaction.CompactionsRun")
	wa.DroppedBy = map[string]int{}
	for _, name := range []string{"compaction.StaleResultsDropped|Kind=compaction", "handoff.StaleResultsDropped|Kind=compaction", "handoff.RejectedDeleteGain|Kind=compaction",
		"handoff.StaleFactsDropped|Kind=compaction", "handoff.ExpiredResultsDropped|Kind=compaction", "handoff.CutoversRejected|Kind=compaction"} {
		if n := total(name); n > 0 {
			wa.DroppedBy[name] = n
			wa.MergesDropped += n
		}
	}
	for k, v := range metrics {
		if cl, ok := strings.CutPrefix(k, "handoff.CutoversRefusedByCheck|Clause="); ok {
			wa.DroppedBy["refused by the publisher's check: "+cl] += int(v)
		}
	}
	wa.RebasedCutovers = total("handoff.CutoversRebased")
	if wa.Merges > 0 {
		wa.DroppedPct = 100 * float64(wa.MergesDropped) / float64(wa.Merges)
	}
	if wa.Cutovers > 0 {
		wa.CommitsPerCutover = float64(wa.Commits) / float64(wa.Cutovers)
	}
	if wa.AppendedBytes > 0 {
		per := func(b int64) float64 { return float64(b) / float64(wa.AppendedBytes) }
		wa.PerAppendedByte = per(wa.MergeBytes)
		for lv, b := range wa.MergeBytesWritten {
			wa.PerLevel[lv] = per(b)
		}
		var it int64
		for l, b := range ideal {
			wa.IdealPerLevel[strconv.Itoa(l)] = per(b)
			it += b
		}
		wa.Ideal = per(it)
		if wa.Ideal > 0 {
			wa.VsIdeal = wa.PerAppendedByte / wa.Ideal
		}
	}
	return wa, nil
}

// String is the figures on one line, levels in order.
func (wa WriteAmp) String() string {
	var levels []string
	for _, lv := range slices.Sorted(maps.Keys(wa.PerLevel)) {
		levels = append(levels, fmt.Sprintf("L%s %.2f (ideal %.2f)", lv, wa.PerLevel[lv], wa.IdealPerLevel[lv]))
	}
	return fmt.Sprintf("%d commits, %d cutovers (%.1f commits per cutover), max %d level-0 objects; %d of %d merges dropped (%.1f%%), %d rebased by the publisher; "+
		"compaction wrote %.2f bytes per appended byte (ideal %.2f, %.2fx): %s",
		wa.Commits, wa.Cutovers, wa.CommitsPerCutover, wa.MaxLevel0Objects, wa.MergesDropped, wa.Merges, wa.DroppedPct, wa.RebasedCutovers,
		wa.PerAppendedByte, wa.Ideal, wa.VsIdeal, strings.Join(levels, ", ")) + dropped(wa.DroppedBy)
}

// SumMetrics sums the counters of EMF lines as "function.Metric|Dim=Value"
// (what MeasureWriteAmp reads).
func SumMetrics(lines string) map[string]float64 {
	m, _ := sumEMF(lines)
	return m
}

// Report reports the figures as benchmark metrics.
func (wa WriteAmp) Report(report func(v float64, unit string)) {
	report(wa.PerAppendedByte, "write-amp")
	report(wa.Ideal, "write-amp-ideal")
	report(wa.VsIdeal, "write-amp-vs-ideal")
	report(wa.DroppedPct, "dropped-merge-%")
	report(wa.CommitsPerCutover, "commits/cutover")
	report(float64(wa.MaxLevel0Objects), "max-l0-objects")
	report(float64(wa.Commits), "commits")
	report(float64(wa.RebasedCutovers), "rebased-cutovers")
	for lv, v := range wa.PerLevel {
		report(v, "write-amp-L"+lv)
	}
}

func dropped(by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
	}
	return "; dropped: " + strings.Join(parts, ", ")
}
