package e2e

// The hot workload of issue 16 item 1, on the embedded stack with every
// queue delivered: one collection commits every 100 ms while 99 others
// commit about every 2 s, for 8 s; then everything settles.
//
//	rewrite-tasks/cutover  rewrite tasks enqueued (observer and reconciliation) per cutover accepted
//	stale-merge-%          merges whose result was dropped because the head moved (executor before
//	                       reporting, handoff as stale or as a delete gain), of merges run
//	hot-cutovers           cutovers in the hot collection's lineage (does it still compact?)

import (
	"context"
	"encoding/json"
	"fmt"
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

func BenchmarkHotWorkload(b *testing.B) {
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		env, err := localenv.Start(ctx, localenv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		var rewrites atomic.Int64
		env.Stack.OnInvoke(func(inv localaws.Invocation) {
			if inv.Function != resources.FnObserver || inv.Err != nil {
				return
			}
			var r handler.ObserverResponse
			if json.Unmarshal(inv.Response, &r) != nil {
				return
			}
			for _, res := range r.Results {
				for _, k := range res.Tasks {
					if contract.TaskKind(k).Rewrites() {
						rewrites.Add(1)
					}
				}
			}
			if r.Reconcile != nil {
				rewrites.Add(int64(r.Reconcile.Enqueued[contract.KindCompaction] + r.Reconcile.Enqueued[contract.KindLifecycleTransition]))
			}
		})
		cold := make([]string, 99)
		for i := range cold {
			cold[i] = fmt.Sprintf("cold-%02d", i)
		}
		for _, c := range append([]string{"hot"}, cold...) {
			if err := env.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		const run = 8 * time.Second
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for end := time.Now().Add(run); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if _, err := env.Workload.Append(ctx, "hot", env.Workload.Random()); err != nil {
					b.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			i := 0
			for end := time.Now().Add(run); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if _, err := env.Workload.Append(ctx, cold[i%len(cold)], env.Workload.Random()); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		}()
		wg.Wait()
		if err := env.Settle(ctx, 5*time.Minute); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cutovers := cxMetric(env, "CutoversAccepted")
		merges := cxMetric(env, "CompactionsRun") + cxMetric(env, "LifecycleTransitions")
		w, err := env.Lineage.WalkFrom(ctx, "hot", 1)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rewrites.Load())/max(cutovers, 1), "rewrite-tasks/cutover")
		b.ReportMetric(100*(cxMetric(env, "StaleResultsDropped")+cxMetric(env, "RejectedDeleteGain"))/max(merges, 1), "stale-merge-%")
		b.ReportMetric(float64(len(cxCutovers(w.Roots))), "hot-cutovers")
		b.ReportMetric(cutovers, "cutovers")
		_ = env.Close()
	}
}
