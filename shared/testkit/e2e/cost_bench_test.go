package e2e

// The cost model in `make bench` (BenchmarkCostModel), on two workloads,
// each on the embedded stack with every queue delivered and metered by
// the demo's accounting (demo.CostMeter: requests by each function's
// signing identity, GB-seconds from each function's requests at typical
// in-region latencies x configured memory, demo.Latencies (the measured run
// time beside), priced with demo.PriceTable):
//
//	workload=demo    the demo's shape: 20 collections x 10 commits
//	                 (commit phase), the clock past the transition age and
//	                 one append each (transition phase), the clock past
//	                 every GC horizon and one reconciliation (gc phase).
//	                 Few commits per collection: per-collection costs weigh
//	                 heavily.
//	workload=steady  the deployed steady state: 100 collections
//	                 (BCC_BENCH_STEADY_COLLECTIONS), each committing every
//	                 36 s (100 commits an hour) for two hours, the
//	                 reconciliation schedule as deployed (every
//	                 resources ReconcileSchedule, 5 minutes) with the query
//	                 plane's watermark published before each pass, a
//	                 lifecycle transition to cold after an hour. GC sweeps
//	                 and transitions come due as deployed. Its figure is the
//	                 second hour's (every mechanism at work: compaction at
//	                 every level, GC of the first hour's garbage,
//	                 transitions of the first hour's objects); the whole
//	                 run's is beside it.
//
// Per unit (demo): a committed head (the observer, commit phase), a
// compaction (compaction and handoff functions, commit phase), a transition
// (the same, transition phase), a GC task (the GC function, gc phase), a
// reconciled collection (the observer, gc phase). Per function and per API
// (steady): what each function and each AWS API cost per commit. With
// BCC_BENCH_COST_JSON set both models are written there (cmd/benchreport
// renders them).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/demo"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// CostReport is one workload's cost model.
type CostReport struct {
	Workload    string `json:"workload"`
	Description string `json:"description"`
	PriceDate   string `json:"price_table_date"`
	PriceRegion string `json:"price_table_region"`
	PriceSource string `json:"price_table_source"`
	Collections int    `json:"collections"`
	Commits     int    `json:"commits"`
	// Units counts each unit of work; PerUnit is one unit's cost.
	Units   map[string]float64        `json:"units"`
	PerUnit map[string]demo.UnitCost  `json:"per_unit,omitempty"`
	Phases  map[string]demo.CostModel `json:"phases"`
	// Measured is the phase the headline figure is taken from, with its
	// commits; PerCommit breaks that phase's cost down per commit: by
	// function (USD) and by AWS API (requests and USD).
	Measured        string                 `json:"measured_phase"`
	MeasuredCommits int                    `json:"measured_commits"`
	PerCommit       demo.PerCommit         `json:"per_commit"`
	USDPerMillion   float64                `json:"usd_per_million_commits"`
	WholeRunPerM    float64                `json:"whole_run_usd_per_million_commits"`
	Invocations     map[string]int         `json:"invocations"`
	Extra           map[string]interface{} `json:"extra,omitempty"`
	Caveat          string                 `json:"caveat"`
}

// CostFile is what BenchmarkCostModel writes to BCC_BENCH_COST_JSON.
type CostFile struct {
	Workloads []CostReport `json:"workloads"`
}

const costCaveat = "GB-seconds are modelled from each function's requests at typical in-region latencies (demo.Latencies, sequential: an upper bound of the I/O wait) plus 5 ms per invocation; " +
	"the run time measured on the embedded stack in one process on a shared 2-core machine is reported beside (measured_gb_seconds, an upper bound); " +
	"requests are the functions' own (the event source mappings' polls and deletes included), stand-ins excluded; a DynamoDB request counts as one request unit"

// costEnv is an embedded environment metered by a CostMeter.
type costEnv struct {
	b      *testing.B
	ctx    context.Context
	env    *localenv.Env
	clock  *offsetClock
	meter  *demo.CostMeter
	pol    policy.Policy
	names  []string
	tally  map[string]float64
	phases map[string]demo.CostModel
}

func startCostEnv(b *testing.B, collections int, prefix string, lc contract.Lifecycle) *costEnv {
	b.Helper()
	ctx := context.Background()
	c := &costEnv{b: b, ctx: ctx, clock: &offsetClock{}, pol: policy.Default(), meter: demo.NewCostMeter(), tally: map[string]float64{}, phases: map[string]demo.CostModel{}}
	env, err := localenv.Start(ctx, localenv.Options{Policy: &c.pol, Now: c.clock.Now, FunctionCredentials: c.meter.Credentials(), OnCall: c.meter.Call})
	if err != nil {
		b.Fatal(err)
	}
	c.env = env
	env.Stack.OnInvoke(c.meter.Invocation)
	c.names = make([]string, collections)
	for i := range c.names {
		c.names[i] = fmt.Sprintf("%s-%03d", prefix, i)
		if err := env.Workload.Create(ctx, c.names[i], lc); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// appendAll commits one append to every collection, four writers at a time.
func (c *costEnv) appendAll() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, n := range c.names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.env.Workload.Append(c.ctx, n, c.env.Workload.Random()); err != nil {
				c.b.Error(err)
			}
		}()
	}
	wg.Wait()
}

func (c *costEnv) settle() {
	if err := c.env.Settle(c.ctx, 10*time.Minute); err != nil {
		c.b.Fatal(err)
	}
}

// reconcile publishes the watermark at the current time (the query plane
// publishes it continuously) and runs one scheduled reconciliation pass.
func (c *costEnv) reconcile() {
	now := c.clock.Now()
	if err := c.env.Watermark.Publish(c.ctx, now.Add(-time.Second), now); err != nil {
		c.b.Fatal(err)
	}
	if _, err := c.env.Reconcile(c.ctx); err != nil {
		c.b.Fatal(err)
	}
	c.settle()
}

// costUnits are the metrics that count units of work.
var costUnits = []string{"HeadsObserved", "CompactionsRun", "LifecycleTransitions", "GCTasksRun", "CollectionsReconciled", "CompletionsReported"}

// take adds the metrics written since the last take to the tally (the
// buffer is drained: a long run keeps no metric lines).
func (c *costEnv) take() map[string]float64 {
	for _, line := range strings.Split(c.env.Metrics.Drain(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		for _, name := range costUnits {
			if v, ok := m[name].(float64); ok {
				c.tally[name] += v
			}
		}
	}
	return c.tally
}

// phase closes a metered phase: its model, and the units counted in it.
func (c *costEnv) phase(name string) (demo.CostModel, map[string]float64) {
	before := map[string]float64{}
	for k, v := range c.tally {
		before[k] = v
	}
	after := c.take()
	units := map[string]float64{}
	for _, k := range costUnits {
		units[k] = after[k] - before[k]
	}
	m := c.meter.Model(nil, 0)
	c.meter.Reset()
	c.phases[name] = m
	return m, units
}

func (c *costEnv) report(workload, description string, commits int) CostReport {
	return CostReport{Workload: workload, Description: description, PriceDate: demo.PriceTable.Date, PriceRegion: demo.PriceTable.Region,
		PriceSource: demo.PriceTable.Source, Collections: len(c.names), Commits: commits, Units: map[string]float64{},
		PerUnit: map[string]demo.UnitCost{}, Phases: c.phases, Invocations: map[string]int{}, Caveat: costCaveat}
}

func runDemoCost(b *testing.B, collections, commits int) CostReport {
	b.Helper()
	c := startCostEnv(b, collections, "cost", contract.Lifecycle{TransitionAfterMs: time.Hour.Milliseconds(), TransitionToTier: contract.TierCold})
	defer c.env.Close()

	// Commit phase.
	for range commits {
		c.appendAll()
		c.clock.Advance(10 * time.Second)
	}
	c.settle()
	commit, cu := c.phase("commit")

	// Transition phase: one young append per collection finds the old
	// objects due.
	c.clock.Advance(2 * time.Hour)
	c.appendAll()
	c.settle()
	transition, tu := c.phase("transition")

	// GC phase.
	c.clock.Advance(c.pol.GC.TokenLifetime.D() + c.pol.GC.RetentionWindow.D() + c.pol.MaxTaskLifetime.D() + c.pol.ClockSkew.D() + time.Minute)
	c.reconcile()
	gc, gu := c.phase("gc")

	rep := c.report("demo", fmt.Sprintf("the demo's shape: %d collections x %d commits, then one append each past the transition age, then every GC horizon and one reconciliation", collections, commits),
		collections*(commits+1))
	rewritesInTransition := tu["CompactionsRun"] + tu["LifecycleTransitions"]
	rep.Units = map[string]float64{"committed_head": cu["HeadsObserved"], "compaction": cu["CompactionsRun"], "transition": tu["LifecycleTransitions"],
		"rewrites_in_transition_phase": rewritesInTransition, "gc_task": gu["GCTasksRun"], "reconciled_collection": gu["CollectionsReconciled"]}
	rep.PerUnit["committed_head"] = commit.Per(cu["HeadsObserved"], resources.FnObserver)
	rep.PerUnit["compaction"] = commit.Per(cu["CompactionsRun"], resources.FnCompaction, resources.FnHandoff)
	// Transitions share the compaction function; a compaction made due by
	// the phase's append would be in the same figures (counted apart in
	// units.rewrites_in_transition_phase).
	rep.PerUnit["transition"] = transition.Per(rewritesInTransition, resources.FnCompaction, resources.FnHandoff)
	rep.PerUnit["gc_task"] = gc.Per(gu["GCTasksRun"], resources.FnGC)
	rep.PerUnit["reconciled_collection"] = gc.Per(gu["CollectionsReconciled"], resources.FnObserver)
	whole := demo.Sum(commit, transition, gc)
	rep.Measured, rep.MeasuredCommits = "all", rep.Commits
	rep.PerCommit = whole.PerCommit(rep.Commits)
	rep.USDPerMillion = whole.USD() / float64(rep.Commits) * 1e6
	rep.WholeRunPerM = rep.USDPerMillion
	for fn, f := range whole.Functions {
		rep.Invocations[fn] = f.Invocations
	}
	return rep
}

// steadyCollections is the steady workload's collection count
// (BCC_BENCH_STEADY_COLLECTIONS overrides the default 100).
func steadyCollections() int {
	if n, err := strconv.Atoi(os.Getenv("BCC_BENCH_STEADY_COLLECTIONS")); err == nil && n > 0 {
		return n
	}
	return 100
}

func runSteadyCost(b *testing.B, collections, hours, perHour int) CostReport {
	b.Helper()
	c := startCostEnv(b, collections, "steady", contract.Lifecycle{TransitionAfterMs: time.Hour.Milliseconds(), TransitionToTier: contract.TierCold})
	defer c.env.Close()
	step := time.Hour / time.Duration(perHour)
	schedule := resources.Default("bcc").ReconcileSchedule
	next := c.clock.Now().Add(schedule)
	passes := 0
	var models []demo.CostModel
	units := map[string]float64{}
	var last map[string]float64
	for h := range hours {
		for range perHour {
			c.appendAll()
			c.settle()
			c.clock.Advance(step)
			if !c.clock.Now().Before(next) {
				c.reconcile()
				passes++
				next = next.Add(schedule)
			}
		}
		m, u := c.phase(fmt.Sprintf("hour%d", h+1))
		models = append(models, m)
		for k, v := range u {
			units[k] += v
		}
		last = u
	}
	commits := collections * hours * perHour
	rep := c.report("steady", fmt.Sprintf("%d collections, each committing every %s (%d an hour) for %d hours; reconciliation every %s as deployed (watermark published before each pass); lifecycle transition to cold after an hour; the figure is the last hour's",
		collections, step, perHour, hours, schedule), commits)
	rep.PerUnit = nil
	rep.Units = map[string]float64{"commit": float64(commits), "committed_head": units["HeadsObserved"], "compaction": units["CompactionsRun"],
		"transition": units["LifecycleTransitions"], "gc_task": units["GCTasksRun"], "reconciled_collection": units["CollectionsReconciled"],
		"completion_reported": units["CompletionsReported"], "reconciliation_pass": float64(passes)}
	measured := models[len(models)-1]
	rep.Measured, rep.MeasuredCommits = fmt.Sprintf("hour%d", hours), collections*perHour
	rep.PerCommit = measured.PerCommit(rep.MeasuredCommits)
	rep.USDPerMillion = measured.USD() / float64(rep.MeasuredCommits) * 1e6
	whole := demo.Sum(models...)
	rep.WholeRunPerM = whole.USD() / float64(commits) * 1e6
	for fn, f := range measured.Functions {
		rep.Invocations[fn] = f.Invocations
	}
	rep.Extra = map[string]interface{}{"last_hour_units": last}
	return rep
}

// BenchmarkCostModel runs both workloads (see the file comment) and
// reports USD per million commits of each.
func BenchmarkCostModel(b *testing.B) {
	var file CostFile
	b.Run("workload=demo", func(b *testing.B) {
		var rep CostReport
		for range b.N {
			rep = runDemoCost(b, 20, 10)
		}
		for unit, u := range rep.PerUnit {
			n := 0.0
			for _, v := range u.Requests {
				n += v
			}
			b.ReportMetric(n, "aws-req/"+unit)
			b.ReportMetric(u.GBSeconds, "gb-s/"+unit)
		}
		b.ReportMetric(rep.USDPerMillion, "usd/Mcommits")
		b.ReportMetric(rep.PerCommit.USDAtMeasuredRunTime*1e6, "usd/Mcommits-at-measured-run-time")
		file.Workloads = append(file.Workloads, rep)
	})
	b.Run("workload=steady", func(b *testing.B) {
		var rep CostReport
		for range b.N {
			rep = runSteadyCost(b, steadyCollections(), 2, 100)
		}
		b.ReportMetric(rep.USDPerMillion, "usd/Mcommits")
		b.ReportMetric(rep.WholeRunPerM, "usd/Mcommits-whole-run")
		b.ReportMetric(rep.PerCommit.Requests, "aws-req/commit")
		b.ReportMetric(rep.PerCommit.GBSeconds, "gb-s/commit")
		b.ReportMetric(rep.PerCommit.MeasuredGBSeconds, "measured-gb-s/commit")
		b.ReportMetric(rep.PerCommit.USDAtMeasuredRunTime*1e6, "usd/Mcommits-at-measured-run-time")
		file.Workloads = append(file.Workloads, rep)
	})
	if path := os.Getenv("BCC_BENCH_COST_JSON"); path != "" && len(file.Workloads) > 0 {
		js, err := json.MarshalIndent(file, "", "  ")
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
