package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// contextArgs collects repeated -c key=value flags (as the CDK CLI takes them).
type contextArgs map[string]any

func (c contextArgs) String() string { return fmt.Sprint(map[string]any(c)) }

func (c contextArgs) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("-c %q: want key=value", kv)
	}
	c[k] = v
	return nil
}

// planContext is cdk.json's context with the -c values on top: what the
// CLI will hand the app.
func planContext(root string, extra contextArgs) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(root, "cdk.json"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("cdk.json: %w", err)
	}
	for k, v := range extra {
		f.Context[k] = v
	}
	return f.Context, nil
}

// WritePlan prints what a deploy with cfg creates and what it needs, before
// anything talks to AWS (make deploy runs it first). It returns an error
// when the configuration cannot deploy at all.
func WritePlan(w io.Writer, cfg Config) error {
	pol, err := policy.Parse([]byte(cfg.Policy))
	if err != nil {
		return fmt.Errorf("context %s: %w", CtxPolicy, err)
	}
	def := resources.For(cfg.Prefix, pol)
	if err := validate(def, cfg); err != nil {
		return err
	}
	if err := checkAlarmDestination(cfg); err != nil {
		return err
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	named := func(name string) string {
		if cfg.FixedNames {
			return name
		}
		return "(generated name; stands for " + name + ")"
	}
	retained := func(name string) string { // retained by make destroy, so never a fixed name
		return "(generated name; stands for " + name + "; RETAINED by make destroy with its messages)"
	}
	p("Stack %s will create (settings from resources.For(%q, policy); every resource tagged %s=%s):", cfg.StackName, cfg.Prefix, TagDeployment, cfg.Prefix)
	if cfg.Sandbox {
		p("  - SANDBOX (a demo account only): the stand-in Manifest Publisher and Catalog Control Service as functions behind one HTTP API")
		p("    (every route IAM-authorized; the coordinator signs its calls as it does to real owners), the stand-in query-plane")
		p("    watermark published every %s, and the stand-in CCS's own table %s", resources.SandboxDefinition().WatermarkEvery, named(def.CCSTable.Name))
	}
	if cfg.DataBucketName != "" {
		p("  - data bucket: none; uses your bucket %s (imported: its encryption, policy and logging stay yours)", cfg.DataBucketName)
	} else {
		p("  - data bucket with a generated name (see output DataBucketName) and an access-log bucket; both are RETAINED by make destroy")
	}
	switch cfg.HeadEvents {
	case resources.HeadEventsEventBridge:
		p("  - head events through EventBridge: the bucket's EventBridge delivery switched on (its other notifications kept) and rule %s (keys %s) -> %s",
			def.Bucket.EventRule, def.Bucket.HeadKeyWildcard, def.Bucket.NotifyFunction)
	default:
		p("  - a notification on the bucket: object created %s*%s -> %s (kept: the bucket's other notifications; S3 refuses an overlapping one: then use -c %s=%s)",
			def.Bucket.NotifyPrefix, def.Bucket.NotifySuffix, def.Bucket.NotifyFunction, CtxHeadEvents, resources.HeadEventsEventBridge)
	}
	p("  - DynamoDB table %s (on demand, PITR; destroyed by make destroy: its content is disposable)", named(def.Table.Name))
	for _, q := range def.Queues {
		p("  - FIFO queue %s (high throughput: %v) + DLQ %s -> %s", named(q.Name), q.HighThroughput, retained(q.DLQName), q.Consumer)
	}
	p("  - standard queue %s (failed head events)", retained(def.Bucket.NotifyFailureQueue))
	for _, f := range def.Functions {
		p("  - function %s (arm64, %d MB, %s timeout, own role and log group with %s retention, JSON logs)", named(def.FunctionName(f.Name)), f.MemoryMB, f.Timeout, logRetentionText)
	}
	p("  - reconcile schedule every %s; dashboard %s (filtered on Deployment=%s); alarms", def.ReconcileSchedule, named(cfg.Prefix+"-coordinator"), cfg.Prefix)
	if cfg.Tracing {
		p("  - X-Ray active tracing on every function")
	}
	if cfg.VpcID != "" {
		p("  - functions in VPC %s, subnets %s, security groups %s", cfg.VpcID, strings.Join(cfg.VpcSubnetIDs, ","), strings.Join(cfg.VpcSecurityGroups, ","))
	}
	p("")
	p("It needs:")
	p("  - AWS credentials for the target account and region (the CLI uses the default credential chain)")
	p("  - the CDK bootstrap stack (CDKToolkit) in that account and region: once, `make bootstrap`")
	p("  - function binaries: `make deploy` builds them first (build/<function>/bootstrap)")
	owners, err := resolveOwners(cfg, "aws", "<this account>")
	if err != nil {
		return err
	}
	if cfg.Sandbox {
		owners = nil
		p("  - nothing from an owner: the functions call the stand-ins' API, allowed execute-api:Invoke on exactly the routes each calls")
	}
	for _, o := range owners {
		p("  - the %s API to accept SigV4 (API Gateway AWS_IAM, or a function URL with AWS_IAM) and its resource policy to admit the function roles; they will be allowed %s on %s (each function only the routes it calls)",
			o.name, strings.Join(o.actions, ","), strings.Join(o.resource, ", "))
	}
	if cfg.AlarmEmail == "" && cfg.AlarmTopicArn == "" {
		p("  - nothing for the alarms: NO_ALARM_DESTINATION=true was given, so they change state and notify no one")
	}
	if cfg.VpcID != "" {
		p("  - in that VPC: gateway endpoints for S3 and DynamoDB, interface endpoints for SQS (and execute-api for a private owner API), or a NAT gateway")
	}
	return nil
}

// knownContextKeys are the context keys the app reads; -plan refuses others
// (a typo would otherwise deploy the default silently).
var knownContextKeys = []string{CtxPrefix, CtxStackName, CtxAssetDir, CtxDataBucketName, CtxPublisherEndpoint, CtxCCSEndpoint,
	CtxWatermarkBucket, CtxWatermarkKey, CtxPolicy, CtxAlarmEmail, CtxAlarmTopicArn, CtxHeadEvents, CtxOwnerAuth, CtxOwnerSigning,
	CtxPublisherInvokeArn, CtxCCSInvokeArn, CtxTracing, CtxVpcID, CtxVpcSubnetIDs, CtxVpcSecurityGroups,
	CtxSandbox, CtxFixedNames, CtxNoAlarmDestination, CtxNoncurrentVersionDays}

// ErrNoAlarmDestination begins make plan's refusal of a deploy whose
// alarms would notify no one, unless that was asked for.
const ErrNoAlarmDestination = "no alarm destination"

// checkAlarmDestination makes an alarm destination a decision: an email,
// a topic, or an explicit "none is wanted".
func checkAlarmDestination(cfg Config) error {
	if cfg.AlarmEmail != "" || cfg.AlarmTopicArn != "" || cfg.NoAlarmDestination {
		return nil
	}
	return fmt.Errorf("%s: the stack's alarms would change state and notify no one. Set ALARM_EMAIL=oncall@example.com (-c %s=...: a topic with that subscription) "+
		"or ALARM_TOPIC_ARN=arn:aws:sns:... (-c %s=...: an existing topic), or NO_ALARM_DESTINATION=true (-c %s=true) if none is wanted",
		ErrNoAlarmDestination, CtxAlarmEmail, CtxAlarmTopicArn, CtxNoAlarmDestination)
}

func checkContextKeys(extra contextArgs) error {
	for k := range extra {
		if !slices.Contains(knownContextKeys, k) && !strings.Contains(k, ":") && !strings.HasPrefix(k, "@") {
			return fmt.Errorf("-c %s: not a context key of this app (known: %s)", k, strings.Join(knownContextKeys, ", "))
		}
	}
	return nil
}
