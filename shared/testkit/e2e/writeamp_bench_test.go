package e2e

// Write amplification (issue 26): bytes written by compaction merges —
// every merge, the dropped ones too (compaction.MergeBytesWritten) — per
// byte appended, per output level, against the policy's ideal
// (compact.IdealWrites), with the waste and level-0 debt figures of the
// same run, on the embedded stack with every queue delivered:
//
//	workload=moderate/clock=jumping  20 collections x 10 commits, 4 at a
//	                                 time; the clock jumps 10 s per round
//	workload=hot/clock=real          one collection commits every 100 ms
//	                                 for 12 s of real time
//	workload=hot/clock=jumping       the same, the clock jumping 10 s per
//	                                 commit (a still-head wait on the
//	                                 functions' clock then sees a quiet
//	                                 head while commits keep landing)
//
// The moderate workload on the real clock is `make demo`'s main job
// (BenchmarkDemoWorkload, shared/devstack/demo, reports the same figures).

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/devstack/demo"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/policy"
)

func BenchmarkWriteAmplification(b *testing.B) {
	for _, w := range []struct {
		name        string
		collections int
		rounds      int           // moderate: rounds of one commit per collection
		hot         time.Duration // hot: how long one collection commits every 100 ms
		jump        time.Duration // the clock's jump per round (0: real time)
	}{
		{name: "workload=moderate/clock=jumping", collections: 20, rounds: 10, jump: 10 * time.Second},
		{name: "workload=hot/clock=real", collections: 1, hot: 12 * time.Second},
		{name: "workload=hot/clock=jumping", collections: 1, hot: 12 * time.Second, jump: 10 * time.Second},
	} {
		b.Run(w.name, func(b *testing.B) {
			var wa demo.WriteAmp
			for range b.N {
				wa = runWriteAmp(b, w.collections, w.rounds, w.hot, w.jump)
			}
			b.Logf("%s: %s", w.name, wa)
			wa.Report(b.ReportMetric)
		})
	}
}

func runWriteAmp(b *testing.B, collections, rounds int, hot, jump time.Duration) demo.WriteAmp {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	clock := &offsetClock{}
	pol := policy.Default()
	env, err := localenv.Start(ctx, localenv.Options{Policy: &pol, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	names := make([]string, collections)
	for i := range names {
		names[i] = fmt.Sprintf("wa-%02d", i)
		if err := env.Workload.Create(ctx, names[i], contract.Lifecycle{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := env.Settle(ctx, time.Minute); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	if hot > 0 {
		for end := time.Now().Add(hot); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if _, err := env.Workload.Append(ctx, names[0], env.Workload.Random()); err != nil {
				b.Fatal(err)
			}
			clock.Advance(jump)
		}
	}
	for range rounds {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for _, c := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := env.Workload.Append(ctx, c, env.Workload.Random()); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		clock.Advance(jump)
	}
	if err := env.Settle(ctx, 10*time.Minute); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	wa, err := demo.MeasureWriteAmp(ctx, env.Lineage, compact.PolicyFrom(pol.Compaction), names, nil, demo.SumMetrics(env.Metrics.String()))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range names {
		got, _, err := workload.Read(ctx, env.Lineage, env.Bucket, c)
		if err != nil {
			b.Fatal(err)
		}
		if d := workload.Diff(env.Workload.Expected(c), got); len(d) > 0 {
			b.Fatalf("%s reads differently from what was written: %v", c, d[:min(len(d), 3)])
		}
	}
	return wa
}
