package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3notifications"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/resources"
)

// logRetention is how long function logs (and the EMF metrics in them) stay.
const logRetention = awslogs.RetentionDays_ONE_MONTH

// logRetentionText says logRetention in the plan.
const logRetentionText = "30 days"

// checkAssets verifies, for every function, that <assetDir>/<name>/bootstrap
// exists and is a linux/arm64 ELF executable, and returns the absolute asset
// directory per function. CDK itself panics on a missing directory and
// silently zips an empty one; neither may reach a deployment.
func checkAssets(assetDir string, fns []resources.Function) (map[string]string, error) {
	if assetDir == "" {
		return nil, errors.New("asset dir is empty: set context assetDir (run `make build` first)")
	}
	abs, err := filepath.Abs(assetDir)
	if err != nil {
		return nil, fmt.Errorf("asset dir %q: %w", assetDir, err)
	}
	out := map[string]string{}
	var problems []string
	for _, f := range fns {
		dir := filepath.Join(abs, f.Name)
		if err := checkBootstrap(dir); err != nil {
			problems = append(problems, fmt.Sprintf("function %s: %v", f.Name, err))
			continue
		}
		out[f.Name] = dir
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("function assets unusable (run `make build` before synth):\n  %s", strings.Join(problems, "\n  "))
	}
	return out, nil
}

func checkBootstrap(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("asset directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("asset %s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("asset directory: %w", err)
	}
	if len(entries) == 0 {
		return fmt.Errorf("asset directory %s is empty (no bootstrap)", dir)
	}
	path := filepath.Join(dir, "bootstrap")
	st, err = os.Stat(path)
	if err != nil {
		return fmt.Errorf("bootstrap missing: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() == 0 {
		return fmt.Errorf("%s is not a non-empty regular file", path)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", path)
	}
	ef, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %v", path, err)
	}
	defer ef.Close()
	if ef.Machine != elf.EM_AARCH64 || ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return fmt.Errorf("%s is %s/%s, want an arm64 executable (GOOS=linux GOARCH=arm64)", path, ef.Machine, ef.Type)
	}
	return nil
}

// exportName turns "compaction" or "gc" into a construct id part.
func exportName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '-' || r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// FunctionName is a function's deployed name (resources.Definition.FunctionName).
func FunctionName(prefix, fn string) string { return resources.Default(prefix).FunctionName(fn) }

// addFunctions creates each function with its own role and log group, its
// environment from the definition, the head notification and the schedule.
func (c *Coordinator) addFunctions(cfg Config, assets map[string]string) error {
	env, err := c.envValues(cfg)
	if err != nil {
		return err
	}
	vpc := c.vpcPlacement(cfg)
	for _, f := range c.Definition.Functions {
		id := exportName(f.Name)
		name := FunctionName(c.Definition.Prefix, f.Name) // resources.For's; deployed only with fixedNames
		vars := map[string]*string{}
		for _, k := range f.Env {
			v, ok := env[k]
			if k == resources.EnvHandoffSenders {
				if v, err = c.handoffSendersEnv(); err != nil {
					return err
				}
				ok = true
			}
			if !ok {
				return fmt.Errorf("function %s reads %s, which this stack does not know how to fill", f.Name, k)
			}
			vars[k] = v
		}
		logGroup := awslogs.NewLogGroup(c.Stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
			LogGroupName:  c.physicalName("/aws/lambda/" + name),
			Retention:     logRetention,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		mark(logGroup, "/aws/lambda/"+name)
		role := awsiam.NewRole(c.Stack, jsii.String(id+"Role"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			Description: jsii.String("least-privilege role of the " + c.Definition.Prefix + " " + f.Name + " function"),
		})
		// Instead of the AWSLambdaBasicExecutionRole managed policy (log
		// writes anywhere): writes to this function's own log group only.
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("OwnLogs"),
			Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
			Resources: jsii.Strings(*logGroup.LogGroupArn()),
		}))
		fn := awslambda.NewFunction(c.Stack, jsii.String(id+"Function"), &awslambda.FunctionProps{
			FunctionName: c.physicalName(name),
			Description:  jsii.String(f.Description),
			Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture: awslambda.Architecture_ARM_64(),
			Handler:      jsii.String("bootstrap"),
			Code:         awslambda.Code_FromAsset(jsii.String(assets[f.Name]), nil),
			Timeout:      awscdk.Duration_Seconds(jsii.Number(f.Timeout.Seconds())),
			MemorySize:   jsii.Number(float64(f.MemoryMB)),
			Environment:  &vars,
			Role:         role,
			LogGroup:     logGroup,
			// JSON: Lambda's own lines (START, END, REPORT) are JSON like the
			// function's (slog JSON, EMF), so Logs Insights discovers every
			// field; an OS-only runtime's application lines pass unchanged.
			LoggingFormat:  awslambda.LoggingFormat_JSON,
			RecursiveLoop:  awslambda.RecursiveLoop_TERMINATE,
			Tracing:        tracing(cfg),
			Vpc:            vpc.vpc,
			VpcSubnets:     vpc.subnets,
			SecurityGroups: vpc.groups,
		})
		if vpc.vpc != nil {
			// The role is ours, so CDK adds no AWSLambdaVPCAccessExecutionRole:
			// exactly the network-interface actions Lambda needs to attach the
			// function to the subnets (EC2 allows no narrower resource for
			// the Describe call, and Lambda manages the interfaces itself).
			role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String("VpcNetworkInterfaces"),
				Actions: jsii.Strings("ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
					"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"),
				Resources: jsii.Strings("*"),
			}))
		}
		mark(fn, name)
		c.Functions[f.Name] = fn
		c.Roles[f.Name] = role
	}

	b := c.Definition.Bucket
	// Retained like the DLQs (what it holds is failed head events), so its
	// name is always generated.
	c.NotifyFailures = awssqs.NewQueue(c.Stack, jsii.String("ObserverFailuresQueue"), &awssqs.QueueProps{
		RemovalPolicy:   awscdk.RemovalPolicy_RETAIN,
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	mark(c.NotifyFailures, b.NotifyFailureQueue)
	c.addHeadEvents(cfg)

	// A head event whose invocation fails every attempt (Lambda retries
	// asynchronous invocations twice) goes to a queue instead of vanishing:
	// an alarm fires on it, and reconciliation repairs the state.
	c.Functions[b.NotifyFunction].ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		OnFailure:     awslambdadestinations.NewSqsDestination(c.NotifyFailures),
		RetryAttempts: jsii.Number(2),
		MaxEventAge:   awscdk.Duration_Hours(jsii.Number(6)),
	})

	// Periodic reconciliation: the observer re-reads heads without an event,
	// repairing lost or reordered notifications.
	awsevents.NewRule(c.Stack, jsii.String("ReconcileSchedule"), &awsevents.RuleProps{
		Description: jsii.String("periodic reconciliation by the " + b.NotifyFunction + " function"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(c.Definition.ReconcileSchedule.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(c.Functions[b.NotifyFunction], &awseventstargets.LambdaFunctionProps{
			// A missed tick is harmless: the next one reconciles again.
			RetryAttempts: jsii.Number(2),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(c.Definition.ReconcileSchedule.Seconds())),
		})},
	})
	return nil
}

// addHeadEvents connects committed heads to the observer. Notification
// mode: the bucket's notification configuration, object created under the
// collections prefix with the head suffix (S3 cannot notify a FIFO queue).
// EventBridge mode, for a bucket whose notification configuration already
// notifies someone else for overlapping keys (S3 refuses overlapping
// configurations): the bucket sends its events to EventBridge (the
// configuration's other entries are kept) and a rule whose key filter
// matches exactly the head keys invokes the observer.
func (c *Coordinator) addHeadEvents(cfg Config) {
	b := c.Definition.Bucket
	observer := c.Functions[b.NotifyFunction]
	if cfg.HeadEvents != resources.HeadEventsEventBridge {
		c.Bucket.AddEventNotification(awss3.EventType_OBJECT_CREATED,
			awss3notifications.NewLambdaDestination(observer),
			&awss3.NotificationKeyFilter{Prefix: jsii.String(b.NotifyPrefix), Suffix: jsii.String(b.NotifySuffix)})
		return
	}
	if c.LogBucket == nil { // an imported bucket: switched on through the notifications custom resource
		c.Bucket.EnableEventBridgeNotification()
	}
	p := b.HeadEventPattern(*c.Bucket.BucketName())
	detail := p["detail"].(map[string]any)
	c.HeadEventRule = awsevents.NewRule(c.Stack, jsii.String("HeadEventsRule"), &awsevents.RuleProps{
		RuleName:    c.physicalName(b.EventRule),
		Description: jsii.String("committed heads of the data bucket to the " + b.NotifyFunction + " function (EventBridge mode)"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.s3"),
			DetailType: jsii.Strings("Object Created"),
			Detail:     &detail,
		},
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(observer, &awseventstargets.LambdaFunctionProps{
			// Where EventBridge cannot invoke the function at all; failed
			// invocations follow the function's own on-failure destination.
			DeadLetterQueue: c.NotifyFailures,
			RetryAttempts:   jsii.Number(185), // EventBridge's maximum
			MaxEventAge:     awscdk.Duration_Hours(jsii.Number(24)),
		})},
	})
}

func tracing(cfg Config) awslambda.Tracing {
	if cfg.Tracing {
		return awslambda.Tracing_ACTIVE // X-Ray: CDK grants xray:PutTraceSegments/PutTelemetryRecords
	}
	return awslambda.Tracing_DISABLED
}

type placement struct {
	vpc     awsec2.IVpc
	subnets *awsec2.SubnetSelection
	groups  *[]awsec2.ISecurityGroup
}

// vpcPlacement imports the VPC, subnets and security groups from context
// (none: the functions run outside any VPC). In a VPC the functions reach
// S3 and DynamoDB through gateway endpoints, SQS (and a private owner API)
// through interface endpoints, or through a NAT gateway: infra/README.md.
func (c *Coordinator) vpcPlacement(cfg Config) placement {
	if cfg.VpcID == "" {
		return placement{}
	}
	p := placement{vpc: awsec2.Vpc_FromVpcAttributes(c.Stack, jsii.String("Vpc"), &awsec2.VpcAttributes{
		VpcId: jsii.String(cfg.VpcID), AvailabilityZones: c.Stack.AvailabilityZones(), // unused: the subnets are explicit
	})}
	var subnets []awsec2.ISubnet
	for i, id := range cfg.VpcSubnetIDs {
		subnets = append(subnets, awsec2.Subnet_FromSubnetId(c.Stack, jsii.String(fmt.Sprintf("Subnet%d", i)), jsii.String(id)))
	}
	p.subnets = &awsec2.SubnetSelection{Subnets: &subnets}
	var groups []awsec2.ISecurityGroup
	for i, id := range cfg.VpcSecurityGroups {
		groups = append(groups, awsec2.SecurityGroup_FromSecurityGroupId(c.Stack, jsii.String(fmt.Sprintf("SecurityGroup%d", i)), jsii.String(id), nil))
	}
	if len(groups) > 0 {
		p.groups = &groups
	}
	return p
}

// envValues maps each resources.Env* variable to its value in this stack.
func (c *Coordinator) envValues(cfg Config) (map[string]*string, error) {
	wmBucket := cfg.WatermarkBucket
	if wmBucket == "" {
		wmBucket = *c.Bucket.BucketName()
	}
	wmKey := cfg.WatermarkKey
	if wmKey == "" {
		wmKey = c.Definition.WatermarkKey
	}
	env := map[string]*string{
		resources.EnvBucket:            c.Bucket.BucketName(),
		resources.EnvTable:             c.Table.TableName(),
		resources.EnvPublisherEndpoint: c.PublisherURL, // the context's, or the sandbox's stand-in API
		resources.EnvCCSEndpoint:       c.CCSURL,
		resources.EnvWatermarkBucket:   jsii.String(wmBucket),
		resources.EnvWatermarkKey:      jsii.String(wmKey),
		resources.EnvPolicy:            jsii.String(cfg.Policy),
		resources.EnvOwnerAuth:         jsii.String(cfg.OwnerAuth),
		resources.EnvOwnerSigning:      jsii.String(cfg.OwnerSigning),
		resources.EnvDeployment:        jsii.String(c.Definition.Prefix),
	}
	queueEnv := map[string]string{
		resources.QueueCompaction: resources.EnvCompactionQueue,
		resources.QueueGC:         resources.EnvGCQueue,
		resources.QueueHandoff:    resources.EnvHandoffQueue,
		resources.QueueReconcile:  resources.EnvReconcileQueue,
	}
	for class, q := range c.Queues {
		k, ok := queueEnv[class]
		if !ok {
			return nil, fmt.Errorf("queue class %q has no environment variable", class)
		}
		env[k] = q.QueueUrl()
	}
	return env, nil
}

// watermark is the bucket and key GC reads the query plane's watermark from.
func (c *Coordinator) watermark(cfg Config) (bucket awss3.IBucket, key string) {
	key = cfg.WatermarkKey
	if key == "" {
		key = c.Definition.WatermarkKey
	}
	if cfg.WatermarkBucket == "" {
		return c.Bucket, key
	}
	if c.wmBucket == nil {
		c.wmBucket = awss3.Bucket_FromBucketName(c.Stack, jsii.String("WatermarkBucket"), jsii.String(cfg.WatermarkBucket))
	}
	return c.wmBucket, key
}

// addNotificationsHandlerLogs gives CDK's BucketNotificationsHandler (the
// deploy-time function that puts the bucket's notification configuration)
// a log group with the stack's retention and JSON logs: left alone, Lambda
// would create /aws/lambda/<its name> on its first run, kept forever.
func (c *Coordinator) addNotificationsHandlerLogs() error {
	handler := findChild(c.Stack, "BucketNotificationsHandler")
	if handler == nil {
		return fmt.Errorf("CDK's BucketNotificationsHandler not found in the stack (CDK changed?)")
	}
	fn, ok := handler.Node().TryFindChild(jsii.String("Resource")).(awscdk.CfnResource)
	if !ok {
		return fmt.Errorf("CDK's BucketNotificationsHandler has no function resource (CDK changed?)")
	}
	logs := awslogs.NewLogGroup(c.Stack, jsii.String("BucketNotificationsHandlerLogs"), &awslogs.LogGroupProps{
		Retention:     logRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	fn.AddPropertyOverride(jsii.String("LoggingConfig"), map[string]any{"LogFormat": "JSON", "LogGroup": logs.LogGroupName()})
	return nil
}
