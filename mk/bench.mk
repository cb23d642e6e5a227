# Benchmarks: runs every package's benchmarks (discovered with
# `go test -list`), pairs each BenchmarkX with its BenchmarkXBaseline*
# measured in the same run, and writes out/bench.md, out/bench.json and the
# raw output out/bench.txt, and the cost model (BenchmarkCostModel: requests
# by API, GB-seconds and USD per committed head, compaction, transition and
# GC task, USD per million commits) in out/cost-model.json and the report.
# BENCH_FLAGS passes options to cmd/benchreport,
# e.g. BENCH_FLAGS='-count 3' or BENCH_FLAGS='-pkg observe'.
BENCH_FLAGS ?=

.PHONY: bench
bench: ## Run the benchmarks and write out/bench.md and out/bench.json (~20 min on 2 cores: the fleet benchmarks run minutes each)
	$(GO) run ./cmd/benchreport -out out $(BENCH_FLAGS)
