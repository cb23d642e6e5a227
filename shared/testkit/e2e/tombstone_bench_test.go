package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/policy"
)

// BenchmarkTombstoneCleanupMillion cleans a dropped collection of
// 1,000,000 objects (a bulk load: 245 head parts, 245 change parts) on the
// embedded stack in bounded runs of at most 200 delete calls, one of which
// dies mid-way (its context ends) and saves nothing; the next run resumes
// from the stored cursor. The objects themselves are not uploaded (a
// delete of a missing key is confirmed, as on S3): what is measured is the
// workflow's runs, AWS calls and time. Reports runs, delete calls, S3 and
// DynamoDB calls, and the wall time per cleanup.
func BenchmarkTombstoneCleanupMillion(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := startGC(b, func(p *policy.Policy) { p.GC.TombstoneMaxCalls = 200 })
		c := "dropped"
		e.create(c, contract.Lifecycle{})
		syn := publisher.Synthetic{Collection: c, Objects: n}
		if _, err := e.Publisher.BulkLoad(e.ctx, c, n, syn.Object); err != nil {
			b.Fatal(err)
		}
		facts, err := dropSeen(b, e.Env, e.ctx, c, 0)
		if err != nil {
			b.Fatal(err)
		}
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		head, _ := e.Lineage.Head(e.ctx, c)
		task := contract.NewTask(contract.KindTombstoneCleanup, c, head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
		var kill context.CancelFunc
		crashed := false
		ex, _ := e.executor(guard.All(), func(d gc.Deleter) gc.Deleter {
			return deleterFunc(func(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
				if !crashed && strings.Contains(b.Keys()[0], "/manifests/") {
					crashed = true
					kill()
					return gc.DeleteResult{}, ctx.Err()
				}
				return d.DeleteProven(ctx, b)
			})
		})
		before := e.Stack.Counter().Snapshot()
		b.StartTimer()
		start := time.Now()
		runs, maxCalls, longest := 0, 0, time.Duration(0)
		var rep gc.TombstoneReport
		for runs < 1000 {
			var ctx context.Context
			ctx, kill = context.WithCancel(e.ctx)
			t0 := time.Now()
			rep, err = ex.RunTombstone(ctx, task)
			kill()
			runs++
			longest = max(longest, time.Since(t0))
			maxCalls = max(maxCalls, rep.Calls)
			if err != nil && !errors.Is(err, context.Canceled) {
				b.Fatalf("run %d: %v", runs, err)
			}
			if err == nil && rep.Outcome == gc.TombCompleted {
				break
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		if rep.Outcome != gc.TombCompleted || !crashed {
			b.Fatalf("after %d runs: %+v (crashed %v)", runs, rep.Outcome, crashed)
		}
		if ls, _ := e.Bucket.List(e.ctx, contract.CollectionPrefix(c)); len(ls) > 0 {
			b.Fatalf("%d keys remain", len(ls))
		}
		calls := e.Stack.Counter().Since(before)
		s3, ddb := 0, 0
		for k, v := range calls {
			switch {
			case strings.HasPrefix(k, "s3:"):
				s3 += v
			case strings.HasPrefix(k, "dynamodb:"):
				ddb += v
			}
		}
		b.ReportMetric(float64(runs), "runs")
		b.ReportMetric(float64(maxCalls), "max_delete_calls/run")
		b.ReportMetric(float64(rep.Progress.DeleteCalls), "delete_calls")
		b.ReportMetric(float64(s3), "s3_calls")
		b.ReportMetric(float64(ddb), "dynamodb_calls")
		b.ReportMetric(longest.Seconds(), "longest_run_s")
		b.ReportMetric(elapsed.Seconds(), "cleanup_s")
		_ = e.Close()
	}
}
