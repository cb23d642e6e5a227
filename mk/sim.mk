# Deterministic fault simulation (shared/testkit/sim, cmd/sim): many random
# schedules of the real use cases with faults at every step and invariants
# after each. SEEDS seeds per run; SEED=N replays one seed with its full
# trace; GUARD_OFF=name[,name] runs a mutation (a guard switched off);
# SIM_FLAGS passes anything else to cmd/sim (e.g. -first 5000, -stop).
SEEDS     ?= 1000
SIM_STEPS ?= 60
SEED      ?=
GUARD_OFF ?=
SIM_FLAGS ?=
SIM_CI_SEEDS ?= 1000

sim_guard = $(if $(GUARD_OFF),-guard-off $(GUARD_OFF))

.PHONY: sim sim-ci
sim: ## fault simulation over SEEDS seeds (default 1000); SEED=N replays one seed with its trace
	@if [ -n "$(SEED)" ]; then \
		$(GO) run ./cmd/sim -seed $(SEED) -steps $(SIM_STEPS) -v $(sim_guard) $(SIM_FLAGS); \
	else \
		$(GO) run ./cmd/sim -seeds $(SEEDS) -steps $(SIM_STEPS) $(sim_guard) $(SIM_FLAGS); \
	fi

sim-ci: ## small fault simulation for CI (SIM_CI_SEEDS seeds, well under 60 s on 2 cores)
	$(GO) run ./cmd/sim -seeds $(SIM_CI_SEEDS) -steps $(SIM_STEPS)
