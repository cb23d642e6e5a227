package e2e

// Issue 16 item 6: 1,000 collections x 10 commits on the embedded stack,
// every queue delivered (the embedded event source mappings), commits made
// by 8 concurrent writers.
//
//	observe-lag-p50-ms / -p99-ms  head commit (the root's commit_ts) to its
//	                              observation (the enqueue follows in the
//	                              same invocation), from ObserveLagMs
//	wall-s                        first commit to everything settled
//	lost-debt                     collections whose observed state is not
//	                              their head after settling (must be 0)

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

func BenchmarkFleetCommits(b *testing.B) {
	const collections, commits, writers = 1000, 10, 8
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		env, err := localenv.Start(ctx, localenv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := createConcurrently(ctx, env, collections, 4); err != nil {
			b.Fatal(err)
		}
		if err := env.Settle(ctx, 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		env.Metrics.Reset()
		b.StartTimer()
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= collections*commits {
						return
					}
					if _, err := env.Workload.Append(ctx, fmt.Sprintf("r%06d", i%collections), env.Workload.Random()); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := env.Settle(ctx, 30*time.Minute); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		b.StopTimer()
		lags := emfDurations(env.Metrics.String(), "ObserveLagMs")
		slices.Sort(lags)
		state := awsio.NewObservedTable(env.Clients.Dynamo, env.Config.Table)
		lost := 0
		for i := range collections {
			c := fmt.Sprintf("r%06d", i)
			head, err := env.Lineage.Head(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			st, err := state.Get(ctx, c, head.Inc())
			if err != nil {
				b.Fatal(err)
			}
			if st.Version != head.Version {
				lost++
			}
		}
		b.ReportMetric(percentile(lags, 0.50), "observe-lag-p50-ms")
		b.ReportMetric(percentile(lags, 0.99), "observe-lag-p99-ms")
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(float64(lost), "lost-debt")
		b.ReportMetric(float64(len(lags)), "heads-observed")
		_ = env.Close()
	}
}

// emfDurations collects every value of a duration metric in EMF lines.
func emfDurations(lines, name string) []float64 {
	var out []float64
	for _, line := range strings.Split(lines, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if vs, ok := m[name].([]any); ok {
			for _, v := range vs {
				if f, ok := v.(float64); ok {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
