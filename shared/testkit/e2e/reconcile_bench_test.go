package e2e

// Reconciliation at fleet size (issue 12 item 5), on the embedded stack
// with the production wiring: the scheduled event fans the catalog out in
// chunks, each chunk into one request per collection, and the reconcile
// queue's event source mapping (four concurrent pollers, as the embedded
// stack maps every queue) delivers them to the observer function. Only
// the reconcile queue is delivered: the tasks a pass enqueues wait in
// their queues (this measures reconciliation, not the work it schedules).
//
// Metrics per pass (op):
//
//	wall-s                  scheduled event to the reconcile queue drained
//	aws-calls/op            the functions' AWS requests (stand-ins excluded)
//	aws-calls/collection    the same per collection
//	invocations/op          observer invocations (the schedule, chunks, batches)
//	max-invocation-ms       the longest single invocation
//	max-invocation-%timeout that, as a percentage of the observer's timeout
//
// cmd/benchreport checks max-invocation-%timeout <= 10 at 10,000
// collections: no invocation comes near its timeout however large the fleet
// (the schedule sends n/250 chunk messages, a chunk 25 batches, a batch
// reconciles at most 10 collections). The first pass observes every head
// for the first time; later passes find them observed.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/resources"
)

var reconcileSizes = []int{10_000}

func BenchmarkReconcileFanOut(b *testing.B) {
	for _, n := range reconcileSizes {
		b.Run(fmt.Sprintf("collections=%d", n), func(b *testing.B) {
			ctx := context.Background()
			// The deployed visibility timeout (not the embedded stack's 2 s
			// default): a batch still running on a loaded machine is not
			// handed to a second poller.
			rq, _ := resources.Default("bcc").Queue(resources.QueueReconcile)
			env, err := localenv.Start(ctx, localenv.Options{HoldS3Events: true, NoDelivery: true, VisibilityTimeout: rq.VisibilityTimeout,
				Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				b.Fatal(err)
			}
			defer env.Close()
			began := time.Now()
			if err := createConcurrently(ctx, env, n, 4); err != nil {
				b.Fatal(err)
			}
			env.Stack.TakeS3Events()
			b.Logf("fixture: %d collections created in %s", n, time.Since(began).Round(time.Millisecond))
			q, _ := env.Prov.Def.Queue(resources.QueueReconcile)
			env.Stack.MapQueue(localaws.Mapping{QueueURL: env.Prov.QueueURLs[resources.QueueReconcile], Function: resources.FnObserver,
				BatchSize: q.BatchSize, MaxConcurrency: min(q.MaxConcurrency, 4)})

			var mu sync.Mutex
			var longest, timeout time.Duration
			longestBy := map[string]time.Duration{}
			var invocations, failed atomic.Int64
			env.Stack.OnInvoke(func(inv localaws.Invocation) {
				if inv.Function != resources.FnObserver {
					return
				}
				invocations.Add(1)
				if inv.Err != nil {
					failed.Add(1)
				}
				kind := "batch"
				var r handler.ObserverResponse
				if json.Unmarshal(inv.Response, &r) == nil && r.Reconcile != nil && r.Reconcile.Requested > 0 {
					kind = "fan-out"
					if r.Reconcile.Requested < contract.ReconcileChunkMax && r.Reconcile.Collections == 0 && !strings.Contains(string(inv.Payload), "aws:sqs") {
						kind = "schedule"
					}
				}
				if strings.Contains(string(inv.Payload), "Scheduled Event") {
					kind = "schedule"
				}
				mu.Lock()
				longest, timeout = max(longest, inv.Duration), inv.Timeout
				longestBy[kind] = max(longestBy[kind], inv.Duration)
				mu.Unlock()
			})
			var wall time.Duration
			calls := 0
			b.ResetTimer()
			for range b.N {
				before := env.Stack.Counter().Snapshot()
				start := time.Now()
				if _, err := env.Stack.Invoke(ctx, resources.FnObserver, []byte(`{"source":"aws.events","detail-type":"Scheduled Event"}`)); err != nil {
					b.Fatal(err)
				}
				if err := env.Settle(ctx, 30*time.Minute); err != nil {
					b.Fatal(err)
				}
				wall += time.Since(start)
				calls += localaws.Total(env.Stack.Counter().Since(before))
			}
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d observer invocations failed", f)
			}
			if d, dl := queueDepth(b, env, resources.QueueReconcile), dlqDepth(b, env, resources.QueueReconcile); d+dl != 0 {
				time.Sleep(3 * time.Second)
				b.Fatalf("reconcile queue holds %d and its DLQ %d messages after the pass (after 3s: %d)", d, dl, queueDepth(b, env, resources.QueueReconcile))
			}
			ops := float64(b.N)
			b.ReportMetric(wall.Seconds()/ops, "wall-s")
			b.ReportMetric(float64(calls)/ops, "aws-calls/op")
			b.ReportMetric(float64(calls)/ops/float64(n), "aws-calls/collection")
			b.ReportMetric(float64(invocations.Load())/ops, "invocations/op")
			b.ReportMetric(float64(longest.Milliseconds()), "max-invocation-ms")
			b.ReportMetric(100*longest.Seconds()/timeout.Seconds(), "max-invocation-%timeout")
			b.Logf("longest invocation by kind: %v", longestBy)
		})
	}
}

// createConcurrently creates n collections r000000... with workers
// concurrent creators.
func createConcurrently(ctx context.Context, env *localenv.Env, n, workers int) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					errs <- nil
					return
				}
				if err := env.Workload.Create(ctx, fmt.Sprintf("r%06d", i), contract.Lifecycle{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
