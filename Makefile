# Background Compute Coordinator — developer entry points.
# `make demo` runs the main job on the embedded stack; `make test` runs every test.
SHELL := /bin/bash
GO    ?= go
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.DEFAULT_GOAL := help

include $(wildcard mk/*.mk)

.PHONY: help demo local test test-go test-race vet fmt sim

help: ## list targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | sort | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'
	@grep -hE '^## [a-zA-Z0-9_./ -]+:' $(MAKEFILE_LIST) | sed -E 's/^## ([^:]+): */  \1|/' | awk -F'|' '{printf "  %-16s %s\n", $$1, $$2}' 

demo: ## run the product's main job on the embedded local stack (20 collections x 10 commits)
	$(GO) run ./cmd/demo $(DEMO_ARGS)

local: ## the embedded AWS stack with the product on 127.0.0.1:4566, as deployed 30x faster (reconcile every 10 s; LOCAL_ARGS='-time-scale N')
	$(GO) run ./cmd/local $(LOCAL_ARGS)

vet: ## go vet (root module)
	$(GO) vet ./...

fmt: ## gofmt check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test-go: vet fmt ## root module tests (race detector on)
	@mk/need.sh test-go go cc
	$(GO) test -race -count=1 -timeout 60m ./...

RACE_PKGS ?= ./...
test-race: ## root module tests under the race detector without vet/fmt; narrow with RACE_PKGS=./shared/core/... RACE_FLAGS='-run X'
	@mk/need.sh test-race go cc
	$(GO) test -race -count=1 -timeout 30m $(RACE_FLAGS) $(RACE_PKGS)

test: test-go test-infra sim-ci ## every test: root module (race detector), CDK infra, and a 1000-seed fault simulation
