# Benchmarks: runs every package's benchmarks (discovered with
# `go test -list`), pairs each BenchmarkX with its BenchmarkXBaseline*
# measured in the same run, and writes out/bench.md, out/bench.json and the
# raw output out/bench.txt, and the cost model (BenchmarkCostModel on the
# demo's workload and on a steady-state one: USD per million commits, the cost
# per commit by AWS API and by function, the demo's per unit of work) in
# out/cost-model.json and the report. BCC_BENCH_STEADY_COLLECTIONS shrinks the
# steady workload (default 100 collections).
# BENCH_FLAGS passes options to cmd/benchreport,
# e.g. BENCH_FLAGS='-count 3' or BENCH_FLAGS='-pkg observe'.
BENCH_FLAGS ?=

.PHONY: bench
bench: ## Run the benchmarks and write out/bench.md and out/bench.json (~20 min on 2 cores: the fleet benchmarks run minutes each)
	$(GO) run ./cmd/benchreport -out out $(BENCH_FLAGS)
