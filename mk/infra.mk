# Infrastructure targets: Lambda builds, CDK synth/deploy/destroy, infra tests,
# and the LocalStack path. Included by the root Makefile (include mk/*.mk);
# also usable alone: make -f mk/infra.mk synth
#
# Deploy parameters (each becomes CDK context when set; see infra/stack.go):
#   PREFIX              resource name prefix (default from cdk.json: bcc)
#   DATA_BUCKET         import this existing data bucket instead of creating one
#   NONCURRENT_VERSION_DAYS  days a created data bucket keeps a deleted object's previous version (default: GC horizons + 7)
#   PUBLISHER_ENDPOINT  Manifest Publisher base URL
#   CCS_ENDPOINT        Catalog Control Service base URL
#   WATERMARK_BUCKET    bucket of the query plane's global_safe_ts (default: data bucket)
#   WATERMARK_KEY       key of that watermark (default: resources WatermarkKey)
#   ALARM_EMAIL         create an alarm topic with this email subscription, or
#   ALARM_TOPIC_ARN     send alarms to this existing SNS topic, or
#   NO_ALARM_DESTINATION=true  alarms that notify no one, on purpose (make plan/deploy refuse a deploy without one of the three)
#   SANDBOX=true        a demo-account stack that deploys the stand-in publisher, CCS and watermark with it
#                       (without it, PUBLISHER_ENDPOINT and CCS_ENDPOINT are required: synthesis refuses otherwise)
#   FIXED_NAMES=true    name resources <prefix>-* (resources.For) instead of CloudFormation's generated names
#   BCC_POLICY_JSON     optional JSON policy override (BCC_POLICY)
#   HEAD_EVENTS         notification (default) or eventbridge (a bucket that already notifies others for the head keys)
#   OWNER_AUTH          sigv4 (default: owner calls signed, IAM-authorized) or none
#   OWNER_SIGNING       <service>:<region> for an owner host that does not say (a custom domain)
#   PUBLISHER_INVOKE_ARN, CCS_INVOKE_ARN  what the functions may invoke (default: derived from an API Gateway URL)
#   TRACING             true: X-Ray active tracing
#   VPC_ID, VPC_SUBNET_IDS, VPC_SECURITY_GROUP_IDS  place the functions in a VPC (comma-separated lists)
#   CDK_DEPLOY_FLAGS    extra flags for cdk deploy/destroy (e.g. --require-approval never, --force)
#   CDK_SYNTH_FLAGS     extra flags for cdk synth (e.g. -c key=value)

INFRA_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
INFRA_BUILD_DIR ?= $(INFRA_ROOT)/build
INFRA_NODE_BIN := $(INFRA_ROOT)/node_modules/.bin
INFRA_NPM_STAMP := $(INFRA_ROOT)/node_modules/.package-lock.json
INFRA_FUNCTIONS = $(notdir $(patsubst %/,%,$(dir $(wildcard $(INFRA_ROOT)/functions/*/main.go))))
# The sandbox stack's stand-ins (sandbox/<name>/main.go; shared/devstack, never in functions/).
INFRA_STANDINS = $(notdir $(patsubst %/,%,$(dir $(wildcard $(INFRA_ROOT)/sandbox/*/main.go))))
INFRA_COMPOSE ?= docker compose
LOCALSTACK_ENDPOINT ?= http://localhost:4566

# The machine's Node (mk/need.sh checks it is 20 or newer; jsii's end-of-life
# banner for 20 silenced), the CLI from node_modules/.bin by its path (never
# first on PATH), no CLI telemetry, no notices (cdk.json), and for offline
# commands no instance-metadata probe.
INFRA_NODE_ENV = JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true
INFRA_NEED = $(INFRA_ROOT)/mk/need.sh
INFRA_OFFLINE_ENV = AWS_EC2_METADATA_DISABLED=true
LOCALSTACK_S3_ENDPOINT ?= http://s3.localhost.localstack.cloud:4566
# LocalStack's fixed test credentials (not secrets); cdklocal drops other AWS_*
# variables unless allow-listed, and needs the S3 endpoint named separately.
INFRA_LOCAL_CREDS = AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
INFRA_LOCAL_ENV = $(INFRA_LOCAL_CREDS) AWS_ENDPOINT_URL=$(LOCALSTACK_ENDPOINT) AWS_ENDPOINT_URL_S3=$(LOCALSTACK_S3_ENDPOINT) \
	AWS_ENVAR_ALLOWLIST=AWS_EC2_METADATA_DISABLED,AWS_REGION,AWS_DEFAULT_REGION

INFRA_CONTEXT = -c assetDir=$(INFRA_BUILD_DIR) \
	$(if $(PREFIX),-c prefix=$(PREFIX)) \
	$(if $(DATA_BUCKET),-c dataBucketName=$(DATA_BUCKET)) \
	$(if $(NONCURRENT_VERSION_DAYS),-c noncurrentVersionDays=$(NONCURRENT_VERSION_DAYS)) \
	$(if $(PUBLISHER_ENDPOINT),-c publisherEndpoint=$(PUBLISHER_ENDPOINT)) \
	$(if $(CCS_ENDPOINT),-c ccsEndpoint=$(CCS_ENDPOINT)) \
	$(if $(WATERMARK_BUCKET),-c watermarkBucket=$(WATERMARK_BUCKET)) \
	$(if $(WATERMARK_KEY),-c watermarkKey=$(WATERMARK_KEY)) \
	$(if $(ALARM_EMAIL),-c alarmEmail=$(ALARM_EMAIL)) \
	$(if $(ALARM_TOPIC_ARN),-c alarmTopicArn=$(ALARM_TOPIC_ARN)) \
	$(if $(NO_ALARM_DESTINATION),-c noAlarmDestination=$(NO_ALARM_DESTINATION)) \
	$(if $(SANDBOX),-c sandbox=$(SANDBOX)) \
	$(if $(FIXED_NAMES),-c fixedNames=$(FIXED_NAMES)) \
	$(if $(BCC_POLICY_JSON),-c 'policy=$(BCC_POLICY_JSON)') \
	$(if $(HEAD_EVENTS),-c headEvents=$(HEAD_EVENTS)) \
	$(if $(OWNER_AUTH),-c ownerAuth=$(OWNER_AUTH)) \
	$(if $(OWNER_SIGNING),-c ownerSigning=$(OWNER_SIGNING)) \
	$(if $(PUBLISHER_INVOKE_ARN),-c publisherInvokeArn=$(PUBLISHER_INVOKE_ARN)) \
	$(if $(CCS_INVOKE_ARN),-c ccsInvokeArn=$(CCS_INVOKE_ARN)) \
	$(if $(TRACING),-c tracing=$(TRACING)) \
	$(if $(VPC_ID),-c vpcId=$(VPC_ID)) \
	$(if $(VPC_SUBNET_IDS),-c vpcSubnetIds=$(VPC_SUBNET_IDS)) \
	$(if $(VPC_SECURITY_GROUP_IDS),-c vpcSecurityGroupIds=$(VPC_SECURITY_GROUP_IDS))

# bootstrap and destroy deploy no template of this app: the CLI synthesizes
# it only for the stack's name (destroy) and environment (bootstrap). Given no
# owner endpoints (nor anything a sandbox refuses), they synthesize it as a
# sandbox, whose stand-ins make build builds: neither needs the owners' URLs,
# which a fresh account (bootstrap) or a removed deployment (destroy) may not have.
# The stack keeps the production name (<prefix>-coordinator): only
# SANDBOX=true names the sandbox's stack (<prefix>-sandbox).
INFRA_NAME_ONLY = $(if $(PUBLISHER_ENDPOINT)$(CCS_ENDPOINT)$(SANDBOX)$(DATA_BUCKET)$(WATERMARK_BUCKET)$(OWNER_SIGNING)$(PUBLISHER_INVOKE_ARN)$(CCS_INVOKE_ARN)$(filter none,$(OWNER_AUTH)),,-c sandbox=true -c stackName=$(or $(PREFIX),bcc)-coordinator)

INFRA_CDK = cd $(INFRA_ROOT) && $(INFRA_NODE_ENV) $(INFRA_NODE_BIN)/cdk --no-notices
INFRA_CDK_OFFLINE = cd $(INFRA_ROOT) && $(INFRA_NODE_ENV) $(INFRA_OFFLINE_ENV) $(INFRA_NODE_BIN)/cdk --no-notices
INFRA_CDKLOCAL = cd $(INFRA_ROOT) && $(INFRA_NODE_ENV) $(INFRA_LOCAL_ENV) $(INFRA_NODE_BIN)/cdklocal --no-notices

.PHONY: build synth synth-fresh plan bootstrap deploy destroy test-infra npm-ci npm-platforms infra-tools localstack-up localstack-down deploy-local synth-local e2e-localstack infra-clean

infra-tools: ## check the tools the infra targets need (Go, Node 20+, npm): one line per missing tool
	@$(INFRA_NEED) infra go node npm

build: ## every functions/<name>/main.go -> build/<name>/bootstrap, sandbox/<name>/main.go -> build/sandbox/<name>/bootstrap (linux/arm64, stripped)
	@$(INFRA_NEED) build go
	@test -n "$(INFRA_FUNCTIONS)" || { echo "build: no functions/*/main.go found" >&2; exit 1; }
	@set -e; cd $(INFRA_ROOT); for f in $(INFRA_FUNCTIONS) $(addprefix sandbox/,$(INFRA_STANDINS)); do \
		src=./functions/$$f; case $$f in sandbox/*) src=./$$f;; esac; \
		echo "build $$src -> $(INFRA_BUILD_DIR)/$$f/bootstrap"; \
		mkdir -p $(INFRA_BUILD_DIR)/$$f; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o $(INFRA_BUILD_DIR)/$$f/bootstrap $$src; \
	done

npm-ci: infra-tools ## install the CDK CLI and cdklocal exactly as package-lock.json says (Node is the machine's)
	cd $(INFRA_ROOT) && npm ci --no-audit --no-fund

npm-platforms: ## npm ci (dry run) passes npm's platform check as darwin/arm64, darwin/x64, linux/arm64 and linux/x64 hosts
	$(INFRA_ROOT)/mk/npm-platforms.sh

$(INFRA_NPM_STAMP): $(INFRA_ROOT)/package-lock.json
	@$(INFRA_NEED) infra go node npm
	cd $(INFRA_ROOT) && npm ci --no-audit --no-fund

synth: infra-tools build $(INFRA_NPM_STAMP) ## build the functions, then synthesize offline (no credentials needed); cdk-nag runs here too
	$(INFRA_CDK_OFFLINE) synth -q $(INFRA_CONTEXT) $(CDK_SYNTH_FLAGS)

synth-fresh: ## `make synth` in a clean copy of the tree (no build/, cdk.out, node_modules) with CDK's slow-synthesis path forced
	$(INFRA_ROOT)/mk/synth-fresh.sh

plan: ## what a deploy with these parameters creates and needs (no AWS calls); refuses without owner endpoints or SANDBOX=true, and without ALARM_EMAIL, ALARM_TOPIC_ARN or NO_ALARM_DESTINATION=true
	@$(INFRA_NEED) plan go
	cd $(INFRA_ROOT)/infra && $(INFRA_NODE_ENV) go run . -plan $(INFRA_CONTEXT)

bootstrap: infra-tools build $(INFRA_NPM_STAMP) ## once per account/region: the CDK bootstrap stack (the app synthesizes, so the functions are built first)
	$(INFRA_CDK) bootstrap $(INFRA_CONTEXT) $(INFRA_NAME_ONLY) $(CDK_DEPLOY_FLAGS)

deploy: infra-tools plan build $(INFRA_NPM_STAMP) ## print the plan, then deploy to the account/region of your AWS credentials (after make bootstrap)
	$(INFRA_CDK) deploy $(INFRA_CONTEXT) $(CDK_DEPLOY_FLAGS)

destroy: infra-tools build $(INFRA_NPM_STAMP) ## delete the stack (a created data bucket and its access-log bucket are retained, never deleted)
	$(INFRA_CDK) destroy $(INFRA_CONTEXT) $(INFRA_NAME_ONLY) $(CDK_DEPLOY_FLAGS)

test-infra: $(INFRA_NPM_STAMP) npm-platforms ## vet and test the CDK app (assertions, cdk-nag, cfn-lint); builds the real functions itself; npm's platform check as other hosts
	@$(INFRA_NEED) test-infra go node cfn-lint
	cd $(INFRA_ROOT)/infra && go vet ./... && $(INFRA_NODE_ENV) go test ./... -count=1

localstack-up: ## start LocalStack from localstack/docker-compose.yml (needs Docker with Compose)
	@INFRA_COMPOSE="$(INFRA_COMPOSE)" $(INFRA_NEED) localstack-up compose
	$(INFRA_COMPOSE) -f $(INFRA_ROOT)/localstack/docker-compose.yml up -d --wait

localstack-down: ## stop LocalStack and remove its volume
	@INFRA_COMPOSE="$(INFRA_COMPOSE)" $(INFRA_NEED) localstack-down compose
	$(INFRA_COMPOSE) -f $(INFRA_ROOT)/localstack/docker-compose.yml down -v

synth-local: infra-tools build $(INFRA_NPM_STAMP) ## what deploy-local deploys, synthesized through cdklocal (no LocalStack needed)
	$(INFRA_CDKLOCAL) synth -q $(INFRA_CONTEXT)

deploy-local: infra-tools build $(INFRA_NPM_STAMP) ## bootstrap and deploy the stack into a running LocalStack
	$(INFRA_CDKLOCAL) bootstrap $(INFRA_CONTEXT)
	$(INFRA_CDKLOCAL) deploy --require-approval never $(INFRA_CONTEXT)

e2e-localstack: ## the end-to-end tests against LocalStack (after localstack-up; each test provisions its own resources)
	cd $(INFRA_ROOT) && $(INFRA_LOCAL_CREDS) BCC_E2E_ENDPOINT=$(LOCALSTACK_ENDPOINT) go test ./shared/testkit/e2e/... -run . -count=1

infra-clean: ## remove build/ and cdk.out
	rm -rf $(INFRA_BUILD_DIR) $(INFRA_ROOT)/cdk.out $(INFRA_ROOT)/infra/cdk.out
