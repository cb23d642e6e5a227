package awsio

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// DeferAPI is the part of the SQS client deferrals use.
type DeferAPI interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Deferrals return received messages of one FIFO queue to it for later.
// SQS counts every receive towards the redrive policy's maxReceiveCount,
// a deferral's included, and FIFO queues take no per-message delay. So a
// message with receives to spare is deferred by its visibility (it stays
// in the queue and returns after the delay, blocking its message group,
// i.e. its collection, as a retry does); a message whose next receive
// would leave fewer than two before the DLQ is re-sent instead: a fresh
// copy (same body and group, deduplication id derived from the original
// message id, so a retried send is one copy) whose receive count starts
// at zero, and the original is deleted by its consumer's success. A
// deferral therefore never sends a task to the DLQ. The copy is visible
// at once: it is deferred again (by visibility) if the class is still full.
type Deferrals struct {
	api         DeferAPI
	url         string
	maxReceives int
}

// NewDeferrals returns the deferrals of the queue at url whose redrive
// policy moves a message to its DLQ after maxReceives receives.
func NewDeferrals(api DeferAPI, url string, maxReceives int) *Deferrals {
	return &Deferrals{api: api, url: url, maxReceives: maxReceives}
}

// Defer returns r to the queue, invisible for delay, or re-sends it (see
// Deferrals); resent says the caller must report r processed.
func (d *Deferrals) Defer(ctx context.Context, r events.SQSMessage, delay time.Duration) (bool, error) {
	received, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
	if received+2 <= d.maxReceives {
		_, err := d.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(d.url), ReceiptHandle: aws.String(r.ReceiptHandle), VisibilityTimeout: int32(max(delay/time.Second, 1)),
		})
		if err != nil {
			return false, translate("change visibility of", "deferred message "+r.MessageId, err, true)
		}
		return false, nil
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(d.url), MessageBody: aws.String(r.Body),
		MessageDeduplicationId: aws.String("deferred-" + r.MessageId)}
	if g := r.Attributes["MessageGroupId"]; g != "" {
		in.MessageGroupId = aws.String(g)
	}
	if _, err := d.api.SendMessage(ctx, in); err != nil {
		return false, translate("re-send", "deferred message "+r.MessageId, err, true)
	}
	return true, nil
}
