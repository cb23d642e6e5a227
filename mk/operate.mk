# Operating a stack: drive it and look at it (README "Operating it").
.PHONY: workload bcc

LOCAL_ENDPOINT ?= http://127.0.0.1:4566
BCC_ARGS       ?= status

workload: ## drive a stack (default make local's): create collections, commit appends/deletes at a rate, drop and replace (WORKLOAD_ARGS)
	$(GO) run ./cmd/workload -endpoint $(LOCAL_ENDPOINT) $(WORKLOAD_ARGS)

bcc: ## the operator CLI against make local's stack, e.g. make bcc BCC_ARGS="leases -json"
	$(GO) run ./cmd/bcc $(BCC_ARGS) -endpoint $(LOCAL_ENDPOINT) -ccs $(LOCAL_ENDPOINT)/_bcc/ccs
