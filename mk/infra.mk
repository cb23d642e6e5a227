# Infrastructure targets: Lambda builds, CDK synth/deploy/destroy, infra tests,
# and the LocalStack path. Included by the root Makefile (include mk/*.mk);
# also usable alone: make -f mk/infra.mk synth
#
# Deploy parameters (each becomes CDK context when set; see infra/stack.go):
#   PREFIX              resource name prefix (default from cdk.json: bcc)
#   DATA_BUCKET         import this existing data bucket instead of creating one
#   PUBLISHER_ENDPOINT  Manifest Publisher base URL
#   CCS_ENDPOINT        Catalog Control Service base URL
#   WATERMARK_BUCKET    bucket of the query plane's global_safe_ts (default: data bucket)
#   WATERMARK_KEY       key of that watermark (default: resources WatermarkKey)
#   ALARM_EMAIL         create an alarm topic with this email subscription, or
#   ALARM_TOPIC_ARN     send alarms to this existing SNS topic
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
INFRA_COMPOSE ?= docker compose
LOCALSTACK_ENDPOINT ?= http://localhost:4566

# Node 22 from node_modules first (no end-of-life banner), no CLI telemetry,
# no notices (cdk.json), and for offline commands no instance-metadata probe.
INFRA_NODE_ENV = PATH="$(INFRA_NODE_BIN):$$PATH" JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true
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
	$(if $(PUBLISHER_ENDPOINT),-c publisherEndpoint=$(PUBLISHER_ENDPOINT)) \
	$(if $(CCS_ENDPOINT),-c ccsEndpoint=$(CCS_ENDPOINT)) \
	$(if $(WATERMARK_BUCKET),-c watermarkBucket=$(WATERMARK_BUCKET)) \
	$(if $(WATERMARK_KEY),-c watermarkKey=$(WATERMARK_KEY)) \
	$(if $(ALARM_EMAIL),-c alarmEmail=$(ALARM_EMAIL)) \
	$(if $(ALARM_TOPIC_ARN),-c alarmTopicArn=$(ALARM_TOPIC_ARN)) \
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

INFRA_CDK = cd $(INFRA_ROOT) && $(INFRA_NODE_ENV) $(INFRA_NODE_BIN)/cdk --no-notices
INFRA_CDK_OFFLINE = cd $(INFRA_ROOT) && $(INFRA_NODE_ENV) $(INFRA_OFFLINE_ENV) $(INFRA_NODE_BIN)/cdk --no-notices
INFRA_CDKLOCAL = cd $(INFRA_ROOT) && $(INFRA_NODE_ENV) $(INFRA_LOCAL_ENV) $(INFRA_NODE_BIN)/cdklocal --no-notices

.PHONY: build synth synth-fresh plan bootstrap deploy destroy test-infra npm-ci localstack-up localstack-down deploy-local synth-local e2e-localstack infra-clean

build: ## every functions/<name>/main.go -> build/<name>/bootstrap (linux/arm64, stripped)
	@test -n "$(INFRA_FUNCTIONS)" || { echo "build: no functions/*/main.go found" >&2; exit 1; }
	@set -e; cd $(INFRA_ROOT); for f in $(INFRA_FUNCTIONS); do \
		echo "build $$f -> $(INFRA_BUILD_DIR)/$$f/bootstrap"; \
		mkdir -p $(INFRA_BUILD_DIR)/$$f; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o $(INFRA_BUILD_DIR)/$$f/bootstrap ./functions/$$f; \
	done

npm-ci: ## install the CDK CLI, cdklocal and Node 22 exactly as package-lock.json says
	cd $(INFRA_ROOT) && npm ci --no-audit --no-fund

$(INFRA_NPM_STAMP): $(INFRA_ROOT)/package-lock.json
	cd $(INFRA_ROOT) && npm ci --no-audit --no-fund

synth: build $(INFRA_NPM_STAMP) ## build the functions, then synthesize offline (no credentials needed); cdk-nag runs here too
	$(INFRA_CDK_OFFLINE) synth -q $(INFRA_CONTEXT) $(CDK_SYNTH_FLAGS)

synth-fresh: ## `make synth` in a clean copy of the tree (no build/, cdk.out, node_modules) with CDK's slow-synthesis path forced
	$(INFRA_ROOT)/mk/synth-fresh.sh

plan: ## print what a deploy with these parameters creates and what it needs (no AWS calls)
	cd $(INFRA_ROOT)/infra && $(INFRA_NODE_ENV) go run . -plan $(INFRA_CONTEXT)

bootstrap: build $(INFRA_NPM_STAMP) ## once per account/region: the CDK bootstrap stack (the app synthesizes, so the functions are built first)
	$(INFRA_CDK) bootstrap $(INFRA_CONTEXT) $(CDK_DEPLOY_FLAGS)

deploy: plan build $(INFRA_NPM_STAMP) ## print the plan, then deploy to the account/region of your AWS credentials (after make bootstrap)
	$(INFRA_CDK) deploy $(INFRA_CONTEXT) $(CDK_DEPLOY_FLAGS)

destroy: build $(INFRA_NPM_STAMP) ## delete the stack (a created data bucket and its access-log bucket are retained, never deleted)
	$(INFRA_CDK) destroy $(INFRA_CONTEXT) $(CDK_DEPLOY_FLAGS)

test-infra: $(INFRA_NPM_STAMP) ## vet and test the CDK app (assertions, cdk-nag, cfn-lint); builds the real functions itself
	@command -v cfn-lint >/dev/null || { echo "test-infra: cfn-lint is not in PATH (TestCfnLintIsClean needs it)" >&2; exit 1; }
	cd $(INFRA_ROOT)/infra && go vet ./... && $(INFRA_NODE_ENV) go test ./... -count=1

localstack-up: ## start LocalStack from localstack/docker-compose.yml (needs Docker)
	$(INFRA_COMPOSE) -f $(INFRA_ROOT)/localstack/docker-compose.yml up -d --wait

localstack-down: ## stop LocalStack and remove its volume
	$(INFRA_COMPOSE) -f $(INFRA_ROOT)/localstack/docker-compose.yml down -v

synth-local: build $(INFRA_NPM_STAMP) ## what deploy-local deploys, synthesized through cdklocal (no LocalStack needed)
	$(INFRA_CDKLOCAL) synth -q $(INFRA_CONTEXT)

deploy-local: build $(INFRA_NPM_STAMP) ## bootstrap and deploy the stack into a running LocalStack
	$(INFRA_CDKLOCAL) bootstrap $(INFRA_CONTEXT)
	$(INFRA_CDKLOCAL) deploy --require-approval never $(INFRA_CONTEXT)

e2e-localstack: ## the end-to-end tests against LocalStack (after localstack-up; each test provisions its own resources)
	cd $(INFRA_ROOT) && $(INFRA_LOCAL_CREDS) BCC_E2E_ENDPOINT=$(LOCALSTACK_ENDPOINT) go test ./shared/testkit/e2e/... -run . -count=1

infra-clean: ## remove build/ and cdk.out
	rm -rf $(INFRA_BUILD_DIR) $(INFRA_ROOT)/cdk.out $(INFRA_ROOT)/infra/cdk.out
