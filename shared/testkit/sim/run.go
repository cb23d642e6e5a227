package sim

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/searchfabric/bcc/shared/guard"
)

// Result is one seed's outcome.
type Result struct {
	Seed       uint64
	Steps      int
	Counts     map[string]int
	Violations []Violation
}

// TraceTail is how many trace lines a violation carries.
const TraceTail = 60

// Run simulates one seed.
func Run(cfg Config) (res Result) {
	w := newWorld(cfg)
	defer func() {
		if r := recover(); r != nil {
			w.violate("no-panic", "the simulation panicked: %v", r)
			res = w.result()
		}
	}()
	w.run()
	return w.result()
}

func (w *World) result() Result {
	res := Result{Seed: w.cfg.Seed, Steps: w.StepsRun, Counts: w.Counts, Violations: w.violations}
	if len(res.Violations) > 0 {
		tail := w.trace[max(0, len(w.trace)-TraceTail):]
		res.Violations[0].Trace = slices.Clone(tail)
	}
	return res
}

// GuardsWithout returns guard.All() with every named guard off.
func GuardsWithout(names []string) (guard.Set, error) {
	g := guard.All()
	for _, n := range names {
		if n == "" {
			continue
		}
		var ok bool
		if g, ok = g.Off(n); !ok {
			return g, fmt.Errorf("unknown guard %q (known: %s)", n, strings.Join(guard.Names(), ", "))
		}
	}
	return g, nil
}

// Batch runs many seeds.
type Batch struct {
	First   uint64 // first seed
	Seeds   int
	Steps   int
	Guards  guard.Set
	Workers int // default GOMAXPROCS
	// StopAtFirst stops scheduling seeds after the first violation.
	StopAtFirst  bool
	HandoffRaces bool
}

// Summary aggregates a batch.
type Summary struct {
	Seeds      int
	Steps      int
	Counts     map[string]int
	Violations []Violation // first violation of each failing seed, by seed
	Elapsed    time.Duration
}

// RunBatch runs the seeds First..First+Seeds-1 on Workers goroutines (each
// seed is independent and single-threaded, so results are deterministic).
func RunBatch(b Batch) Summary {
	start := time.Now()
	workers := b.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var stop atomic.Bool
	var mu sync.Mutex
	sum := Summary{Counts: map[string]int{}}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !stop.Load() {
				i := next.Add(1) - 1
				if i >= int64(b.Seeds) {
					return
				}
				r := Run(Config{Seed: b.First + uint64(i), Steps: b.Steps, Guards: b.Guards, HandoffRaces: b.HandoffRaces})
				mu.Lock()
				sum.Seeds++
				sum.Steps += r.Steps
				for k, v := range r.Counts {
					sum.Counts[k] += v
				}
				if len(r.Violations) > 0 {
					sum.Violations = append(sum.Violations, r.Violations[0])
					if b.StopAtFirst {
						stop.Store(true)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(sum.Violations, func(a, b Violation) int {
		switch {
		case a.Seed < b.Seed:
			return -1
		case a.Seed > b.Seed:
			return 1
		}
		return 0
	})
	sum.Elapsed = time.Since(start)
	return sum
}

// Shrink looks for the fewest faulty steps with which cfg's seed still
// violates the same invariant, and returns that configuration and its
// violation with the whole trace of the shortened run (not only its tail).
// A seed's schedule is drawn step by step from one stream, so a run with
// fewer steps replays a prefix of the longer one followed by the quiescent
// phase; a binary search over the step count finds a short reproducing
// prefix in O(log steps) runs. (The search assumes that reproducing is
// monotone in the step count; when it is not, the result is still a
// reproducing run, only perhaps not the shortest.)
func Shrink(cfg Config, v Violation) (Config, Violation) {
	reproduces := func(steps int) (Violation, bool) {
		c := cfg
		c.Steps, c.Trace = steps, nil
		r := Run(c)
		for _, got := range r.Violations {
			if got.Invariant == v.Invariant {
				return got, true
			}
		}
		return Violation{}, false
	}
	lo, hi := 0, cfg.Steps // hi reproduces
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if _, ok := reproduces(mid); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	best := cfg
	best.Steps = hi
	var lines []string
	traced := best
	traced.Trace = func(s string) { lines = append(lines, s) }
	r := Run(traced)
	for _, got := range r.Violations {
		if got.Invariant == v.Invariant {
			got.Trace = lines
			return best, got
		}
	}
	return cfg, v
}
