package demo

import (
	"bufio"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// CollectionSummary is one collection's line in the summary.
type CollectionSummary struct {
	HeadsObserved int            `json:"heads_observed"`
	Duplicates    int            `json:"duplicate_events_absorbed"`
	Stale         int            `json:"stale_events_absorbed"`
	Tasks         map[string]int `json:"tasks_enqueued"`
	FinalVersion  uint64         `json:"final_version"`
	Appends       int            `json:"appends_observed"`
	Cutovers      int            `json:"cutovers_observed"`
	ObjectsAdded  int            `json:"objects_appended"`
	ObjectsAfter  int64          `json:"objects_final"`
	KeysVerified  int            `json:"keys_verified"`
}

// Summary is the demo's result (printed and written as JSON).
type Summary struct {
	Collections      int                `json:"collections"`
	CommitsPerColl   int                `json:"commits_per_collection"`
	Invocations      map[string]int     `json:"invocations"`
	InvocationErrors map[string]int     `json:"invocation_errors"`
	Metrics          map[string]float64 `json:"metrics"`
	// ClockSpansMs are the functions' duration metrics (maximum per
	// name) on the demo's clock, which jumps forward hours to pass token
	// lifetimes and retention windows: they measure those jumps, not
	// latency, and are kept apart from Metrics.
	ClockSpansMs map[string]float64 `json:"clock_spans_ms"`
	// HeadsAdvancedByReconcile: heads first seen by reconciliation (a
	// lost or late notification); ReconcileHeadsUnchanged: reconciliation
	// looks at heads already observed (not duplicate events).
	HeadsAdvancedByReconcile int `json:"heads_advanced_by_reconcile"`
	ReconcileHeadsUnchanged  int `json:"reconcile_heads_unchanged"`
	// Cost is the cost model: requests by API and GB-seconds per
	// function and per unit of work, priced with PriceTable.
	Cost CostModel `json:"cost_model"`
	// Rewrites are issue 16 item 1's figures: rewrite tasks per cutover
	// and merges dropped as stale.
	Rewrites RewriteFigures `json:"rewrites"`
	// WriteAmp is the main job's write amplification (the moderate
	// workload), measured once its commits settled.
	WriteAmp *WriteAmp `json:"write_amplification,omitempty"`
	// Hot is the hot phase's figures (nil: not run).
	Hot *HotFigures `json:"hot_workload,omitempty"`
	// Dashboard is what the deployed dashboard showed, drawn from this
	// run's metrics.
	Dashboard      DashboardFigures              `json:"dashboard"`
	PerCollection  map[string]*CollectionSummary `json:"per_collection"`
	TasksByKind    map[string]int                `json:"tasks_enqueued_by_kind"`
	AWSCalls       map[string]int                `json:"aws_calls"`
	Verified       bool                          `json:"verified"`
	Problems       []string                      `json:"problems,omitempty"`
	ElapsedSeconds float64                       `json:"elapsed_seconds"`
}

// RewriteFigures measure wasted rewrite work (issue 16 item 1; goals:
// tasks per cutover <= 1.5, stale <= 5%).
type RewriteFigures struct {
	// TasksEnqueued: compaction and lifecycle transition tasks enqueued
	// by the observer (head events and reconciliation).
	TasksEnqueued int `json:"tasks_enqueued"`
	// Cutovers: rewrite results the publisher accepted.
	Cutovers int `json:"cutovers"`
	// TasksPerCutover is TasksEnqueued / Cutovers.
	TasksPerCutover float64 `json:"tasks_per_cutover"`
	// Merges: rewrites that read and wrote bytes (compactions and
	// transitions run).
	Merges int `json:"merges"`
	// MergesDroppedStale: merges whose result was dropped because the
	// head moved from their base (by the executor before reporting, by
	// the handoff as stale or as a delete gain): rule 2, never rebased.
	MergesDroppedStale int     `json:"merges_dropped_stale"`
	StalePct           float64 `json:"merges_dropped_stale_pct"`
	// MinCutoversPerCollection: the least-compacted collection's cutovers
	// (does every collection still compact?).
	MinCutoversPerCollection int `json:"min_cutovers_per_collection"`
	// QuietWaits: rewrite tasks that waited for a still head before
	// starting (compaction.RewriteStartDeferred, every Kind).
	QuietWaits int `json:"quiet_waits"`
}

// rewriteFigures derives the rewrite figures from the summed metrics and
// the enqueued tasks.
func rewriteFigures(s *Summary) RewriteFigures {
	m := func(name string) int { return int(metricTotal(s.Metrics, name)) }
	f := RewriteFigures{
		TasksEnqueued:      s.TasksByKind["compaction"] + s.TasksByKind["lifecycle_transition"],
		Cutovers:           m("handoff.CutoversAccepted"),
		Merges:             m("compaction.CompactionsRun") + m("compaction.LifecycleTransitions"),
		MergesDroppedStale: m("compaction.StaleResultsDropped") + m("handoff.StaleResultsDropped") + m("handoff.RejectedDeleteGain"),
		QuietWaits:         m("compaction.RewriteStartDeferred"),
	}
	if f.Cutovers > 0 {
		f.TasksPerCutover = float64(f.TasksEnqueued) / float64(f.Cutovers)
	}
	if f.Merges > 0 {
		f.StalePct = 100 * float64(f.MergesDroppedStale) / float64(f.Merges)
	}
	first := true
	for _, cs := range s.PerCollection {
		if first || cs.Cutovers < f.MinCutoversPerCollection {
			f.MinCutoversPerCollection, first = cs.Cutovers, false
		}
	}
	return f
}

// metricTotal is a metric summed over its dimension values
// ("Function.Metric" and every "Function.Metric|Dim=Value").
func metricTotal(m map[string]float64, name string) float64 {
	var t float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"|") {
			t += v
		}
	}
	return t
}

// recorder collects invocations through the stack's hook.
type recorder struct {
	mu  sync.Mutex
	sum *Summary
	// hotTasks, once non-nil, counts the rewrite tasks enqueued during the
	// hot phase, and nothing else is recorded (the summary's header and
	// tables are the main job's).
	hotTasks *int
}

func (r *recorder) coll(c string) *CollectionSummary {
	cs, ok := r.sum.PerCollection[c]
	if !ok {
		cs = &CollectionSummary{Tasks: map[string]int{}}
		r.sum.PerCollection[c] = cs
	}
	return cs
}

func (r *recorder) record(inv localaws.Invocation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hotTasks != nil {
		*r.hotTasks += rewriteTasks(inv)
		return
	}
	r.sum.Invocations[inv.Function]++
	if inv.Err != nil {
		r.sum.InvocationErrors[inv.Function]++
	}
	if inv.Function != resources.FnObserver || inv.Err != nil {
		return
	}
	var resp handler.ObserverResponse
	if err := json.Unmarshal(inv.Response, &resp); err != nil {
		return
	}
	for _, res := range resp.Results {
		if res.Collection == "" {
			continue
		}
		cs := r.coll(res.Collection)
		switch res.Outcome {
		case "advanced":
			cs.HeadsObserved++
			switch res.Origin {
			case "append":
				cs.Appends++
				cs.ObjectsAdded++ // the workload writes one segment per append
			case "cutover":
				cs.Cutovers++
			}
		case "duplicate":
			cs.Duplicates++
		case "stale":
			cs.Stale++
		}
		for _, k := range res.Tasks {
			cs.Tasks[k]++
			r.sum.TasksByKind[k]++
		}
	}
	if resp.Reconcile != nil {
		for k, n := range resp.Reconcile.Enqueued {
			r.sum.TasksByKind[string(k)] += n
		}
		r.sum.HeadsAdvancedByReconcile += resp.Reconcile.Advanced
		r.sum.ReconcileHeadsUnchanged += resp.Reconcile.Unchanged
	}
}

// rewriteTasks counts the rewrite tasks an observer invocation enqueued.
func rewriteTasks(inv localaws.Invocation) int {
	var resp handler.ObserverResponse
	if inv.Function != resources.FnObserver || inv.Err != nil || json.Unmarshal(inv.Response, &resp) != nil {
		return 0
	}
	n := 0
	for _, res := range resp.Results {
		for _, k := range res.Tasks {
			if k == "compaction" || k == "lifecycle_transition" {
				n++
			}
		}
	}
	if resp.Reconcile != nil {
		n += resp.Reconcile.Enqueued["compaction"] + resp.Reconcile.Enqueued["lifecycle_transition"]
	}
	return n
}

// sumEMF adds every counter of every EMF line as
// "Function.Metric[|Dim=Value]"; durations go to spans (the maximum per
// "Function.Metric.max").
func sumEMF(lines string) (out, spans map[string]float64) {
	out, spans = map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(lines))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue
		}
		fn, _ := line["Function"].(string)
		aws, _ := line["_aws"].(map[string]any)
		cwm, _ := aws["CloudWatchMetrics"].([]any)
		if len(cwm) == 0 {
			continue
		}
		def, _ := cwm[0].(map[string]any)
		dims, _ := def["Dimensions"].([]any)
		suffix := ""
		if len(dims) > 0 {
			for _, d := range dims[len(dims)-1].([]any) {
				if name := d.(string); name != metrics.DimFunction && name != metrics.DimDeployment {
					suffix = "|" + name + "=" + toString(line[name])
				}
			}
		}
		metricsDefs, _ := def["Metrics"].([]any)
		for _, m := range metricsDefs {
			name := m.(map[string]any)["Name"].(string)
			switch v := line[name].(type) {
			case float64:
				out[fn+"."+name+suffix] += v
			case []any: // a duration's observations: keep the maximum, apart
				for _, x := range v {
					if f, ok := x.(float64); ok {
						spans[fn+"."+name+".max"] = max(spans[fn+"."+name+".max"], f)
					}
				}
			}
		}
	}
	return out, spans
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

func sortedKeys[M ~map[string]V, V any](m M) []string { return slices.Sorted(maps.Keys(m)) }

// Totals are the header's figures: heads observed (from head events and
// by reconciliation), duplicate and stale head events absorbed. They are
// the observer's HeadsObserved, DuplicateEventsAbsorbed and
// StaleEventsAbsorbed metrics, counted from the invocations' answers.
func (s *Summary) Totals() (heads, dups, stale int) {
	for _, cs := range s.PerCollection {
		heads, dups, stale = heads+cs.HeadsObserved, dups+cs.Duplicates, stale+cs.Stale
	}
	return heads + s.HeadsAdvancedByReconcile, dups, stale
}
