package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/devstack/dashview"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Options shape a demo run.
type Options struct {
	Collections int
	Commits     int
	Parallel    int
	Seed        uint64
	Out         io.Writer // human progress and summary
	JSONPath    string    // summary as JSON ("" = none)
	Log         *slog.Logger
	// Hot is how long the hot phase runs after the main job (0: none):
	// one more collection commits every 100 ms while the demo's
	// collections commit rarely (issue 16 item 1's hot workload).
	Hot time.Duration
	// DashboardPath is where the deployed dashboard, drawn from this run's
	// metrics, is written as one self-contained HTML page ("": not
	// written; its figures are in the summary either way).
	DashboardPath string
	// DashboardStore, when set, receives the run's metrics (tests draw
	// the dashboard again from it).
	DashboardStore *dashview.Store
}

// Run executes the demo and returns its summary. It fails when any check fails.
func Run(ctx context.Context, opts Options) (Summary, error) {
	started := time.Now()
	sum := Summary{Collections: opts.Collections, CommitsPerColl: opts.Commits, Invocations: map[string]int{}, InvocationErrors: map[string]int{},
		PerCollection: map[string]*CollectionSummary{}, TasksByKind: map[string]int{}}
	clock := NewClock(time.Now())
	pol := policy.Default()
	meter := NewCostMeter()
	env, err := localenv.Start(ctx, localenv.Options{Policy: &pol, Seed: opts.Seed, Now: clock.Now, Log: opts.Log,
		FunctionCredentials: meter.Credentials(), OnCall: meter.Call})
	if err != nil {
		return sum, err
	}
	defer env.Close()
	rec := &recorder{sum: &sum}
	dash := startDashboard(env, clock.Now, opts.DashboardStore)
	env.Stack.OnInvoke(func(inv localaws.Invocation) {
		rec.record(inv)
		meter.Invocation(inv)
		dash.rec.Invocation(inv)
	})
	fmt.Fprintf(opts.Out, "embedded AWS stack on %s (S3, DynamoDB, SQS; functions: observer, compaction, gc, handoff)\n", env.Stack.URL())

	names := make([]string, opts.Collections)
	for i := range names {
		names[i] = fmt.Sprintf("demo-%02d", i+1)
		if err := env.Workload.Create(ctx, names[i], contract.Lifecycle{}); err != nil {
			return sum, err
		}
	}
	fmt.Fprintf(opts.Out, "created %d collections; committing %d appends to each...\n", opts.Collections, opts.Commits)
	before := env.Stack.Counter().Snapshot()
	if err := commitAll(ctx, env, names, opts, clock); err != nil {
		return sum, err
	}
	if err := env.Settle(ctx, 5*time.Minute); err != nil {
		return sum, err
	}
	fmt.Fprintf(opts.Out, "appends committed and observed; compaction and handoff drained\n")
	settled, _ := sumEMF(env.Metrics.String())
	wa, err := MeasureWriteAmp(ctx, env.Lineage, compact.PolicyFrom(pol.Compaction), names, nil, settled)
	if err != nil {
		return sum, err
	}
	sum.WriteAmp = &wa

	// Reconcile once right away: GC finds the dereferenced objects but every
	// gate defers them (tokens may still open the old versions).
	if err := reconcile(ctx, env, clock); err != nil {
		return sum, err
	}
	fmt.Fprintf(opts.Out, "reconciliation #1 (now): GC deferred what tokens may still read\n")

	// Let token lifetimes, retention windows and task lifetimes pass, move
	// the query plane's watermark, and run the reconciliation schedule.
	clock.Advance(pol.GC.TokenLifetime.D() + pol.GC.RetentionWindow.D() + pol.MaxTaskLifetime.D() + pol.ClockSkew.D() + time.Minute)
	if err := env.Watermark.Publish(ctx, clock.Now().Add(-time.Second), clock.Now()); err != nil {
		return sum, err
	}
	if err := reconcile(ctx, env, clock); err != nil {
		return sum, err
	}
	fmt.Fprintf(opts.Out, "reconciliation #2 (after token lifetime, retention window and task lifetime): GC deleted what became eligible\n")
	sum.AWSCalls = env.Stack.Counter().Since(before)
	sum.Metrics, sum.ClockSpansMs = sumEMF(env.Metrics.String())
	sum.Cost = meter.Model(map[string]float64{
		resources.FnObserver:   sum.Metrics["observer.HeadsObserved"],
		resources.FnCompaction: sum.Metrics["compaction.CompactionsRun"] + sum.Metrics["compaction.LifecycleTransitions"],
		resources.FnGC:         float64(sum.Invocations[resources.FnGC]),
		resources.FnHandoff:    sum.Metrics["handoff.CutoversAccepted|Kind=compaction"] + sum.Metrics["handoff.CutoversAccepted|Kind=lifecycle_transition"],
	}, opts.Collections*opts.Commits)
	sum.Rewrites = rewriteFigures(&sum)
	verify(ctx, env, names, &sum)
	if opts.Hot > 0 {
		hot, err := runHot(ctx, env, rec, names, opts.Hot)
		if err != nil {
			return sum, err
		}
		sum.Hot = &hot
		var hs Summary
		hs.PerCollection = map[string]*CollectionSummary{}
		verify(ctx, env, []string{hotCollection}, &hs)
		sum.Problems = append(sum.Problems, hs.Problems...)
		sum.Verified = len(sum.Problems) == 0
		fmt.Fprintf(opts.Out, "hot phase: %s committed every 100 ms for %s while the others committed rarely\n", hotCollection, opts.Hot)
	}
	if sum.Dashboard, err = dash.finish(opts.DashboardPath, clock.Now()); err != nil {
		return sum, err
	}
	sum.ElapsedSeconds = time.Since(started).Seconds()
	printSummary(opts.Out, &sum)
	if opts.JSONPath != "" {
		if err := writeJSON(opts.JSONPath, &sum); err != nil {
			return sum, err
		}
		fmt.Fprintf(opts.Out, "summary written to %s\n", opts.JSONPath)
	}
	if d := sum.Dashboard; d.Path != "" {
		fmt.Fprintf(opts.Out, "dashboard (the deployed one, drawn from this run's metrics: %d of %d widgets with data, %d alarms, %d in ALARM) written to %s\n",
			d.WidgetsWithData, d.Widgets, d.Alarms, len(d.AlarmsFiring), d.Path)
	}
	if !sum.Verified {
		return sum, fmt.Errorf("demo verification failed: %v", sum.Problems)
	}
	return sum, nil
}

func commitAll(ctx context.Context, env *localenv.Env, names []string, opts Options, clock *Clock) error {
	sem := make(chan struct{}, max(opts.Parallel, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for round := range opts.Commits {
		for _, c := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := env.Workload.Append(ctx, c, env.Workload.Random()); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if (round+1)%max(opts.Commits/5, 1) == 0 {
			fmt.Fprintf(opts.Out, "  round %d/%d committed\n", round+1, opts.Commits)
		}
	}
	return firstErr
}

// reconcile runs the observer's schedule and waits for the work it queues.
func reconcile(ctx context.Context, env *localenv.Env, clock *Clock) error {
	if _, err := env.Stack.Invoke(ctx, resources.FnObserver, scheduledEvent(clock.Now())); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return env.Settle(ctx, 5*time.Minute)
}

func scheduledEvent(now time.Time) []byte {
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": "demo-reconcile", "detail-type": "Scheduled Event", "source": "aws.events",
		"account": "000000000000", "time": now.UTC().Format(time.RFC3339), "region": "us-east-1",
		"resources": []string{"arn:aws:events:us-east-1:000000000000:rule/bcc-reconcile"}, "detail": map[string]any{},
	})
	return b
}

// verify reads every key back from the committed heads and checks that every
// object a retained manifest references still exists.
func verify(ctx context.Context, env *localenv.Env, names []string, sum *Summary) {
	for _, c := range names {
		cs := sum.PerCollection[c]
		if cs == nil {
			cs = &CollectionSummary{Tasks: map[string]int{}}
			sum.PerCollection[c] = cs
		}
		got, head, err := workload.Read(ctx, env.Lineage, env.Bucket, c)
		if err != nil {
			sum.Problems = append(sum.Problems, fmt.Sprintf("%s: read: %v", c, err))
			continue
		}
		if d := workload.Diff(env.Workload.Expected(c), got); len(d) > 0 {
			sum.Problems = append(sum.Problems, fmt.Sprintf("%s: %d keys differ, first: %s", c, len(d), d[0]))
		}
		cs.KeysVerified, cs.FinalVersion = len(got), head.Version
		walk, err := env.Lineage.WalkFrom(ctx, c, 1)
		if err != nil {
			sum.Problems = append(sum.Problems, fmt.Sprintf("%s: lineage: %v", c, err))
			continue
		}
		cs.ObjectsAfter = walk.Roots[0].Summary.Objects
		for _, root := range walk.Roots {
			err := env.Lineage.Each(ctx, &root, nil, func(o contract.ObjectEntry) error {
				if _, err := env.Bucket.Size(ctx, o.Key); err != nil {
					return fmt.Errorf("v%d references %s: %w", root.Version, o.Key, err)
				}
				return nil
			})
			if err != nil {
				sum.Problems = append(sum.Problems, fmt.Sprintf("%s: %v", c, err))
			}
		}
	}
	sum.Verified = len(sum.Problems) == 0
}

func writeJSON(path string, sum *Summary) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func printSummary(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "\n== Summary (%d collections x %d commits, %.1fs) ==\n", s.Collections, s.CommitsPerColl, s.ElapsedSeconds)
	heads, dups, stale := s.Totals()
	fmt.Fprintf(w, "heads observed: %d (%d from head events, %d first seen by reconciliation)   duplicate events absorbed: %d   stale events absorbed: %d\n",
		heads, heads-s.HeadsAdvancedByReconcile, s.HeadsAdvancedByReconcile, dups, stale)
	fmt.Fprintf(w, "reconciliation looked at %d heads already observed (not events; not counted as duplicates)\n", s.ReconcileHeadsUnchanged)
	fmt.Fprintf(w, "tasks enqueued by class:")
	for _, k := range sortedKeys(s.TasksByKind) {
		fmt.Fprintf(w, " %s=%d", k, s.TasksByKind[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "invocations:")
	for _, k := range sortedKeys(s.Invocations) {
		fmt.Fprintf(w, " %s=%d", k, s.Invocations[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\n%-10s %6s %5s %5s %-16s %8s %8s %8s %8s\n", "collection", "heads", "dups", "stale", "tasks", "appends", "cutovers", "objects", "objects")
	fmt.Fprintf(w, "%-10s %6s %5s %5s %-16s %8s %8s %8s %8s\n", "", "", "", "", "", "", "", "appended", "final")
	for _, c := range sortedKeys(s.PerCollection) {
		cs := s.PerCollection[c]
		tasks := ""
		for _, k := range sortedKeys(cs.Tasks) {
			tasks += fmt.Sprintf("%s=%d ", k, cs.Tasks[k])
		}
		fmt.Fprintf(w, "%-10s %6d %5d %5d %-16s %8d %8d %8d %8d\n", c, cs.HeadsObserved, cs.Duplicates, cs.Stale, tasks, cs.Appends, cs.Cutovers, cs.ObjectsAdded, cs.ObjectsAfter)
	}
	if h := s.Hot; h != nil {
		fmt.Fprintf(w, "\nhot phase (%s every 100 ms for %.0f s, %d commits): %d rewrite tasks for %d cutovers = %.2f per cutover; %d of %d merges dropped as stale = %.1f%%; %s cutovers: %d\n",
			hotCollection, h.Seconds, h.HotCommits, h.TasksEnqueued, h.Cutovers, h.TasksPerCutover, h.MergesDroppedStale, h.Merges, h.StalePct, hotCollection, h.HotCutovers)
	}
	if s.WriteAmp != nil {
		fmt.Fprintf(w, "\nwrite amplification (main job): %s\n", s.WriteAmp)
	}
	if h := s.Hot; h != nil {
		fmt.Fprintf(w, "write amplification (hot phase, every collection): %s\n", h.WriteAmp)
	}
	r := s.Rewrites
	fmt.Fprintf(w, "\nrewrites: %d tasks for %d cutovers = %.2f per cutover (goal <= 1.5); %d of %d merges dropped as stale = %.1f%% (goal <= 5%%); least-compacted collection: %d cutovers; %d starts waited for a quiet head\n",
		r.TasksEnqueued, r.Cutovers, r.TasksPerCutover, r.MergesDroppedStale, r.Merges, r.StalePct, r.MinCutoversPerCollection, r.QuietWaits)
	if len(s.Metrics) > 0 {
		fmt.Fprintf(w, "\nmetrics (EMF, summed):\n")
		for _, k := range sortedKeys(s.Metrics) {
			fmt.Fprintf(w, "  %-45s %g\n", k, s.Metrics[k])
		}
	}
	if len(s.ClockSpansMs) > 0 {
		fmt.Fprintf(w, "\nspans on the demo's clock (it jumps hours ahead to pass token lifetimes: these measure the jumps, not latency):\n")
		for _, k := range sortedKeys(s.ClockSpansMs) {
			fmt.Fprintf(w, "  %-45s %g\n", k, s.ClockSpansMs[k])
		}
	}
	if c := s.Cost; c.Functions != nil {
		fmt.Fprintf(w, "\ncost model (prices %s, %s): USD %.4f per million commits\n", c.PriceDate, PriceTable.Region, c.USDPerMillionCommits)
		for _, fn := range sortedKeys(c.PerUnit) {
			per := c.PerUnit[fn]
			fmt.Fprintf(w, "  per %-26s USD %.8f, %.4f GB-s, %d AWS request kinds\n", unitName(fn), per["usd"], per["gb_seconds"], len(per)-3)
		}
	}
	if s.Verified {
		fmt.Fprintf(w, "\nverified: every key reads its latest value from the committed head; every object referenced by a retained manifest exists\n")
	} else {
		fmt.Fprintf(w, "\nVERIFICATION FAILED:\n")
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

// unitName is the unit of work a function's cost is divided by.
func unitName(fn string) string {
	switch fn {
	case resources.FnObserver:
		return "committed head (observer)"
	case resources.FnCompaction:
		return "compaction or transition"
	case resources.FnGC:
		return "GC task"
	case resources.FnHandoff:
		return "cutover (handoff)"
	}
	return fn
}
