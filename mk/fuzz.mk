# Fuzzing: every Go fuzz target of the repository (discovered with
# `go test -list '^Fuzz' ./...`) runs for FUZZTIME, one after another, and
# cmd/fuzzreport writes out/fuzz.md, out/fuzz.json and out/fuzz/<Target>.log.
# A failing input lands in the package's testdata/fuzz/<Target>/, which
# `make test` replays from then on (as it replays every input there).
# FUZZ_ONLY=regexp runs a subset (e.g. FUZZ_ONLY='Segment|SQSD');
# FUZZ_PARALLEL sets the fuzzing workers per target (default: GOMAXPROCS).
FUZZTIME          ?= 30s
FUZZ_ONLY         ?=
FUZZ_PARALLEL     ?= 0
FUZZ_MINIMIZETIME ?= 200x

.PHONY: fuzz fuzz-list
fuzz: ## run every fuzz target for FUZZTIME (default 30s; FUZZ_ONLY=regexp for a subset); report in out/fuzz.md
	$(GO) run ./cmd/fuzzreport -fuzztime $(FUZZTIME) -minimizetime $(FUZZ_MINIMIZETIME) -parallel $(FUZZ_PARALLEL) $(if $(FUZZ_ONLY),-only '$(FUZZ_ONLY)') -out out

fuzz-list: ## list the fuzz targets make fuzz runs
	@$(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { t[n++] = $$1 } /^ok/ { for (i = 0; i < n; i++) print $$2, t[i]; n = 0 }'
