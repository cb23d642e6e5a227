# Operating a stack: drive it and look at it (docs/operations.md, docs/bcc.md).
.PHONY: workload bcc bcc-local

LOCAL_ENDPOINT ?= http://127.0.0.1:4566
BCC_BIN        ?= bin/bcc
BCC_ARGS       ?= status

workload: ## drive a stack (default make local's): create collections, commit appends/deletes at a rate, drop and replace (WORKLOAD_ARGS)
	$(GO) run ./cmd/workload -endpoint $(LOCAL_ENDPOINT) $(WORKLOAD_ARGS)

bcc: ## build the operator CLI to bin/bcc (its exit codes hold for the built binary; go run turns every failure into 1)
	$(GO) build -o $(BCC_BIN) ./cmd/bcc

bcc-local: bcc ## bin/bcc against make local's stack, e.g. make bcc-local BCC_ARGS="leases -o json"
	$(BCC_BIN) --stack bcc-coordinator --endpoint-url $(LOCAL_ENDPOINT) $(BCC_ARGS)
