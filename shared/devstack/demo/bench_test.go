package demo

import (
	"context"
	"io"
	"testing"
)

// BenchmarkDemoWorkload is `make demo`'s job (20 collections x 10 commits
// on the embedded stack, every queue delivered) measured for issue 16
// item 1, over all b.N runs: rewrite tasks enqueued per cutover, merges
// dropped as stale and the least-compacted collection's cutovers
// (out/demo-summary.json "rewrites" has the same figures for one run).
func BenchmarkDemoWorkload(b *testing.B) {
	var tasks, cutovers, merges, stale int
	least := -1
	var wa WriteAmp
	for i := range b.N {
		sum, err := Run(context.Background(), Options{Collections: 20, Commits: 10, Parallel: 4, Seed: uint64(i + 1), Out: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		r := sum.Rewrites
		if sum.WriteAmp != nil {
			wa = *sum.WriteAmp
		}
		tasks, cutovers, merges, stale = tasks+r.TasksEnqueued, cutovers+r.Cutovers, merges+r.Merges, stale+r.MergesDroppedStale
		if least < 0 || r.MinCutoversPerCollection < least {
			least = r.MinCutoversPerCollection
		}
	}
	b.ReportMetric(float64(tasks)/float64(max(cutovers, 1)), "rewrite-tasks/cutover")
	b.ReportMetric(100*float64(stale)/float64(max(merges, 1)), "stale-merge-%")
	b.ReportMetric(float64(least), "min-cutovers/collection")
	b.ReportMetric(float64(cutovers)/float64(b.N), "cutovers")
	// Write amplification of the last run (issue 26; the moderate workload).
	wa.Report(b.ReportMetric)
}
