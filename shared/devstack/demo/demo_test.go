package demo

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoRunsEndToEnd keeps `make demo` true: a smaller run of the same job
// must verify every key and leave every retained object in place, while
// compaction and GC actually did work.
func TestDemoRunsEndToEnd(t *testing.T) {
	var out bytes.Buffer
	sum, err := Run(context.Background(), Options{Collections: 3, Commits: 6, Parallel: 2, Seed: 7, Out: &out,
		JSONPath: filepath.Join(t.TempDir(), "summary.json"), Hot: time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !sum.Verified || sum.Metrics["handoff.CutoversAccepted|Kind=compaction"] == 0 || sum.Metrics["gc.ObjectsDeleted"] == 0 {
		t.Fatalf("demo did not exercise compaction and GC: %+v\n%s", sum.Metrics, out.String())
	}
	// Issue 16 item 7: the header's figures are the metrics' (a
	// reconciliation's look at an unchanged head is not a duplicate
	// event), and no duration on the jumping demo clock is listed as a
	// metric.
	heads, dups, stale := sum.Totals()
	if float64(heads) != sum.Metrics["observer.HeadsObserved"] || float64(dups) != sum.Metrics["observer.DuplicateEventsAbsorbed"] ||
		float64(stale) != sum.Metrics["observer.StaleEventsAbsorbed"] {
		t.Fatalf("summary says heads %d, duplicates %d, stale %d; metrics %+v", heads, dups, stale, sum.Metrics)
	}
	if float64(sum.ReconcileHeadsUnchanged) != sum.Metrics["observer.ReconcileHeadsUnchanged"] || sum.ReconcileHeadsUnchanged == 0 {
		t.Fatalf("reconciliation looked at %d unchanged heads; metric %v", sum.ReconcileHeadsUnchanged, sum.Metrics["observer.ReconcileHeadsUnchanged"])
	}
	for k := range sum.Metrics {
		if strings.HasSuffix(k, "Ms.max") || strings.HasSuffix(k, "Ms") {
			t.Fatalf("a duration on the demo's clock is listed as a metric: %s", k)
		}
	}
	// Issue 16 item 1: the rewrite figures are the metrics' (whatever
	// dimensions they carry).
	if r := sum.Rewrites; r.Cutovers == 0 || float64(r.Cutovers) != metricTotal(sum.Metrics, "handoff.CutoversAccepted") || r.Merges == 0 ||
		r.TasksEnqueued == 0 {
		t.Fatalf("rewrite figures %+v; metrics %+v", r, sum.Metrics)
	}
	// The hot phase ran and its collection compacted (verified with the rest).
	if h := sum.Hot; h == nil || h.HotCommits == 0 || h.HotCutovers == 0 || h.Cutovers == 0 {
		t.Fatalf("hot phase %+v", sum.Hot)
	}
	// Issue 16 item 5: the cost model attributes every function's AWS
	// requests (by its own signing identity) and prices them.
	for fn, fc := range sum.Cost.Functions {
		if fc.Invocations == 0 || len(fc.Requests) == 0 || fc.USD <= 0 {
			t.Fatalf("cost model: %s %+v", fn, fc)
		}
	}
	if len(sum.Cost.Functions) != 4 || sum.Cost.USDPerMillionCommits <= 0 || sum.Cost.PriceDate == "" || sum.Cost.PerUnit["observer"]["s3:GetObject"] == 0 {
		t.Fatalf("cost model %+v", sum.Cost)
	}
	if !strings.Contains(out.String(), "verified:") {
		t.Fatalf("no verification line:\n%s", out.String())
	}
}
