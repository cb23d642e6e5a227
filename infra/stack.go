package main

import (
	"fmt"
	"strings"

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
	CtxStackName          = "stackName"           // default "<prefix>-coordinator"
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
)

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
	if c.StackName == "" {
		c.StackName = c.Prefix + "-coordinator"
	}
	var tracing, subnets, groups string
	for _, f := range []struct {
		dst *string
		key string
	}{{&tracing, CtxTracing}, {&c.VpcID, CtxVpcID}, {&subnets, CtxVpcSubnetIDs}, {&groups, CtxVpcSecurityGroups}} {
		if *f.dst, err = get(f.key, ""); err != nil {
			return Config{}, err
		}
	}
	switch tracing {
	case "", "false":
	case "true":
		c.Tracing = true
	default:
		return Config{}, fmt.Errorf("context %s %q: want true or false", CtxTracing, tracing)
	}
	c.VpcSubnetIDs, c.VpcSecurityGroups = splitList(subnets), splitList(groups)
	return c, nil
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
	if err := validate(def, cfg); err != nil {
		return nil, err
	}
	assets, err := checkAssets(cfg.AssetDir, def.Functions)
	if err != nil {
		return nil, err
	}

	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("Background Compute Coordinator (" + cfg.Prefix + "): observer, FIFO task queues, compaction/GC/handoff workers")
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	c := &Coordinator{
		Config:     cfg,
		Stack:      stack,
		Definition: def,
		Queues:     map[string]awssqs.Queue{},
		DLQs:       map[string]awssqs.Queue{},
		Functions:  map[string]awslambda.Function{},
		Roles:      map[string]awsiam.Role{},
	}
	c.addBucket(cfg)
	c.addTable()
	c.addQueues()
	if err := c.addFunctions(cfg, assets); err != nil {
		return nil, err
	}
	c.addPolicies(cfg)
	owners, err := c.ownerEndpoints(cfg)
	if err != nil {
		return nil, err
	}
	c.Owners = owners
	c.addOwnerGrants(owners)
	c.addEventSources()
	c.addMonitoring(cfg)
	c.addOutputs()
	if c.AlarmTopic == nil {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("bcc:alarmTopic"), jsii.String(fmt.Sprintf(
			"no alarm destination: the stack's %d alarms change state but notify no one (set -c %s=you@example.com or -c %s=arn:aws:sns:..., or make deploy ALARM_EMAIL=... / ALARM_TOPIC_ARN=...)",
			c.AlarmCount, CtxAlarmEmail, CtxAlarmTopicArn)), nil)
	}
	for key, val := range map[string]string{CtxPublisherEndpoint: cfg.PublisherEndpoint, CtxCCSEndpoint: cfg.CCSEndpoint} {
		if val == "" {
			awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("bcc:"+key), jsii.String(fmt.Sprintf(
				"context %s is empty: the functions will have no endpoint for it (set -c %s=https://... or make deploy %s=...)",
				key, key, map[string]string{CtxPublisherEndpoint: "PUBLISHER_ENDPOINT", CtxCCSEndpoint: "CCS_ENDPOINT"}[key])), nil)
		}
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
	return nil
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
		EventBridgeEnabled:     jsii.Bool(cfg.HeadEvents == resources.HeadEventsEventBridge),
		Encryption:             awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:             jsii.Bool(true),
		ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Versioned:              jsii.Bool(false),
		ServerAccessLogsBucket: c.LogBucket,
		ServerAccessLogsPrefix: jsii.String(c.Definition.Bucket.Name + "/"),
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN, // user data: never deleted with the stack
		// Compaction streams large outputs as multipart uploads; a worker
		// that dies mid-upload leaves parts that are no object (nothing can
		// reference them) and cost storage until aborted.
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("abort-incomplete-multipart-uploads"),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
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
		TableName:    jsii.String(t.Name),
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
}
