// Command sim runs the coordinator's deterministic fault simulation.
//
//	go run ./cmd/sim -seeds 10000          # many seeds, all workers
//	go run ./cmd/sim -seed 42 -v           # replay one seed with its full trace
//	go run ./cmd/sim -seeds 500 -guard-off delete_gates   # a mutation
//
// It prints seeds/s, total steps, the count of each fault injected and every
// violation (with the trace that led to it and the command that replays
// it), and exits 1 when any invariant was violated.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/searchfabric/bcc/shared/testkit/sim"
)

func main() {
	seeds := flag.Int("seeds", 100, "number of seeds to run (starting at -first)")
	first := flag.Uint64("first", 1, "first seed of a batch")
	seed := flag.Int64("seed", -1, "run exactly this seed (replay)")
	steps := flag.Int("steps", 60, "faulty steps per seed before the quiescent phase")
	guardOff := flag.String("guard-off", "", "comma-separated guards to switch off (mutation proof)")
	verbose := flag.Bool("v", false, "print the full trace of the seed (with -seed)")
	workers := flag.Int("workers", 0, "parallel workers (default GOMAXPROCS)")
	races := flag.Bool("handoff-races", false, "let head-moving actions interleave inside the handoff's judge-then-cutover window")
	stopFirst := flag.Bool("stop", false, "stop at the first violating seed")
	flag.Parse()

	g, err := sim.GuardsWithout(strings.Split(*guardOff, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	replay := func(s uint64) string {
		cmd := fmt.Sprintf("go run ./cmd/sim -seed %d -steps %d -v", s, *steps)
		mk := fmt.Sprintf("make sim SEED=%d SIM_STEPS=%d", s, *steps)
		if *guardOff != "" {
			cmd += " -guard-off " + *guardOff
			mk += " GUARD_OFF=" + *guardOff
		}
		if *races {
			cmd += " -handoff-races"
		}
		return cmd + "   (or: " + mk + ")"
	}

	if *seed >= 0 {
		cfg := sim.Config{Seed: uint64(*seed), Steps: *steps, Guards: g, HandoffRaces: *races}
		if *verbose {
			cfg.Trace = func(s string) { fmt.Println(s) }
		}
		r := sim.Run(cfg)
		printCounts(r.Counts)
		fmt.Printf("seed %d: %d steps\n", r.Seed, r.Steps)
		if len(r.Violations) > 0 {
			report(r.Violations[0], !*verbose, replay)
			os.Exit(1)
		}
		fmt.Println("no violations")
		return
	}

	sum := sim.RunBatch(sim.Batch{First: *first, Seeds: *seeds, Steps: *steps, Guards: g, Workers: *workers, StopAtFirst: *stopFirst, HandoffRaces: *races})
	fmt.Printf("simulated %d seeds (%d..%d), %d steps in %s: %.1f seeds/s, %.0f steps/s\n", sum.Seeds, *first, *first+uint64(*seeds)-1, sum.Steps,
		sum.Elapsed.Round(1e6), float64(sum.Seeds)/sum.Elapsed.Seconds(), float64(sum.Steps)/sum.Elapsed.Seconds())
	if *guardOff != "" {
		fmt.Printf("guards off: %s\n", *guardOff)
	}
	printCounts(sum.Counts)
	// The last line is the plain summary test runners read: seeds are the tests.
	summary := fmt.Sprintf("sim: %d passed, %d failed", sum.Seeds-len(sum.Violations), len(sum.Violations))
	if len(sum.Violations) == 0 {
		fmt.Println("violations: 0")
		fmt.Println(summary)
		return
	}
	fmt.Printf("violations: %d seeds\n", len(sum.Violations))
	for i, v := range sum.Violations {
		if i == 0 {
			report(v, true, replay)
			shrunk, sv := sim.Shrink(sim.Config{Seed: v.Seed, Steps: *steps, Guards: g, HandoffRaces: *races}, v)
			fmt.Printf("minimal trace: seed %d reproduces %s with %d faulty steps (of %d):\n", v.Seed, sv.Invariant, shrunk.Steps, *steps)
			for _, l := range sv.Trace {
				fmt.Println("  " + l)
			}
			fmt.Printf("replay the minimal run: %s\n", strings.NewReplacer(fmt.Sprintf("-steps %d", *steps), fmt.Sprintf("-steps %d", shrunk.Steps),
				fmt.Sprintf("SIM_STEPS=%d", *steps), fmt.Sprintf("SIM_STEPS=%d", shrunk.Steps)).Replace(replay(v.Seed)))
			continue
		}
		if i < 20 {
			fmt.Printf("  %s\n    replay: %s\n", v, replay(v.Seed))
		}
	}
	fmt.Println(summary)
	os.Exit(1)
}

func printCounts(c map[string]int) {
	fmt.Println("faults and events injected:")
	keys := slices.Clone(sim.FaultKinds)
	for k := range c {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		fmt.Printf("  %-34s %d\n", k, c[k])
	}
}

func report(v sim.Violation, trace bool, replay func(uint64) string) {
	fmt.Printf("VIOLATION %s\n", v)
	if trace {
		fmt.Printf("trace (last %d lines):\n", len(v.Trace))
		for _, l := range v.Trace {
			fmt.Println("  " + l)
		}
	}
	fmt.Printf("replay: %s\n", replay(v.Seed))
}
