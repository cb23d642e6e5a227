// Command benchreport runs the repository's benchmarks, pairs each with the
// baselines measured in the same run and writes a report: a markdown table
// on stdout and in <out>/bench.md, the same data in <out>/bench.json and
// the raw `go test` output in <out>/bench.txt.
//
// Discovery: `go test -list 'Benchmark.*' ./...`; every package that lists
// a benchmark is run once with
//
//	go test -run '^$' -bench <regex> -benchmem -count <n> -benchtime <t> <pkg>
//
// so a benchmark and its baselines share one process and one fixture.
//
// Pairing convention: a benchmark whose top-level name is
// <Name>Baseline<Suffix> (Suffix may be empty) is a baseline of <Name>, and
// sub-benchmarks pair by their sub-name (e.g. BenchmarkEach/objects=250000
// with BenchmarkEachBaseline/objects=250000 and
// BenchmarkEachBaselineFullManifest/objects=250000). For every metric both
// report, the ratio is benchmark ÷ baseline: below 1 is smaller (for ns/op,
// cpu-ms/op, B/op, peak-heap-MB: better); for throughputs (MB/s, objects/s)
// above 1 is faster. A few benchmarks that predate the convention are paired
// by the aliases table below. With -count > 1 each metric is the median.
//
// Benchmarks named in alone run in a go test of their own with their own
// -benchtime (the cost model's workloads once: the steady one takes
// minutes); the rest of their package runs with -skip them.
//
// Nothing here asserts timing: the acceptance targets of issues 7, 10, 12,
// 16 and 27 are printed as met or not met, and the exit status is non-zero
// only when a benchmark package fails to build or run.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// benchtimes per package (by import path suffix): the heavy 1,000,000-object
// benchmarks run few iterations so that `make bench` stays within minutes.
var benchtimes = map[string]string{
	"shared/testkit/e2e":                "2x",
	"shared/core/compact":               "5x", // BenchmarkExecutorMergeS3: 5 paired rounds, median ratio
	"shared/core/observe":               "3x",
	"shared/core/lineage":               "2x",
	"shared/devstack/standin/publisher": "2x",
}

const defaultBenchtime = "3x"

// alone are benchmarks run in a go test of their own, with their own
// -benchtime (the rest of their package runs with -skip them): the cost
// model's workloads run once (the steady workload takes minutes).
var alone = map[string]map[string]string{
	"shared/testkit/e2e": {"BenchmarkCostModel": "1x"},
}

// aliases pairs benchmarks that predate the naming convention:
// package suffix -> baseline name -> benchmark name.
var aliases = map[string]map[string]string{
	"shared/core/segment": {"BenchmarkRawCopy": "BenchmarkMerge"},
}

// target is one acceptance figure (issues 7, 10 and 12).
type target struct {
	Check     string
	Pkg       string // import path suffix
	Benchmark string
	Metric    string
	Max       float64 // met when value <= Max (Strict: value < Max)
	Strict    bool
}

var targets = []target{
	{"observer AWS calls per committed head (1M objects, +10/-10)", "shared/core/observe", "BenchmarkObserveCommit/objects=1000000", "aws-calls/op", 4, false},
	{"observer CPU per committed head", "shared/core/observe", "BenchmarkObserveCommit/objects=1000000", "cpu-ms/op", 50, true},
	{"observer peak heap per committed head", "shared/core/observe", "BenchmarkObserveCommit/objects=1000000", "peak-heap-MB", 64, true},
	{"observer bytes allocated per committed head", "shared/core/observe", "BenchmarkObserveCommit/objects=1000000", "alloc-MB/op", 64, true},
	// Issue 10: at a bulk commit, within half the function's memory (2x
	// headroom): the observer has 256 MB, GC 512 MB.
	{"observer peak heap, 250,000-object bulk commit", "shared/testkit/e2e", "BenchmarkObserveBulkCommit/objects=250000", "peak-heap-MB", 128, false},
	{"observer peak heap, 1,000,000-object bulk commit", "shared/testkit/e2e", "BenchmarkObserveBulkCommit/objects=1000000", "peak-heap-MB", 128, false},
	{"GC plan peak heap, 250,000-object bulk commit", "shared/testkit/e2e", "BenchmarkGCPlanBulkCommit/objects=250000", "peak-heap-MB", 256, false},
	{"GC plan peak heap, 1,000,000-object bulk commit", "shared/testkit/e2e", "BenchmarkGCPlanBulkCommit/objects=1000000", "peak-heap-MB", 256, false},
	// Issue 12 item 5: reconciliation fans out; no invocation of a
	// 10,000-collection pass comes near the observer's timeout.
	{"reconcile 10,000 collections: longest invocation, % of the observer timeout", "shared/testkit/e2e", "BenchmarkReconcileFanOut/collections=10000", "max-invocation-%timeout", 10, false},
	// Issue 16 item 1: wasted rewrite work on the demo workload (20
	// collections x 10 commits) and the hot workload (one collection every
	// 100 ms, 99 rarely).
	{"demo workload: rewrite tasks enqueued per cutover", "shared/devstack/demo", "BenchmarkDemoWorkload", "rewrite-tasks/cutover", 1.5, false},
	{"demo workload: merges dropped as stale, %", "shared/devstack/demo", "BenchmarkDemoWorkload", "stale-merge-%", 5, false},
	{"hot workload: rewrite tasks enqueued per cutover", "shared/testkit/e2e", "BenchmarkHotWorkload", "rewrite-tasks/cutover", 1.5, false},
	{"hot workload: merges dropped as stale, %", "shared/testkit/e2e", "BenchmarkHotWorkload", "stale-merge-%", 5, false},
	// Issue 27: reads sized for object storage; cost on the steady state.
	{"64 MiB compaction job: S3 GETs", "shared/core/compact", "BenchmarkExecutorMergeS3/lat=0ms/in=64MiB", "GETs/job", 80, false},
	{"steady-state workload: USD per million commits", "shared/testkit/e2e", "BenchmarkCostModel/workload=steady", "usd/Mcommits", 5, false},
	// Issue 26: conflict-checked cutovers. A collection committing every
	// 100 ms, in real time and under the jumping clock: merges dropped,
	// commits per cutover (at most 2 x merge_factor: level-0 debt bounded),
	// compaction bytes per appended byte against the policy's ideal.
	{"hot workload (real time): merges dropped, %", "shared/testkit/e2e", "BenchmarkWriteAmplification/workload=hot/clock=real", "dropped-merge-%", 5, false},
	{"hot workload (real time): commits per cutover", "shared/testkit/e2e", "BenchmarkWriteAmplification/workload=hot/clock=real", "commits/cutover", 8, false},
	{"hot workload (real time): write amplification vs the policy's ideal", "shared/testkit/e2e", "BenchmarkWriteAmplification/workload=hot/clock=real", "write-amp-vs-ideal", 1.3, false},
	{"hot workload (jumping clock): merges dropped, %", "shared/testkit/e2e", "BenchmarkWriteAmplification/workload=hot/clock=jumping", "dropped-merge-%", 5, false},
	{"hot workload (jumping clock): commits per cutover", "shared/testkit/e2e", "BenchmarkWriteAmplification/workload=hot/clock=jumping", "commits/cutover", 8, false},
	{"hot workload (jumping clock): write amplification vs the policy's ideal", "shared/testkit/e2e", "BenchmarkWriteAmplification/workload=hot/clock=jumping", "write-amp-vs-ideal", 1.3, false},
	{"moderate workload (jumping clock): write amplification vs the policy's ideal", "shared/testkit/e2e", "BenchmarkWriteAmplification/workload=moderate/clock=jumping", "write-amp-vs-ideal", 1.3, false},
}

// floors are acceptance figures met when value >= Max (issue 16 item 1:
// every collection, the hot one included, still compacts).
var floors = []target{
	{"demo workload: the least-compacted collection's cutovers", "shared/devstack/demo", "BenchmarkDemoWorkload", "min-cutovers/collection", 1, false},
	{"hot workload: the hot collection's cutovers", "shared/testkit/e2e", "BenchmarkHotWorkload", "hot-cutovers", 1, false},
	// Issue 27: merge through S3 near copy speed (median over paired
	// rounds of raw copy time / merge time), without and with 10 ms per
	// S3 request.
	{"merge through S3 vs raw copy, 64 MiB, no added latency", "shared/core/compact", "BenchmarkExecutorMergeS3/lat=0ms/in=64MiB", "merge-speed/rawcopy", 0.8, false},
	{"merge through S3 vs raw copy, 16 MiB, no added latency", "shared/core/compact", "BenchmarkExecutorMergeS3/lat=0ms/in=16MiB", "merge-speed/rawcopy", 0.8, false},
	{"merge through S3 vs raw copy, 64 MiB, 10 ms per request", "shared/core/compact", "BenchmarkExecutorMergeS3/lat=10ms/in=64MiB", "merge-speed/rawcopy", 0.5, false},
	{"merge through S3 vs raw copy, 16 MiB, 10 ms per request", "shared/core/compact", "BenchmarkExecutorMergeS3/lat=10ms/in=16MiB", "merge-speed/rawcopy", 0.5, false},
}

// flatness: a streaming read's peak heap at 1,000,000 objects may exceed
// the 250,000-object figure by at most this many MB. The set itself grows by
// about 300 MB between the two sizes, so a reader that held it would miss
// this by far; the allowance absorbs GC pacing noise at a few MB.
const flatnessMB = 16

type benchmark struct {
	Name    string               `json:"name"`
	Procs   int                  `json:"procs"`
	Runs    int                  `json:"runs"`
	Iters   []int                `json:"iterations"`
	Metrics map[string]float64   `json:"metrics"` // median over runs
	Samples map[string][]float64 `json:"samples"`
}

type pkgResult struct {
	Pkg        string       `json:"package"`
	Benchtime  string       `json:"benchtime"`
	Count      int          `json:"count"`
	Seconds    float64      `json:"seconds"`
	Error      string       `json:"error,omitempty"`
	Benchmarks []*benchmark `json:"benchmarks"`
}

type pair struct {
	Pkg       string                `json:"package"`
	Benchmark string                `json:"benchmark"`
	Baseline  string                `json:"baseline"`
	Ratios    map[string]float64    `json:"ratios"`
	Values    map[string][2]float64 `json:"values"` // metric -> [benchmark, baseline]
}

type check struct {
	Check    string  `json:"check"`
	Where    string  `json:"where"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Target   string  `json:"target"`
	Met      bool    `json:"met"`
	Measured bool    `json:"measured"`
}

type report struct {
	GeneratedAt string       `json:"generated_at"`
	GoVersion   string       `json:"go_version"`
	CPUs        int          `json:"cpus"`
	Commit      string       `json:"commit"`
	Seconds     float64      `json:"seconds"`
	Packages    []*pkgResult `json:"packages"`
	Pairs       []pair       `json:"pairs"`
	Acceptance  []check      `json:"acceptance"`
	ListErrors  string       `json:"list_errors,omitempty"`
	// Cost is the cost model BenchmarkCostModel wrote (issue 16 item 5),
	// as it wrote it: per unit of work AWS requests by API, GB-seconds and
	// USD, USD per million commits, the price table's date and source.
	Cost json.RawMessage `json:"cost_model,omitempty"`
}

// costEnv names the file BenchmarkCostModel (shared/testkit/e2e) writes
// its cost model to; the report renders it.
const costEnv = "BCC_BENCH_COST_JSON"

// costFile is the part of BenchmarkCostModel's file the report renders:
// one model per workload (demo, steady).
type costFile struct {
	Workloads []costModel `json:"workloads"`
}

type costModel struct {
	Workload        string             `json:"workload"`
	Description     string             `json:"description"`
	PriceDate       string             `json:"price_table_date"`
	PriceRegion     string             `json:"price_table_region"`
	PriceSource     string             `json:"price_table_source"`
	Collections     int                `json:"collections"`
	Commits         int                `json:"commits"`
	Measured        string             `json:"measured_phase"`
	MeasuredCommits int                `json:"measured_commits"`
	USDPerM         float64            `json:"usd_per_million_commits"`
	WholeRunPerM    float64            `json:"whole_run_usd_per_million_commits"`
	Caveat          string             `json:"caveat"`
	Units           map[string]float64 `json:"units"`
	PerUnit         map[string]struct {
		Requests  map[string]float64 `json:"aws_requests"`
		GBSeconds float64            `json:"gb_seconds"`
		USD       float64            `json:"usd"`
	} `json:"per_unit"`
	PerCommit struct {
		USD               float64            `json:"usd"`
		Requests          float64            `json:"aws_requests"`
		GBSeconds         float64            `json:"gb_seconds"`
		MeasuredGBSeconds float64            `json:"measured_gb_seconds"`
		LambdaRequestsUSD float64            `json:"lambda_requests_usd"`
		GBSecondsUSD      float64            `json:"gb_seconds_usd"`
		USDAtMeasured     float64            `json:"usd_at_measured_run_time"`
		ByFunction        map[string]float64 `json:"usd_by_function"`
		ByAPI             map[string]struct {
			Requests float64 `json:"requests"`
			USD      float64 `json:"usd"`
		} `json:"by_api"`
	} `json:"per_commit"`
}

func main() {
	out := flag.String("out", "out", "directory for bench.md, bench.json and bench.txt")
	count := flag.Int("count", 1, "go test -count")
	benchtime := flag.String("benchtime", "", "override every package's -benchtime")
	benchRE := flag.String("bench", ".", "go test -bench regex")
	pkgRE := flag.String("pkg", "", "only packages whose import path matches this regex")
	timeout := flag.String("timeout", "30m", "go test -timeout")
	flag.Parse()
	if err := run(*out, *count, *benchtime, *benchRE, *pkgRE, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(outDir string, count int, benchtime, benchRE, pkgRE, timeout string) error {
	started := time.Now()
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	raw, err := os.Create(filepath.Join(outDir, "bench.txt"))
	if err != nil {
		return err
	}
	defer raw.Close()
	pkgs, listErr := discover(raw)
	if pkgRE != "" {
		re, err := regexp.Compile(pkgRE)
		if err != nil {
			return err
		}
		pkgs = slices.DeleteFunc(pkgs, func(p string) bool { return !re.MatchString(p) })
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("no benchmarks found (%s)", listErr)
	}
	rep := &report{GeneratedAt: started.UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Commit: gitCommit()}
	if listErr != nil {
		rep.ListErrors = listErr.Error()
	}
	costPath, err := filepath.Abs(filepath.Join(outDir, "cost-model.json"))
	if err != nil {
		return err
	}
	_ = os.Remove(costPath)
	if err := os.Setenv(costEnv, costPath); err != nil {
		return err
	}
	failed := false
	for _, pkg := range pkgs {
		bt := benchtime
		if bt == "" {
			bt = benchtimeFor(pkg)
		}
		var skip []string
		for name, abt := range aloneIn(pkg) {
			if benchtime != "" {
				abt = benchtime
			}
			res := runPkg(pkg, "^"+name+"$", "", abt, count, timeout, raw)
			if res.Error != "" {
				failed = true
			}
			rep.Packages = append(rep.Packages, res)
			skip = append(skip, "^"+name+"$")
		}
		res := runPkg(pkg, benchRE, strings.Join(skip, "|"), bt, count, timeout, raw)
		if res.Error != "" {
			failed = true
		}
		rep.Packages = append(rep.Packages, res)
	}
	rep.Pairs = pairs(rep.Packages)
	rep.Acceptance = acceptance(rep.Packages)
	if b, err := os.ReadFile(costPath); err == nil && json.Valid(b) {
		rep.Cost = b
	}
	rep.Seconds = time.Since(started).Seconds()
	md := markdown(rep)
	fmt.Print(md)
	if err := os.WriteFile(filepath.Join(outDir, "bench.md"), []byte(md), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(outDir, "bench.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if failed {
		return errors.New("some benchmark packages failed; see the report and bench.txt")
	}
	return nil
}

func benchtimeFor(pkg string) string {
	for suffix, bt := range benchtimes {
		if strings.HasSuffix(pkg, "/"+suffix) {
			return bt
		}
	}
	return defaultBenchtime
}

// discover lists the packages that have benchmarks. Packages that fail to
// build are reported, not fatal.
func discover(raw io.Writer) ([]string, error) {
	cmd := exec.Command("go", "test", "-list", "Benchmark.*", "./...")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	fmt.Fprintf(raw, "$ go test -list 'Benchmark.*' ./...\n%s%s\n", stdout.String(), stderr.String())
	var pkgs []string
	var pending int
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && strings.HasPrefix(f[0], "Benchmark"):
			pending++
		case len(f) >= 2 && f[0] == "ok":
			if pending > 0 {
				pkgs = append(pkgs, f[1])
			}
			pending = 0
		case len(f) >= 1:
			pending = 0
		}
	}
	if runErr != nil {
		msg := strings.TrimSpace(stderr.String() + "\n" + failLines(stdout.String()))
		return pkgs, fmt.Errorf("go test -list: %v: %s", runErr, msg)
	}
	return pkgs, nil
}

func failLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func gitCommit() string {
	b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(b))
	if st, err := exec.Command("git", "status", "--porcelain").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "+dirty"
	}
	return c
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-(\d+))?\s+(\d+)\s+(.+)$`)

// aloneIn is the benchmarks of pkg run on their own, with their benchtime.
func aloneIn(pkg string) map[string]string {
	for suffix, m := range alone {
		if strings.HasSuffix(pkg, "/"+suffix) {
			return m
		}
	}
	return nil
}

func runPkg(pkg, benchRE, skipRE, benchtime string, count int, timeout string, raw io.Writer) *pkgResult {
	res := &pkgResult{Pkg: pkg, Benchtime: benchtime, Count: count}
	args := []string{"test", "-run", "^$", "-bench", benchRE, "-benchmem", "-count", strconv.Itoa(count), "-benchtime", benchtime, "-timeout", timeout}
	if skipRE != "" {
		args = append(args, "-skip", skipRE)
	}
	args = append(args, pkg)
	fmt.Fprintf(os.Stderr, "$ go %s\n", strings.Join(args, " "))
	fmt.Fprintf(raw, "$ go %s\n", strings.Join(args, " "))
	start := time.Now()
	cmd := exec.Command("go", args...)
	var buf bytes.Buffer
	w := io.MultiWriter(&buf, raw, os.Stderr)
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	res.Seconds = time.Since(start).Seconds()
	if err != nil {
		res.Error = fmt.Sprintf("%v: %s", err, strings.TrimSpace(failLines(buf.String())))
	}
	byName := map[string]*benchmark{}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		fields := strings.Fields(m[4])
		if len(fields)%2 != 0 {
			continue
		}
		bm := byName[m[1]]
		if bm == nil {
			procs, _ := strconv.Atoi(m[2])
			bm = &benchmark{Name: m[1], Procs: procs, Metrics: map[string]float64{}, Samples: map[string][]float64{}}
			byName[m[1]] = bm
			res.Benchmarks = append(res.Benchmarks, bm)
		}
		iters, _ := strconv.Atoi(m[3])
		bm.Runs++
		bm.Iters = append(bm.Iters, iters)
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			bm.Samples[fields[i+1]] = append(bm.Samples[fields[i+1]], v)
		}
	}
	for _, bm := range res.Benchmarks {
		for unit, vs := range bm.Samples {
			bm.Metrics[unit] = median(vs)
		}
	}
	return res
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func splitName(name string) (top, sub string) {
	top, sub, _ = strings.Cut(name, "/")
	return top, sub
}

func joinName(top, sub string) string {
	if sub == "" {
		return top
	}
	return top + "/" + sub
}

// baselineOf returns the benchmark that name is a baseline of, if any.
func baselineOf(pkg, name string) (string, bool) {
	top, sub := splitName(name)
	for suffix, m := range aliases {
		if strings.HasSuffix(pkg, "/"+suffix) {
			if of, ok := m[top]; ok {
				return joinName(of, sub), true
			}
		}
	}
	if i := strings.Index(top, "Baseline"); i > len("Benchmark") {
		return joinName(top[:i], sub), true
	}
	return "", false
}

func pairs(pkgs []*pkgResult) []pair {
	var out []pair
	for _, p := range pkgs {
		byName := map[string]*benchmark{}
		for _, b := range p.Benchmarks {
			byName[b.Name] = b
		}
		for _, base := range p.Benchmarks {
			of, ok := baselineOf(p.Pkg, base.Name)
			if !ok {
				continue
			}
			bm, ok := byName[of]
			if !ok {
				continue
			}
			pr := pair{Pkg: p.Pkg, Benchmark: bm.Name, Baseline: base.Name, Ratios: map[string]float64{}, Values: map[string][2]float64{}}
			for unit, v := range bm.Metrics {
				bv, ok := base.Metrics[unit]
				if !ok || bv == 0 {
					continue
				}
				pr.Ratios[unit] = v / bv
				pr.Values[unit] = [2]float64{v, bv}
			}
			out = append(out, pr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Pkg != out[j].Pkg {
			return out[i].Pkg < out[j].Pkg
		}
		return out[i].Benchmark < out[j].Benchmark
	})
	return out
}

func find(pkgs []*pkgResult, suffix, name string) (*benchmark, string) {
	for _, p := range pkgs {
		if !strings.HasSuffix(p.Pkg, "/"+suffix) {
			continue
		}
		for _, b := range p.Benchmarks {
			if b.Name == name {
				return b, p.Pkg
			}
		}
	}
	return nil, ""
}

func acceptance(pkgs []*pkgResult) []check {
	var out []check
	for _, t := range targets {
		c := check{Check: t.Check, Where: t.Benchmark, Metric: t.Metric}
		if t.Strict {
			c.Target = "< " + num(t.Max)
		} else {
			c.Target = "≤ " + num(t.Max)
		}
		if b, _ := find(pkgs, t.Pkg, t.Benchmark); b != nil {
			if v, ok := b.Metrics[t.Metric]; ok {
				c.Value, c.Measured = v, true
				c.Met = v <= t.Max && (!t.Strict || v < t.Max)
			}
		}
		out = append(out, c)
	}
	for _, t := range floors {
		c := check{Check: t.Check, Where: t.Benchmark, Metric: t.Metric, Target: "≥ " + num(t.Max)}
		if b, _ := find(pkgs, t.Pkg, t.Benchmark); b != nil {
			if v, ok := b.Metrics[t.Metric]; ok {
				c.Value, c.Measured, c.Met = v, true, v >= t.Max
			}
		}
		out = append(out, c)
	}
	// Issue 27: the merge's peak heap does not grow with its inputs (4x
	// the input bytes from 64 to 256 MiB; from 64 MiB on every input holds
	// its two read ranges).
	for _, metric := range []string{"peak-heap-MiB", "peak-live-MiB"} {
		small, _ := find(pkgs, "shared/core/compact", "BenchmarkExecutorMergeHeap/in=64MiB")
		large, _ := find(pkgs, "shared/core/compact", "BenchmarkExecutorMergeHeap/in=256MiB")
		c := check{Check: "compaction merge memory does not grow with its inputs (64 -> 256 MiB)", Where: "BenchmarkExecutorMergeHeap/in=256MiB", Metric: metric}
		if small != nil && large != nil {
			s, l := small.Metrics[metric], large.Metrics[metric]
			c.Target = fmt.Sprintf("≤ 64 MiB figure (%s) + %d", num(s), flatnessMB)
			c.Value, c.Measured = l, true
			c.Met = l <= s+flatnessMB
		}
		out = append(out, c)
	}
	// Streaming read: peak heap flat across collection sizes.
	for _, metric := range []string{"peak-heap-MB", "peak-live-MB"} {
		small, _ := find(pkgs, "shared/core/lineage", "BenchmarkEach/objects=250000")
		large, _ := find(pkgs, "shared/core/lineage", "BenchmarkEach/objects=1000000")
		c := check{Check: "streaming read (lineage.Each) memory does not grow with the collection (set grows 4x, ~300 MB)",
			Where: "BenchmarkEach/objects=1000000", Metric: metric}
		if small != nil && large != nil {
			s, l := small.Metrics[metric], large.Metrics[metric]
			c.Target = fmt.Sprintf("≤ 250k figure (%s) + %d", num(s), flatnessMB)
			c.Value, c.Measured = l, true
			c.Met = l <= s+flatnessMB
		}
		out = append(out, c)
	}
	return out
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case v == math.Trunc(v) && a < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func ratio(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f×", v)
	case v >= 0.01:
		return fmt.Sprintf("%.3g×", v)
	default:
		return fmt.Sprintf("%.2g× (1/%.0f)", v, 1/v)
	}
}

// preferred metric order in tables; others follow alphabetically.
var metricOrder = []string{"ns/op", "cpu-ms/op", "aws-calls/op", "peak-heap-MB", "peak-live-MB", "alloc-MB/op", "B/op", "allocs/op", "MB/s", "objects/s"}

func orderMetrics(units map[string]bool) []string {
	var out []string
	for _, u := range metricOrder {
		if units[u] {
			out = append(out, u)
		}
	}
	var rest []string
	for u := range units {
		if !slices.Contains(metricOrder, u) {
			rest = append(rest, u)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func markdown(r *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark report\n\n")
	fmt.Fprintf(&b, "Generated %s by `make bench` (cmd/benchreport) · %s · %d CPUs · commit %s · %.0f s total.\n\n", r.GeneratedAt, r.GoVersion, r.CPUs, r.Commit, r.Seconds)
	fmt.Fprintf(&b, "Ratios are benchmark ÷ baseline measured in the same process and run (`BenchmarkX` vs `BenchmarkXBaseline*`). CPU (`cpu-ms/op`, getrusage) and heap (`peak-heap-MB`, HeapInuse peak above the heap after a forced GC) are process-wide; in shared/core/observe that includes the embedded S3/DynamoDB/SQS servers answering the observer.\n\n")
	if r.ListErrors != "" {
		fmt.Fprintf(&b, "> Discovery reported errors (packages that do not build were skipped):\n>\n> ```\n%s\n> ```\n\n", indentQuote(r.ListErrors))
	}
	fmt.Fprintf(&b, "## Acceptance (issues 7, 10, 12, 16, 26 and 27)\n\n| Check | Benchmark | Metric | Measured | Target | Met |\n|---|---|---|---:|---|---|\n")
	for _, c := range r.Acceptance {
		v, met := "not measured", "—"
		if c.Measured {
			v, met = num(c.Value), map[bool]string{true: "yes", false: "**NO**"}[c.Met]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", c.Check, c.Where, c.Metric, v, c.Target, met)
	}
	costMarkdown(&b, r.Cost)
	fmt.Fprintf(&b, "\n## Ratios against baselines\n\n| Package | Benchmark | Baseline | Metric | Benchmark value | Baseline value | Ratio |\n|---|---|---|---|---:|---:|---:|\n")
	for _, p := range r.Pairs {
		units := map[string]bool{}
		for u := range p.Ratios {
			units[u] = true
		}
		for _, u := range orderMetrics(units) {
			v := p.Values[u]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", short(p.Pkg), p.Benchmark, p.Baseline, u, num(v[0]), num(v[1]), ratio(p.Ratios[u]))
		}
	}
	fmt.Fprintf(&b, "\n## All results\n")
	for _, p := range r.Packages {
		fmt.Fprintf(&b, "\n### %s\n\n`-benchtime %s -count %d`, %.0f s", short(p.Pkg), p.Benchtime, p.Count, p.Seconds)
		if p.Error != "" {
			fmt.Fprintf(&b, " — **FAILED**: `%s`", strings.ReplaceAll(p.Error, "\n", " "))
		}
		fmt.Fprintf(&b, "\n\n")
		if len(p.Benchmarks) == 0 {
			continue
		}
		units := map[string]bool{}
		for _, bm := range p.Benchmarks {
			for u := range bm.Metrics {
				units[u] = true
			}
		}
		cols := orderMetrics(units)
		fmt.Fprintf(&b, "| Benchmark | iterations |")
		for _, c := range cols {
			fmt.Fprintf(&b, " %s |", c)
		}
		fmt.Fprintf(&b, "\n|---|---:|%s\n", strings.Repeat("---:|", len(cols)))
		for _, bm := range p.Benchmarks {
			its := make([]string, len(bm.Iters))
			for i, n := range bm.Iters {
				its[i] = strconv.Itoa(n)
			}
			fmt.Fprintf(&b, "| %s | %s |", bm.Name, strings.Join(its, ","))
			for _, c := range cols {
				if v, ok := bm.Metrics[c]; ok {
					fmt.Fprintf(&b, " %s |", num(v))
				} else {
					fmt.Fprintf(&b, " |")
				}
			}
			fmt.Fprintf(&b, "\n")
		}
	}
	return b.String()
}

func short(pkg string) string {
	if i := strings.Index(pkg, "/shared/"); i >= 0 {
		return pkg[i+1:]
	}
	if i := strings.Index(pkg, "/cmd/"); i >= 0 {
		return pkg[i+1:]
	}
	return pkg
}

func indentQuote(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// costMarkdown renders the cost models (issues 16 and 27): for each
// workload USD per million commits, its cost per commit by AWS API and by
// function, and for the demo workload the cost per unit of work.
func costMarkdown(b *strings.Builder, raw json.RawMessage) {
	fmt.Fprintf(b, "\n## Cost model (issues 16 and 27)\n\n")
	var f costFile
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || len(f.Workloads) == 0 {
		fmt.Fprintf(b, "Not measured (BenchmarkCostModel in shared/testkit/e2e did not run).\n")
		return
	}
	c0 := f.Workloads[0]
	fmt.Fprintf(b, "BenchmarkCostModel on the embedded stack, every queue delivered. Prices: %s, %s (`demo.PriceTable`: %s). %s.\n\n",
		c0.PriceDate, c0.PriceRegion, c0.PriceSource, c0.Caveat)
	fmt.Fprintf(b, "| workload | collections | commits | measured | USD per million commits | whole run | GB-seconds at the measured run time instead |\n|---|---:|---:|---|---:|---:|---:|\n")
	for _, c := range f.Workloads {
		fmt.Fprintf(b, "| %s | %d | %d | %s (%d commits) | **%s** | %s | %s |\n", c.Workload, c.Collections, c.Commits, c.Measured, c.MeasuredCommits,
			num(c.USDPerM), num(c.WholeRunPerM), num(c.PerCommit.USDAtMeasured*1e6))
	}
	for _, c := range f.Workloads {
		fmt.Fprintf(b, "\n### %s workload\n\n%s.\n\n", c.Workload, c.Description)
		costPerCommit(b, c)
		if len(c.PerUnit) > 0 {
			costPerUnit(b, c)
		}
	}
}

// costPerCommit: per commit, by AWS API (requests and micro-USD) and by
// function, with Lambda's own line items.
func costPerCommit(b *strings.Builder, c costModel) {
	pc := c.PerCommit
	fmt.Fprintf(b, "Per commit: %s AWS requests, %s GB-s, USD %s.\n\n| API | requests per commit | µUSD per commit | share |\n|---|---:|---:|---:|\n",
		num(pc.Requests), num(pc.GBSeconds), num(pc.USD))
	apis := make([]string, 0, len(pc.ByAPI))
	for api := range pc.ByAPI {
		apis = append(apis, api)
	}
	sort.Slice(apis, func(i, j int) bool { return pc.ByAPI[apis[i]].USD > pc.ByAPI[apis[j]].USD })
	share := func(v float64) string {
		if pc.USD <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f%%", 100*v/pc.USD)
	}
	for _, api := range apis {
		a := pc.ByAPI[api]
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", api, num(a.Requests), num(a.USD*1e6), share(a.USD))
	}
	fmt.Fprintf(b, "| Lambda GB-seconds (modelled; measured in process: %s) | %s GB-s | %s | %s |\n", num(pc.MeasuredGBSeconds), num(pc.GBSeconds), num(pc.GBSecondsUSD*1e6), share(pc.GBSecondsUSD))
	fmt.Fprintf(b, "| Lambda requests | | %s | %s |\n", num(pc.LambdaRequestsUSD*1e6), share(pc.LambdaRequestsUSD))
	fns := make([]string, 0, len(pc.ByFunction))
	for fn := range pc.ByFunction {
		fns = append(fns, fn)
	}
	slices.Sort(fns)
	fmt.Fprintf(b, "\n| function | µUSD per commit | share |\n|---|---:|---:|\n")
	for _, fn := range fns {
		fmt.Fprintf(b, "| %s | %s | %s |\n", fn, num(pc.ByFunction[fn]*1e6), share(pc.ByFunction[fn]))
	}
	fmt.Fprintf(b, "\n")
}

// costPerUnit renders the demo workload's cost per unit of work: one column
// per unit, one row per AWS API, then GB-seconds and USD.
func costPerUnit(b *strings.Builder, c costModel) {
	units := []string{"committed_head", "compaction", "transition", "gc_task", "reconciled_collection"}
	apis := map[string]bool{}
	for _, u := range units {
		for api := range c.PerUnit[u].Requests {
			apis[api] = true
		}
	}
	fmt.Fprintf(b, "| per unit |")
	for _, u := range units {
		fmt.Fprintf(b, " %s (%s) |", u, num(c.Units[u]))
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---:|", len(units)))
	sorted := make([]string, 0, len(apis))
	for api := range apis {
		sorted = append(sorted, api)
	}
	slices.Sort(sorted)
	row := func(name string, v func(u string) float64) {
		fmt.Fprintf(b, "| %s |", name)
		for _, u := range units {
			fmt.Fprintf(b, " %s |", num(v(u)))
		}
		fmt.Fprintf(b, "\n")
	}
	for _, api := range sorted {
		row(api, func(u string) float64 { return c.PerUnit[u].Requests[api] })
	}
	row("Lambda GB-seconds", func(u string) float64 { return c.PerUnit[u].GBSeconds })
	row("USD", func(u string) float64 { return c.PerUnit[u].USD })
	fmt.Fprintf(b, "\nUnits: a committed head = the observer in the commit phase; a compaction = compaction and handoff functions in the commit phase; a transition = the same in the transition phase (with any compaction that phase's append made due: %s rewrites for %s transitions); a GC task = the GC function in the GC phase; a reconciled collection = the observer there.\n",
		num(c.Units["rewrites_in_transition_phase"]), num(c.Units["transition"]))
}
