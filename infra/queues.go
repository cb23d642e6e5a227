package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// dlqRetentionDays is SQS's maximum retention: a dead letter waits as long as
// SQS allows for an operator to inspect and redrive it.
const dlqRetentionDays = 14

// addQueues creates one FIFO queue per task class with a FIFO DLQ each.
// Both use SQS-managed server-side encryption (no customer key to grant) and
// refuse requests that are not TLS. A DLQ is retained by make destroy (and
// by a change that replaces it): its dead letters are what an operator
// still has to inspect and redrive. Its name is always generated (even
// with fixedNames), so a retained DLQ never blocks the next deploy.
func (c *Coordinator) addQueues() {
	for _, q := range c.Definition.Queues {
		id := exportName(q.Class)
		dlq := awssqs.NewQueue(c.Stack, jsii.String(id+"DLQ"), &awssqs.QueueProps{
			RemovalPolicy:   awscdk.RemovalPolicy_RETAIN,
			Fifo:            jsii.Bool(true),
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:      jsii.Bool(true),
			RetentionPeriod: awscdk.Duration_Days(jsii.Number(dlqRetentionDays)),
		})
		props := &awssqs.QueueProps{
			QueueName: c.physicalName(q.Name),
			Fifo:      jsii.Bool(true),
			// Deduplication ids are task identities set by the sender, never
			// content hashes: the same task enqueued twice within SQS's
			// 5-minute window is absorbed.
			ContentBasedDeduplication: jsii.Bool(false),
			Encryption:                awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:                jsii.Bool(true),
			VisibilityTimeout:         awscdk.Duration_Seconds(jsii.Number(q.VisibilityTimeout.Seconds())),
			RetentionPeriod:           awscdk.Duration_Seconds(jsii.Number(q.RetentionPeriod.Seconds())),
			DeadLetterQueue: &awssqs.DeadLetterQueue{
				Queue:           dlq,
				MaxReceiveCount: jsii.Number(float64(q.MaxReceiveCount)),
			},
		}
		if q.HighThroughput {
			// FIFO high throughput: each collection (message group) gets its
			// own throughput and deduplication scope, so one busy collection
			// never spends another's quota.
			props.FifoThroughputLimit = awssqs.FifoThroughputLimit_PER_MESSAGE_GROUP_ID
			props.DeduplicationScope = awssqs.DeduplicationScope_MESSAGE_GROUP
		}
		main := awssqs.NewQueue(c.Stack, jsii.String(id+"Queue"), props)
		mark(main, q.Name)
		mark(dlq, q.DLQName)
		c.Queues[q.Class] = main
		c.DLQs[q.Class] = dlq
	}
}

// addEventSources connects each queue to its consumer: batch size and
// maximum concurrency from the definition, partial batch failures reported
// per item so one failed task does not redeliver its batch-mates.
func (c *Coordinator) addEventSources() {
	for _, q := range c.Definition.Queues {
		props := &awslambdaeventsources.SqsEventSourceProps{
			BatchSize:               jsii.Number(float64(q.BatchSize)),
			ReportBatchItemFailures: jsii.Bool(true),
			Enabled:                 jsii.Bool(true),
		}
		if q.MaxConcurrency > 0 {
			props.MaxConcurrency = jsii.Number(float64(q.MaxConcurrency))
		}
		if q.BatchWindow > 0 {
			props.MaxBatchingWindow = awscdk.Duration_Seconds(jsii.Number(q.BatchWindow.Seconds()))
		}
		// Adds sqs:ReceiveMessage/DeleteMessage/ChangeMessageVisibility/
		// GetQueueAttributes/GetQueueUrl on this queue only to the consumer's role.
		c.Functions[q.Consumer].AddEventSource(awslambdaeventsources.NewSqsEventSource(c.Queues[q.Class], props))
	}
}
