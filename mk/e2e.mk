# The end-to-end suite (shared/testkit/e2e) on other backends and under the
# deployed IAM policies. Both targets synthesize first: the policies are
# read from the synthesized template, never restated.
#
#   make e2e-iam    embedded stack; each function signs as its own identity
#                   and every AWS call it makes is judged against its role's
#                   policy in cdk.out (iamcheck); a denial fails the test.
#   make e2e-moto   the same with S3, DynamoDB and SQS served by moto_server
#                   (started by the test binary on a free loopback port with
#                   IAM access control on, stopped at its end): moto enforces
#                   the policies too. Our code still delivers S3 events and
#                   runs the SQS event source mappings and the functions.
#
# Which stack: e2e-iam synthesizes the sandbox stack (SANDBOX=true: the
# stand-in owners deployed with it) unless owner endpoints are given;
# e2e-moto the stack next to real owners (example API Gateway endpoints)
# unless SANDBOX=true is given. CI runs both, so both stacks' policies pass
# the suite. The coordinator's roles are the same in both but for the
# owner routes they may invoke.
#
# E2E_FLAGS passes flags to go test (e.g. E2E_FLAGS='-run Compaction -v').
# BCC_E2E_IAM_DROP=<function>:<statement> removes one deployed statement (trials).
E2E_STACK    = $(or $(PREFIX),bcc)-$(if $(SANDBOX),sandbox,coordinator)
E2E_TEMPLATE = $(INFRA_ROOT)/cdk.out/$(E2E_STACK).template.json
E2E_FLAGS   ?=

E2E_EXAMPLE_PUBLISHER = https://p1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod
E2E_EXAMPLE_CCS       = https://c1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod

.PHONY: e2e-iam e2e-moto

e2e-iam: SANDBOX ?= $(if $(PUBLISHER_ENDPOINT)$(CCS_ENDPOINT),,true)
e2e-moto: PUBLISHER_ENDPOINT ?= $(if $(SANDBOX),,$(E2E_EXAMPLE_PUBLISHER))
e2e-moto: CCS_ENDPOINT ?= $(if $(SANDBOX),,$(E2E_EXAMPLE_CCS))

e2e-iam: synth ## e2e suite with every function under its deployed IAM policy (read from the synthesized template)
	mkdir -p $(INFRA_ROOT)/out
	cd $(INFRA_ROOT) && BCC_E2E_TEMPLATE=$(E2E_TEMPLATE) BCC_E2E_IAM_REPORT=$(INFRA_ROOT)/out/iam-statements.md \
		$(GO) test ./shared/testkit/e2e/ -count=1 $(E2E_FLAGS)

e2e-moto: synth ## e2e suite on moto_server (S3, DynamoDB, SQS; IAM access control on), functions under their deployed policies
	@$(INFRA_NEED) e2e-moto moto_server
	cd $(INFRA_ROOT) && BCC_E2E_MOTO=1 BCC_E2E_TEMPLATE=$(E2E_TEMPLATE) \
		$(GO) test ./shared/testkit/e2e/ ./shared/testkit/moto/ ./shared/testkit/fidelity/ -count=1 -timeout 30m $(E2E_FLAGS)
