package e2e

// The cost model of issue 16 item 5 in `make bench`: the demo's workload
// shape (20 collections x 10 commits, lifecycle transition to cold after an
// hour) on the embedded stack with every queue delivered, metered by the
// demo's accounting (demo.CostMeter: requests by each function's signing
// identity, GB-seconds from run time x configured memory, priced with
// demo.PriceTable) in three phases:
//
//	commit      appends committed, observed, compacted, cut over
//	transition  the clock passes transition_after_ms; one append per
//	            collection makes the transition due; transitions cut over
//	gc          the clock passes token lifetime, retention window and task
//	            lifetime; the watermark moves; reconciliation runs GC
//
// Per unit: a committed head (the observer, commit phase), a compaction
// (compaction and handoff functions, commit phase), a transition
// (compaction and handoff functions, transition phase), a GC task (the GC
// function, gc phase) and a reconciled collection (the observer, gc
// phase). USD per million commits is every phase's cost over the commits.
// With BCC_BENCH_COST_JSON set the whole model is written there
// (cmd/benchreport renders it).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/demo"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// CostReport is what BenchmarkCostModel writes to BCC_BENCH_COST_JSON.
type CostReport struct {
	PriceDate   string `json:"price_table_date"`
	PriceRegion string `json:"price_table_region"`
	PriceSource string `json:"price_table_source"`
	Collections int    `json:"collections"`
	Commits     int    `json:"commits"`
	// Units counts each unit of work; PerUnit is one unit's cost.
	Units                map[string]float64        `json:"units"`
	PerUnit              map[string]demo.UnitCost  `json:"per_unit"`
	Phases               map[string]demo.CostModel `json:"phases"`
	USDPerMillionCommits float64                   `json:"usd_per_million_commits"`
	Caveat               string                    `json:"caveat"`
}

func runCostModel(b *testing.B, collections, commits int) CostReport {
	b.Helper()
	ctx := context.Background()
	clock := &offsetClock{}
	pol := policy.Default()
	meter := demo.NewCostMeter()
	env, err := localenv.Start(ctx, localenv.Options{Policy: &pol, Now: clock.Now, FunctionCredentials: meter.Credentials(), OnCall: meter.Call})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	env.Stack.OnInvoke(meter.Invocation)
	lifecycle := contract.Lifecycle{TransitionAfterMs: time.Hour.Milliseconds(), TransitionToTier: contract.TierCold}
	names := make([]string, collections)
	for i := range names {
		names[i] = fmt.Sprintf("cost-%02d", i)
		if err := env.Workload.Create(ctx, names[i], lifecycle); err != nil {
			b.Fatal(err)
		}
	}
	appendAll := func() {
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
	}
	settle := func() {
		if err := env.Settle(ctx, 10*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	metric := func(name string) float64 { return cxMetric(env, name) }
	rep := CostReport{PriceDate: demo.PriceTable.Date, PriceRegion: demo.PriceTable.Region, PriceSource: demo.PriceTable.Source,
		Collections: collections, Units: map[string]float64{}, PerUnit: map[string]demo.UnitCost{}, Phases: map[string]demo.CostModel{},
		Caveat: "run time measured on the embedded stack in one process (not Lambda): GB-seconds are an upper bound; requests are the functions' own, stand-ins excluded"}
	phase := func(name string) demo.CostModel {
		m := meter.Model(nil, 0)
		meter.Reset()
		rep.Phases[name] = m
		return m
	}

	// Commit phase.
	for range commits {
		appendAll()
		clock.Advance(10 * time.Second)
	}
	settle()
	rep.Commits = collections * commits
	heads, compactions := metric("HeadsObserved"), metric("CompactionsRun")
	commit := phase("commit")

	// Transition phase: one young append per collection finds the old
	// objects due.
	clock.Advance(2 * time.Hour)
	appendAll()
	settle()
	rep.Commits += collections
	transitions := metric("LifecycleTransitions")
	rewritesInTransition := metric("CompactionsRun") - compactions + transitions
	transition := phase("transition")

	// GC phase.
	clock.Advance(pol.GC.TokenLifetime.D() + pol.GC.RetentionWindow.D() + pol.MaxTaskLifetime.D() + pol.ClockSkew.D() + time.Minute)
	if err := env.Watermark.Publish(ctx, clock.Now().Add(-time.Second), clock.Now()); err != nil {
		b.Fatal(err)
	}
	if _, err := env.Reconcile(ctx); err != nil {
		b.Fatal(err)
	}
	settle()
	gcTasks := metric("GCTasksRun")
	reconciled := metric("CollectionsReconciled")
	gc := phase("gc")

	rep.Units = map[string]float64{"committed_head": heads, "compaction": compactions, "transition": transitions,
		"rewrites_in_transition_phase": rewritesInTransition, "gc_task": gcTasks, "reconciled_collection": reconciled}
	rep.PerUnit["committed_head"] = commit.Per(heads, resources.FnObserver)
	rep.PerUnit["compaction"] = commit.Per(compactions, resources.FnCompaction, resources.FnHandoff)
	// Transitions share the compaction function; a compaction made due by
	// the phase's append would be in the same figures (counted apart in
	// units.rewrites_in_transition_phase).
	rep.PerUnit["transition"] = transition.Per(rewritesInTransition, resources.FnCompaction, resources.FnHandoff)
	rep.PerUnit["gc_task"] = gc.Per(gcTasks, resources.FnGC)
	rep.PerUnit["reconciled_collection"] = gc.Per(reconciled, resources.FnObserver)
	if rep.Commits > 0 {
		rep.USDPerMillionCommits = (commit.USD() + transition.USD() + gc.USD()) / float64(rep.Commits) * 1e6
	}
	return rep
}

func BenchmarkCostModel(b *testing.B) {
	var rep CostReport
	for range b.N {
		rep = runCostModel(b, 20, 10)
	}
	for unit, u := range rep.PerUnit {
		n := 0.0
		for _, v := range u.Requests {
			n += v
		}
		b.ReportMetric(n, "aws-req/"+unit)
		b.ReportMetric(u.GBSeconds, "gb-s/"+unit)
	}
	b.ReportMetric(rep.USDPerMillionCommits, "usd/Mcommits")
	if path := os.Getenv("BCC_BENCH_COST_JSON"); path != "" {
		js, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, append(js, '\n'), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// offsetClock is the wall clock moved ahead by Advance: time passes for
// the functions as it does deployed (a rewrite waiting for a still head
// waits real seconds), and the benchmark jumps over hours.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}
