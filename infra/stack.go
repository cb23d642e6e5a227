package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Context keys the app reads (cdk.json "context", or `cdk -c key=value`).
const (
	CtxPrefix             = "prefix"              // resource name prefix, default "bcc"
	CtxStackName          = "stackName"           // default "<prefix>-coordinator", a sandbox's "<prefix>-sandbox"
	CtxAssetDir           = "assetDir"            // dir with <function>/bootstrap, default "build" (relative to the repo root)
	CtxDataBucketName     = "dataBucketName"      // import this existing bucket instead of creating one
	CtxPublisherEndpoint  = "publisherEndpoint"   // Manifest Publisher base URL
	CtxCCSEndpoint        = "ccsEndpoint"         // Catalog Control Service base URL
	CtxWatermarkBucket    = "watermarkBucket"     // bucket of the query plane's global_safe_ts (default: data bucket)
	CtxWatermarkKey       = "watermarkKey"        // key of the watermark (default: resources WatermarkKey)
	CtxPolicy             = "policy"              // optional JSON policy override (BCC_POLICY)
	CtxAlarmEmail         = "alarmEmail"          // create an alarm topic with this email subscription
	CtxAlarmTopicArn      = "alarmTopicArn"       // or send alarms to this existing topic
	CtxHeadEvents         = "headEvents"          // "notification" (default) or "eventbridge"
	CtxOwnerAuth          = "ownerAuth"           // "sigv4" (default) or "none"
	CtxOwnerSigning       = "ownerSigning"        // <service>:<region> for an owner host that does not say (a custom domain)
	CtxPublisherInvokeArn = "publisherInvokeArn"  // what the functions may invoke at the publisher (default: derived from an API Gateway URL)
	CtxCCSInvokeArn       = "ccsInvokeArn"        // the same for CCS
	CtxTracing            = "tracing"             // "true": X-Ray active tracing on every function
	CtxVpcID              = "vpcId"               // place the functions in this VPC ...
	CtxVpcSubnetIDs       = "vpcSubnetIds"        // ... in these subnets (comma-separated) ...
	CtxVpcSecurityGroups  = "vpcSecurityGroupIds" // ... with these security groups (comma-separated)
	CtxSandbox            = "sandbox"             // "true": deploy the stand-in publisher, CCS and watermark with the stack (a demo account)
	CtxFixedNames         = "fixedNames"          // "true": name resources <prefix>-* (resources.For) instead of generated names
	CtxNoAlarmDestination = "noAlarmDestination"  // "true": alarms that notify no one, on purpose (make plan refuses otherwise)
	// CtxNoncurrentVersionDays: how many days a created data bucket keeps
	// a deleted or overwritten object's previous version (the undo window);
	// default NoncurrentVersionDays of the policy.
	CtxNoncurrentVersionDays = "noncurrentVersionDays"
)

// IncidentMarginDays is how long, beyond GC's own horizons, a deleted
// object stays restorable by default: time to notice a wrong delete (a
// forged owner answer, a bad policy) and restore it (docs/operations.md,
// "Restoring deleted objects").
const IncidentMarginDays = 7

// NoncurrentVersionDays is the default undo window of a created data
// bucket under pol: the GC horizons an object outlives before it may be
// deleted at all (token lifetime plus retention window), in whole days,
// plus IncidentMarginDays.
func NoncurrentVersionDays(pol policy.Policy) int {
	horizon := pol.GC.TokenLifetime.D() + pol.GC.RetentionWindow.D()
	return int((horizon+24*time.Hour-1)/(24*time.Hour)) + IncidentMarginDays
}

// TagDeployment is the tag every resource of the stack carries, valued with
// the deployment's name (the prefix): with generated physical names it is
// how a console, a cost report or a script finds one deployment's resources.
const TagDeployment = "bcc:deployment"

// DefaultPrefix is the resource prefix when the context sets none.
const DefaultPrefix = "bcc"

// Config is everything the stack needs besides the resource definition.
type Config struct {
	Prefix             string
	StackName          string
	AssetDir           string
	DataBucketName     string
	PublisherEndpoint  string
	CCSEndpoint        string
	WatermarkBucket    string
	WatermarkKey       string
	Policy             string
	AlarmEmail         string
	AlarmTopicArn      string
	HeadEvents         string // resources.HeadEvents*
	OwnerAuth          string // resources.OwnerAuth*
	OwnerSigning       string
	PublisherInvokeArn string
	CCSInvokeArn       string
	Tracing            bool
	VpcID              string
	VpcSubnetIDs       []string
	VpcSecurityGroups  []string
	// Sandbox deploys the stand-in publisher, CCS and watermark with the
	// stack (sandbox.go): the whole pipeline in a demo account, with no
	// owner endpoints to give.
	Sandbox bool
	// FixedNames names every resource as resources.For(prefix) does
	// (<prefix>-compaction.fifo, <prefix>-coordinator, ...) instead of
	// CloudFormation's generated names.
	FixedNames bool
	// NoAlarmDestination says that alarms notifying no one are wanted
	// (make plan refuses a deploy without a destination otherwise).
	NoAlarmDestination bool
	// NoncurrentVersionDays is the created data bucket's undo window (0:
	// NoncurrentVersionDays of the policy).
	NoncurrentVersionDays int
}

// ConfigFromContext reads the configuration from a construct's context.
func ConfigFromContext(scope constructs.Construct) (Config, error) {
	node := scope.Node()
	return configFrom(func(key string) any { return node.TryGetContext(jsii.String(key)) })
}

// configFrom reads the configuration from context values (lookup returns
// nil for an unset key).
func configFrom(lookup func(key string) any) (Config, error) {
	get := func(key, def string) (string, error) {
		v := lookup(key)
		switch v := v.(type) {
		case nil:
			return def, nil
		case string:
			if v == "" {
				return def, nil
			}
			return strings.TrimSpace(v), nil
		default:
			return "", fmt.Errorf("context %q must be a string, got %T", key, v)
		}
	}
	var c Config
	var err error
	for _, f := range []struct {
		dst      *string
		key, def string
	}{
		{&c.Prefix, CtxPrefix, DefaultPrefix},
		{&c.StackName, CtxStackName, ""},
		{&c.AssetDir, CtxAssetDir, "build"},
		{&c.DataBucketName, CtxDataBucketName, ""},
		{&c.PublisherEndpoint, CtxPublisherEndpoint, ""},
		{&c.CCSEndpoint, CtxCCSEndpoint, ""},
		{&c.WatermarkBucket, CtxWatermarkBucket, ""},
		{&c.WatermarkKey, CtxWatermarkKey, ""},
		{&c.Policy, CtxPolicy, ""},
		{&c.AlarmEmail, CtxAlarmEmail, ""},
		{&c.AlarmTopicArn, CtxAlarmTopicArn, ""},
		{&c.HeadEvents, CtxHeadEvents, resources.HeadEventsNotification},
		{&c.OwnerAuth, CtxOwnerAuth, resources.OwnerAuthSigV4},
		{&c.OwnerSigning, CtxOwnerSigning, ""},
		{&c.PublisherInvokeArn, CtxPublisherInvokeArn, ""},
		{&c.CCSInvokeArn, CtxCCSInvokeArn, ""},
	} {
		if *f.dst, err = get(f.key, f.def); err != nil {
			return Config{}, err
		}
	}
	var subnets, groups string
	for _, f := range []struct {
		dst *string
		key string
	}{{&c.VpcID, CtxVpcID}, {&subnets, CtxVpcSubnetIDs}, {&groups, CtxVpcSecurityGroups}} {
		if *f.dst, err = get(f.key, ""); err != nil {
			return Config{}, err
		}
	}
	for _, f := range []struct {
		dst *bool
		key string
	}{{&c.Tracing, CtxTracing}, {&c.Sandbox, CtxSandbox}, {&c.FixedNames, CtxFixedNames}, {&c.NoAlarmDestination, CtxNoAlarmDestination}} {
		v := lookup(f.key)
		if b, ok := v.(bool); ok { // cdk.json may hold a JSON boolean
			*f.dst = b
			continue
		}
		s, err := get(f.key, "")
		if err != nil {
			return Config{}, err
		}
		switch s {
		case "", "false":
		case "true":
			*f.dst = true
		default:
			return Config{}, fmt.Errorf("context %s %q: want true or false", f.key, s)
		}
	}
	c.VpcSubnetIDs, c.VpcSecurityGroups = splitList(subnets), splitList(groups)
	if c.StackName == "" {
		// A sandbox is its own stack: `make deploy SANDBOX=true` in an
		// account that runs the production stack of the same prefix
		// creates a second stack beside it, never an update that swaps
		// the production owners for the stand-ins.
		c.StackName = DefaultStackName(c.Prefix, c.Sandbox)
	}
	switch v := lookup(CtxNoncurrentVersionDays).(type) {
	case nil:
	case float64: // cdk.json may hold a JSON number
		c.NoncurrentVersionDays = int(v)
		if float64(c.NoncurrentVersionDays) != v || v < 1 {
			return Config{}, fmt.Errorf("context %s %v: want a whole number of days >= 1", CtxNoncurrentVersionDays, v)
		}
	default:
		s, err := get(CtxNoncurrentVersionDays, "")
		if err != nil {
			return Config{}, err
		}
		if s != "" {
			if c.NoncurrentVersionDays, err = strconv.Atoi(s); err != nil || c.NoncurrentVersionDays < 1 {
				return Config{}, fmt.Errorf("context %s %q: want a whole number of days >= 1", CtxNoncurrentVersionDays, s)
			}
		}
	}
	return c, nil
}

// DefaultStackName is the stack a deployment of prefix gets unless named:
// "<prefix>-coordinator", or "<prefix>-sandbox" for a sandbox.
func DefaultStackName(prefix string, sandbox bool) string {
	if sandbox {
		return prefix + "-sandbox"
	}
	return prefix + "-coordinator"
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// CoordinatorStackProps configures NewCoordinatorStack.
type CoordinatorStackProps struct {
	awscdk.StackProps
	Config Config
}

// Coordinator gives tests and callers the constructs the stack made.
type Coordinator struct {
	Config     Config
	Stack      awscdk.Stack
	Definition resources.Definition
	Bucket     awss3.IBucket
	LogBucket  awss3.Bucket // nil when the data bucket is imported
	Table      awsdynamodb.Table
	Queues     map[string]awssqs.Queue // by class
	DLQs       map[string]awssqs.Queue // by class
	// NotifyFailures is the observer's on-failure destination: head
	// notifications whose asynchronous invocations all failed.
	NotifyFailures awssqs.Queue
	HeadEventRule  awsevents.Rule // EventBridge mode only
	Functions      map[string]awslambda.Function
	Roles          map[string]awsiam.Role
	AlarmTopic     awssns.ITopic // nil when no alarm destination is configured
	AlarmCount     int
	Owners         []ownerEndpoint // owner endpoints the functions sign their calls to
	Dashboard      awscloudwatch.Dashboard
	// PublisherURL and CCSURL are the owner base URLs the functions get
	// (the context's, or in sandbox mode the stand-in API's).
	PublisherURL, CCSURL *string
	// Sandbox is the stand-ins of a sandbox stack (nil otherwise).
	Sandbox *SandboxOwners
	// OperatorRecords is the managed policy, attached to no role, that
	// lets an operator write operator records (lineage confirmations).
	OperatorRecords awsiam.ManagedPolicy
	wmBucket        awss3.IBucket // the watermark's bucket, once imported
}

// physicalName is name when the deploy asked for fixed names, else nil:
// CloudFormation then generates a unique name (<stack>-<id>-<suffix>), so
// a change that replaces the resource, or a second stack with the same
// prefix, never collides with it. mark records name either way.
func (c *Coordinator) physicalName(name string) *string {
	if c.Config.FixedNames {
		return jsii.String(name)
	}
	return nil
}

// mark records on the CloudFormation resource behind construct the
// resources.For name it stands for (metadata resources.MetadataName),
// whether or not that is its physical name.
func mark(construct constructs.IConstruct, name string) {
	if r, ok := construct.Node().DefaultChild().(awscdk.CfnResource); ok {
		r.AddMetadata(jsii.String(resources.MetadataName), name)
	}
}

// NewCoordinatorStack builds the whole product from resources.Default(prefix).
// It returns an error, before creating any construct, when the configuration
// or the function assets are unusable, so that synthesis fails loudly.
func NewCoordinatorStack(scope constructs.Construct, id string, props *CoordinatorStackProps) (*Coordinator, error) {
	if props == nil {
		return nil, fmt.Errorf("NewCoordinatorStack: props are required")
	}
	cfg := props.Config
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.HeadEvents == "" {
		cfg.HeadEvents = resources.HeadEventsNotification
	}
	if cfg.OwnerAuth == "" {
		cfg.OwnerAuth = resources.OwnerAuthSigV4
	}
	// The functions get cfg.Policy as BCC_POLICY; their timeouts (and the
	// queues' visibility timeouts) come from the same policy.
	pol, err := policy.Parse([]byte(cfg.Policy))
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", CtxPolicy, err)
	}
	def := resources.For(cfg.Prefix, pol)
	if cfg.NoncurrentVersionDays == 0 {
		cfg.NoncurrentVersionDays = NoncurrentVersionDays(pol)
	}
	if err := validate(def, cfg); err != nil {
		return nil, err
	}
	assets, err := checkAssets(cfg.AssetDir, def.Functions)
	if err != nil {
		return nil, err
	}

	var standins map[string]string
	if cfg.Sandbox {
		if standins, err = checkAssets(filepath.Join(cfg.AssetDir, sandboxAssetDir), resources.SandboxDefinition().Functions); err != nil {
			return nil, fmt.Errorf("sandbox stand-ins: %w", err)
		}
	}

	sp := props.StackProps
	if sp.Description == nil {
		desc := "Background Compute Coordinator (" + cfg.Prefix + "): observer, FIFO task queues, compaction/GC/handoff workers"
		if cfg.Sandbox {
			desc += "; SANDBOX: with the stand-in publisher, CCS and watermark (a demo account only)"
		}
		sp.Description = jsii.String(desc)
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	// With generated physical names the tag is how one deployment's
	// resources are found (console, cost reports); metrics carry the same
	// name as their Deployment dimension, which the dashboard filters on.
	awscdk.Tags_Of(stack).Add(jsii.String(TagDeployment), jsii.String(cfg.Prefix), &awscdk.TagProps{
		// CloudFormation takes no tags on a dashboard (cfn-lint E3002).
		ExcludeResourceTypes: jsii.Strings("AWS::CloudWatch::Dashboard"),
	})
	c := &Coordinator{
		Config:       cfg,
		Stack:        stack,
		Definition:   def,
		Queues:       map[string]awssqs.Queue{},
		DLQs:         map[string]awssqs.Queue{},
		Functions:    map[string]awslambda.Function{},
		Roles:        map[string]awsiam.Role{},
		PublisherURL: jsii.String(cfg.PublisherEndpoint),
		CCSURL:       jsii.String(cfg.CCSEndpoint),
	}
	c.addBucket(cfg)
	c.addTable()
	c.addQueues()
	if cfg.Sandbox {
		c.addSandbox(standins)
	}
	if err := c.addFunctions(cfg, assets); err != nil {
		return nil, err
	}
	c.addPolicies(cfg)
	c.addHandoffQueuePolicy()
	c.addOperatorRecordsPolicy()
	owners, err := c.ownerEndpoints(cfg)
	if err != nil {
		return nil, err
	}
	c.Owners = owners
	c.addOwnerGrants(owners)
	c.addEventSources()
	c.addMonitoring(cfg)
	if err := c.addNotificationsHandlerLogs(); err != nil {
		return nil, err
	}
	c.addOutputs()
	if c.AlarmTopic == nil && !cfg.NoAlarmDestination {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("bcc:alarmTopic"), jsii.String(fmt.Sprintf(
			"no alarm destination: the stack's %d alarms change state but notify no one (set -c %s=you@example.com or -c %s=arn:aws:sns:..., or make deploy ALARM_EMAIL=... / ALARM_TOPIC_ARN=...; -c %s=true says none is wanted)",
			c.AlarmCount, CtxAlarmEmail, CtxAlarmTopicArn, CtxNoAlarmDestination)), nil)
	}
	if cfg.OwnerAuth == resources.OwnerAuthNone {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("bcc:ownerAuth"), jsii.String(fmt.Sprintf(
			"%s=%s: owner requests are not signed, so the publisher and CCS cannot tell the handoff (the only function that may submit cutovers and record release intents) from any other caller that reaches them; "+
				"they must authenticate callers themselves (a private network, mutual TLS) and admit the write routes from the handoff alone (docs/safety.md, \"Threat model\")",
			CtxOwnerAuth, resources.OwnerAuthNone)), nil)
	}
	if err := addSuppressions(c); err != nil {
		return nil, err
	}
	return c, nil
}

// validate checks the resource definition's invariants this stack relies on.
func validate(def resources.Definition, cfg Config) error {
	if def.Bucket.NotifyFunction == "" || def.Bucket.NotifySuffix == "" || def.Bucket.NotifyPrefix == "" {
		return fmt.Errorf("resources: bucket notification needs a function, a prefix and a suffix")
	}
	if _, ok := def.Function(def.Bucket.NotifyFunction); !ok {
		return fmt.Errorf("resources: bucket notifies unknown function %q", def.Bucket.NotifyFunction)
	}
	for _, q := range def.Queues {
		fn, ok := def.Function(q.Consumer)
		if !ok {
			return fmt.Errorf("resources: queue %s consumed by unknown function %q", q.Class, q.Consumer)
		}
		if !strings.HasSuffix(q.Name, ".fifo") || !strings.HasSuffix(q.DLQName, ".fifo") {
			return fmt.Errorf("resources: queue %s and its DLQ must be FIFO (.fifo names)", q.Class)
		}
		if q.VisibilityTimeout < awslimit.LambdaSQSVisibilityFactor*fn.Timeout {
			return fmt.Errorf("resources: queue %s visibility %s < %d x %s timeout %s", q.Class, q.VisibilityTimeout, awslimit.LambdaSQSVisibilityFactor, fn.Name, fn.Timeout)
		}
		if q.MaxReceiveCount < 1 || q.BatchSize < 1 {
			return fmt.Errorf("resources: queue %s needs MaxReceiveCount and BatchSize >= 1", q.Class)
		}
		if q.MaxConcurrency != 0 && q.MaxConcurrency < 2 {
			return fmt.Errorf("resources: queue %s MaxConcurrency must be >= 2 (Lambda minimum)", q.Class)
		}
	}
	if s := def.ReconcileSchedule; s < 60e9 || s%60e9 != 0 {
		return fmt.Errorf("resources: ReconcileSchedule %s must be a whole number of minutes", s)
	}
	if err := checkPoliciesCover(def); err != nil {
		return err
	}
	if cfg.AlarmEmail != "" && cfg.AlarmTopicArn != "" {
		return fmt.Errorf("context: set at most one of %s and %s", CtxAlarmEmail, CtxAlarmTopicArn)
	}
	if cfg.AlarmTopicArn != "" && !strings.HasPrefix(cfg.AlarmTopicArn, "arn:") {
		return fmt.Errorf("context: %s %q is not an ARN", CtxAlarmTopicArn, cfg.AlarmTopicArn)
	}
	if cfg.HeadEvents != resources.HeadEventsNotification && cfg.HeadEvents != resources.HeadEventsEventBridge {
		return fmt.Errorf("context: %s %q: want %s or %s", CtxHeadEvents, cfg.HeadEvents, resources.HeadEventsNotification, resources.HeadEventsEventBridge)
	}
	if cfg.OwnerAuth != resources.OwnerAuthSigV4 && cfg.OwnerAuth != resources.OwnerAuthNone {
		return fmt.Errorf("context: %s %q: want %s or %s", CtxOwnerAuth, cfg.OwnerAuth, resources.OwnerAuthSigV4, resources.OwnerAuthNone)
	}
	if cfg.OwnerSigning != "" {
		if _, _, err := resources.ParseOwnerSigning(cfg.OwnerSigning); err != nil {
			return fmt.Errorf("context %s: %w", CtxOwnerSigning, err)
		}
	}
	if (cfg.VpcID != "") != (len(cfg.VpcSubnetIDs) > 0) || (len(cfg.VpcSecurityGroups) > 0 && cfg.VpcID == "") {
		return fmt.Errorf("context: VPC placement needs %s and %s together (and optionally %s)", CtxVpcID, CtxVpcSubnetIDs, CtxVpcSecurityGroups)
	}
	if strings.HasPrefix(cfg.WatermarkKey, "/") {
		return fmt.Errorf("context: %s must be an object key without a leading slash", CtxWatermarkKey)
	}
	if cfg.NoncurrentVersionDays < 0 {
		return fmt.Errorf("context: %s %d: want a whole number of days >= 1", CtxNoncurrentVersionDays, cfg.NoncurrentVersionDays)
	}
	return validateOwners(cfg)
}

// ErrNoOwners begins the refusal of a configuration without owner
// endpoints (infra/README.md "Owner endpoints, or a sandbox").
const ErrNoOwners = "no owner endpoints"

// validateOwners refuses a stack that would alarm by design: without its
// Manifest Publisher and Catalog Control Service every reconciliation
// fails (CCS unknown: GC refuses, nothing is ever published), is retried
// and lands in a failure queue whose alarm then pages. Either both owner
// endpoints are given, or the stack is a sandbox that deploys the
// stand-ins itself, and a sandbox never touches anything it did not create.
func validateOwners(cfg Config) error {
	if cfg.Sandbox {
		var clash []string
		for _, f := range []struct{ key, val string }{
			{CtxPublisherEndpoint, cfg.PublisherEndpoint}, {CtxCCSEndpoint, cfg.CCSEndpoint},
			{CtxPublisherInvokeArn, cfg.PublisherInvokeArn}, {CtxCCSInvokeArn, cfg.CCSInvokeArn}, {CtxOwnerSigning, cfg.OwnerSigning},
			{CtxDataBucketName, cfg.DataBucketName}, {CtxWatermarkBucket, cfg.WatermarkBucket},
		} {
			if f.val != "" {
				clash = append(clash, f.key)
			}
		}
		if cfg.OwnerAuth == resources.OwnerAuthNone {
			clash = append(clash, CtxOwnerAuth+"="+resources.OwnerAuthNone)
		}
		if len(clash) > 0 {
			return fmt.Errorf("context %s=true deploys its own data bucket and stand-in owners (IAM-authorized) and never points at real ones: drop %s, or drop %s to deploy next to your owners",
				CtxSandbox, strings.Join(clash, ", "), CtxSandbox)
		}
		return nil
	}
	// A deployed function calls its owners over https only: their answers
	// decide what GC deletes and what is published, and plain http lets
	// anyone on the path forge them (the functions' configuration refuses
	// it too, but for the local stack's loopback stand-ins).
	for _, e := range []struct{ key, url string }{{CtxPublisherEndpoint, cfg.PublisherEndpoint}, {CtxCCSEndpoint, cfg.CCSEndpoint}} {
		if e.url == "" {
			continue
		}
		if err := resources.CheckOwnerEndpoint(e.url, false); err != nil {
			return fmt.Errorf("context %s: %w", e.key, err)
		}
	}
	var missing []string
	if cfg.PublisherEndpoint == "" {
		missing = append(missing, CtxPublisherEndpoint+" (PUBLISHER_ENDPOINT)")
	}
	if cfg.CCSEndpoint == "" {
		missing = append(missing, CtxCCSEndpoint+" (CCS_ENDPOINT)")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s not set. Without its Manifest Publisher and Catalog Control Service the coordinator fails every reconciliation and alarms, so this stack is not synthesized. "+
		"Pass both (make deploy PUBLISHER_ENDPOINT=https://... CCS_ENDPOINT=https://..., or cdk -c %s=https://... -c %s=https://...), "+
		"or SANDBOX=true (-c %s=true) for a demo-account stack that deploys the stand-in publisher, CCS and watermark with it (infra/README.md, \"Owner endpoints, or a sandbox\")",
		ErrNoOwners, strings.Join(missing, " and "), CtxPublisherEndpoint, CtxCCSEndpoint, CtxSandbox)
}

// addBucket creates the data bucket (with an access-log bucket) or imports it.
func (c *Coordinator) addBucket(cfg Config) {
	if cfg.DataBucketName != "" {
		// An existing bucket: its encryption, TLS policy and logging are its
		// owner's; the notification is added by CDK's bucket-notifications
		// custom resource, which keeps notifications it does not manage.
		c.Bucket = awss3.Bucket_FromBucketName(c.Stack, jsii.String("DataBucket"), jsii.String(cfg.DataBucketName))
		return
	}
	c.LogBucket = awss3.NewBucket(c.Stack, jsii.String("AccessLogBucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED, // server access logging requires SSE-S3
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:         jsii.String("expire-access-logs"),
			Expiration: awscdk.Duration_Days(jsii.Number(accessLogRetentionDays)),
		}},
	})
	// No BucketName: S3 bucket names are global, so a fixed default
	// (<prefix>-data) would collide with any other account's bucket, and
	// the bucket is retained by `make destroy`, so a fixed name would also
	// block the next deploy. CloudFormation names it
	// <stack>-databucket<suffix>; the stack output DataBucketName says which.
	// To keep using a retained bucket, import it by name (dataBucketName).
	c.Bucket = awss3.NewBucket(c.Stack, jsii.String("DataBucket"), &awss3.BucketProps{
		EventBridgeEnabled: jsii.Bool(cfg.HeadEvents == resources.HeadEventsEventBridge),
		Encryption:         awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess:  awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:         jsii.Bool(true),
		ObjectOwnership:    awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		// Versioned: a delete (GC's, or anyone's who was wrong) leaves the
		// object's last version restorable for NoncurrentVersionDays; no
		// function role may delete a version or change versioning or
		// lifecycle (addPolicies: NoUndoRemoval). Conditional writes and
		// deletes behave as on an unversioned bucket
		// (TestS3ConditionalWritesOnAVersionedBucket).
		Versioned:              jsii.Bool(true),
		ServerAccessLogsBucket: c.LogBucket,
		ServerAccessLogsPrefix: jsii.String(c.Definition.Bucket.Name + "/"),
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN, // user data: never deleted with the stack
		// Compaction streams large outputs as multipart uploads; a worker
		// that dies mid-upload leaves parts that are no object (nothing can
		// reference them) and cost storage until aborted.
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("abort-incomplete-multipart-uploads"),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}, {
			// The undo window: a previous version is kept this long, then
			// expired; a delete marker left with no version under it is
			// removed (it would only cost LIST pages).
			Id:                          jsii.String("expire-noncurrent-versions"),
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(float64(cfg.NoncurrentVersionDays))),
			ExpiredObjectDeleteMarker:   jsii.Bool(true),
		}},
	})
}

// accessLogRetentionDays bounds the access-log bucket's growth.
const accessLogRetentionDays = 90

// addTable creates the coordinator's table. Everything in it is disposable:
// on-demand, point-in-time recovery on, TTL for tidiness only.
func (c *Coordinator) addTable() {
	t := c.Definition.Table
	props := &awsdynamodb.TableProps{
		TableName:    c.physicalName(t.Name),
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(t.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		// AWS owned key, chosen explicitly: encrypted at rest with no KMS
		// request charges and no key grants to manage.
		Encryption: awsdynamodb.TableEncryption_DEFAULT,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY, // coordinator state is disposable by design
	}
	if t.SortKey != "" {
		props.SortKey = &awsdynamodb.Attribute{Name: jsii.String(t.SortKey), Type: awsdynamodb.AttributeType_STRING}
	}
	if t.TTLAttribute != "" {
		props.TimeToLiveAttribute = jsii.String(t.TTLAttribute)
	}
	c.Table = awsdynamodb.NewTable(c.Stack, jsii.String("CoordinatorTable"), props)
	mark(c.Table, t.Name)
}
