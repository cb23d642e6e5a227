package localaws

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/resources"
)

// ProvisionOptions adjust local provisioning.
type ProvisionOptions struct {
	// VisibilityTimeout, when set, replaces every queue's visibility timeout.
	// Local runs scale it down so a failed message returns in seconds rather
	// than the deployed six times the consumer's timeout.
	VisibilityTimeout time.Duration
	// TimeScale, when > 0 and VisibilityTimeout is not set, gives each
	// queue its deployed visibility timeout divided by TimeScale, but at
	// least its consumer's timeout (deployed, Lambda refuses less): make
	// local runs as deployed, TimeScale times faster, and a message is never
	// handed to a second invocation while the first may still run.
	TimeScale float64
	// HeadEvents is resources.HeadEventsNotification (default) or
	// resources.HeadEventsEventBridge, as the deployed stack's context.
	HeadEvents string
}

// Provisioned holds what Provision created.
type Provisioned struct {
	Def       resources.Definition
	QueueURLs map[string]string // by class
	DLQURLs   map[string]string // by class
	// FailureQueueURL receives head notifications whose invocations all
	// failed (the observer's on-failure destination).
	FailureQueueURL string
}

// Provision creates def's bucket (with its head notification), tables and
// queues through the real SDK calls, idempotently.
func Provision(ctx context.Context, c Clients, def resources.Definition, opts ProvisionOptions) (Provisioned, error) {
	p := Provisioned{Def: def, QueueURLs: map[string]string{}, DLQURLs: map[string]string{}}
	if err := provisionBucket(ctx, c, def, opts.HeadEvents); err != nil {
		return p, err
	}
	for _, t := range []resources.Table{def.Table, def.CCSTable} {
		if err := provisionTable(ctx, c.Dynamo, t); err != nil {
			return p, err
		}
	}
	for _, q := range def.Queues {
		dlq, main, err := provisionQueue(ctx, c.SQS, def, q, opts)
		if err != nil {
			return p, err
		}
		p.QueueURLs[q.Class], p.DLQURLs[q.Class] = main, dlq
	}
	out, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(def.Bucket.NotifyFailureQueue),
		Attributes: map[string]string{"MessageRetentionPeriod": strconv.Itoa(14 * 24 * 3600)}})
	if err != nil {
		return p, fmt.Errorf("create queue %s: %w", def.Bucket.NotifyFailureQueue, err)
	}
	p.FailureQueueURL = aws.ToString(out.QueueUrl)
	return p, nil
}

// headConfigID is the Id of the head notification this product owns in a
// bucket's notification configuration.
const headConfigID = "committed-head"

// provisionBucket creates the bucket if needed and adds the head events,
// keeping every notification the bucket already carries (as the deployed
// stack's bucket-notifications custom resource does): in notification mode
// a Lambda configuration for the observer (which S3 refuses if it overlaps
// an existing one), in EventBridge mode the bucket's EventBridge switch and
// a rule with an exact head-key filter targeting the observer.
func provisionBucket(ctx context.Context, c Clients, def resources.Definition, mode string) error {
	b := def.Bucket
	if _, err := c.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.Name)}); err != nil {
		if _, err := c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.Name)}); err != nil {
			return fmt.Errorf("create bucket %s: %w", b.Name, err)
		}
	}
	cur, err := c.S3.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String(b.Name)})
	if err != nil {
		return fmt.Errorf("read notification configuration of %s: %w", b.Name, err)
	}
	cfg := &s3types.NotificationConfiguration{
		QueueConfigurations: cur.QueueConfigurations, TopicConfigurations: cur.TopicConfigurations,
		EventBridgeConfiguration: cur.EventBridgeConfiguration,
	}
	for _, f := range cur.LambdaFunctionConfigurations {
		if aws.ToString(f.Id) != headConfigID {
			cfg.LambdaFunctionConfigurations = append(cfg.LambdaFunctionConfigurations, f)
		}
	}
	switch mode {
	case "", resources.HeadEventsNotification:
		cfg.LambdaFunctionConfigurations = append(cfg.LambdaFunctionConfigurations, s3types.LambdaFunctionConfiguration{
			Id:                aws.String(headConfigID),
			LambdaFunctionArn: aws.String(FunctionARN(b.NotifyFunction)),
			Events:            []s3types.Event{s3types.EventS3ObjectCreated},
			Filter: &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{
				{Name: s3types.FilterRuleNamePrefix, Value: aws.String(b.NotifyPrefix)},
				{Name: s3types.FilterRuleNameSuffix, Value: aws.String(b.NotifySuffix)},
			}}},
		})
	case resources.HeadEventsEventBridge:
		cfg.EventBridgeConfiguration = &s3types.EventBridgeConfiguration{}
	default:
		return fmt.Errorf("head events mode %q: want %s or %s", mode, resources.HeadEventsNotification, resources.HeadEventsEventBridge)
	}
	if _, err := c.S3.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(b.Name), NotificationConfiguration: cfg}); err != nil {
		return fmt.Errorf("put notification configuration on %s: %w", b.Name, err)
	}
	if mode != resources.HeadEventsEventBridge {
		return nil
	}
	pattern, _ := json.Marshal(b.HeadEventPattern(b.Name))
	if _, err := c.Events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(b.EventRule), EventPattern: aws.String(string(pattern)),
		State: ebtypes.RuleStateEnabled, Description: aws.String("committed heads of " + b.Name + " to the observer")}); err != nil {
		return fmt.Errorf("put rule %s: %w", b.EventRule, err)
	}
	if _, err := c.Events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(b.EventRule),
		Targets: []ebtypes.Target{{Id: aws.String(b.NotifyFunction), Arn: aws.String(FunctionARN(b.NotifyFunction))}}}); err != nil {
		return fmt.Errorf("put target of rule %s: %w", b.EventRule, err)
	}
	return nil
}

func provisionTable(ctx context.Context, c *dynamodb.Client, t resources.Table) error {
	if _, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)}); err == nil {
		return nil
	}
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(t.Name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String(t.PartitionKey), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String(t.SortKey), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String(t.PartitionKey), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String(t.SortKey), KeyType: ddbtypes.KeyTypeRange},
		},
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", t.Name, err)
	}
	return nil
}

func provisionQueue(ctx context.Context, c *sqs.Client, def resources.Definition, q resources.Queue, opts ProvisionOptions) (dlqURL, url string, err error) {
	vis := q.VisibilityTimeout
	if opts.TimeScale > 0 {
		// Scaled, but never below the consumer's timeout, which is not
		// scaled (Lambda refuses a queue whose visibility is shorter): a
		// running invocation's message is never handed to another.
		fn, _ := def.Function(q.Consumer)
		vis = max(time.Duration(float64(vis)/opts.TimeScale), fn.Timeout, time.Second)
	}
	if opts.VisibilityTimeout > 0 {
		vis = opts.VisibilityTimeout
	}
	base := map[string]string{
		"FifoQueue":              "true",
		"VisibilityTimeout":      strconv.Itoa(int(vis / time.Second)),
		"MessageRetentionPeriod": strconv.Itoa(int(q.RetentionPeriod / time.Second)),
	}
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.DLQName), Attributes: base})
	if err != nil {
		return "", "", fmt.Errorf("create queue %s: %w", q.DLQName, err)
	}
	main := map[string]string{}
	if q.HighThroughput {
		main["DeduplicationScope"] = "messageGroup"
		main["FifoThroughputLimit"] = "perMessageGroupId"
	}
	// The DLQ's ARN as the service names it (its account differs between
	// the embedded stack, LocalStack and moto).
	dlqAttrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", "", fmt.Errorf("queue %s: ARN: %w", q.DLQName, err)
	}
	redrive, _ := json.Marshal(map[string]string{
		"deadLetterTargetArn": dlqAttrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
		"maxReceiveCount":     strconv.Itoa(q.MaxReceiveCount),
	})
	attrs := map[string]string{"RedrivePolicy": string(redrive)}
	for k, v := range base {
		attrs[k] = v
	}
	for k, v := range main {
		attrs[k] = v
	}
	created, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.Name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("create queue %s: %w", q.Name, err)
	}
	return aws.ToString(dlq.QueueUrl), aws.ToString(created.QueueUrl), nil
}

// MapQueues starts the event source mappings def declares and routes the
// notified function's exhausted asynchronous invocations to the failure
// queue, as the deployed stack's on-failure destination does.
func (s *Stack) MapQueues(p Provisioned) {
	s.SetAsyncFailureQueue(p.FailureQueueURL)
	for _, q := range p.Def.Queues {
		s.MapQueue(Mapping{QueueURL: p.QueueURLs[q.Class], Function: q.Consumer, BatchSize: q.BatchSize, MaxConcurrency: min(q.MaxConcurrency, 4)})
	}
}
