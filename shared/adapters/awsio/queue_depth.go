package awsio

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSReadAPI is what reading a queue's depth needs: read-only calls.
type SQSReadAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Depth is a queue's approximate message counts (SQS's own attributes;
// the age of the oldest message is a CloudWatch metric, not an attribute).
type Depth struct {
	URL      string `json:"url"`
	Visible  int64  `json:"visible"`
	InFlight int64  `json:"in_flight"`
	Delayed  int64  `json:"delayed"`
}

// QueueDepth resolves queue name and reads its counts.
func QueueDepth(ctx context.Context, api SQSReadAPI, name string) (Depth, error) {
	u, err := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return Depth{}, translate("get queue url", name, err, false)
	}
	d := Depth{URL: aws.ToString(u.QueueUrl)}
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}})
	if err != nil {
		return d, translate("get queue attributes", name, err, false)
	}
	n := func(k sqstypes.QueueAttributeName) int64 {
		v, _ := strconv.ParseInt(out.Attributes[string(k)], 10, 64)
		return v
	}
	d.Visible = n(sqstypes.QueueAttributeNameApproximateNumberOfMessages)
	d.InFlight = n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	d.Delayed = n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)
	return d, nil
}
