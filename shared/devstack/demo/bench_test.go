package demo

import (
	"context"
	"io"
	"testing"
)

// BenchmarkDemoWorkload is `make demo`'s job (20 collections x 10 commits
// on the embedded stack, every queue delivered) measured for issue 16
// item 1: rewrite tasks enqueued per cutover, merges dropped as stale and
// the least-compacted collection's cutovers (out/demo-summary.json
// "rewrites" has the same figures for one run).
func BenchmarkDemoWorkload(b *testing.B) {
	for i := range b.N {
		sum, err := Run(context.Background(), Options{Collections: 20, Commits: 10, Parallel: 4, Seed: uint64(i + 1), Out: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		r := sum.Rewrites
		b.ReportMetric(r.TasksPerCutover, "rewrite-tasks/cutover")
		b.ReportMetric(r.StalePct, "stale-merge-%")
		b.ReportMetric(float64(r.MinCutoversPerCollection), "min-cutovers/collection")
		b.ReportMetric(float64(r.Cutovers), "cutovers")
	}
}
