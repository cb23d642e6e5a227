package awsio

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// SQSAPI is the part of the SQS client the adapter uses.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// FIFOQueues sends messages to the FIFO queue of each class: MessageGroupId
// is the collection (one collection's backlog never blocks another's) and
// MessageDeduplicationId the message's identity.
type FIFOQueues struct {
	api  SQSAPI
	urls map[string]string // class -> queue URL
}

// NewFIFOQueues adapts api to the queue URLs by class.
func NewFIFOQueues(api SQSAPI, urls map[string]string) *FIFOQueues {
	return &FIFOQueues{api: api, urls: urls}
}

// Message is one FIFO message (built by contract.TaskMessage and
// contract.CompletionMessage only).
type Message = contract.Message

// Enqueue sends tasks to their queues (one SendMessageBatch per queue per
// awslimit.SQSBatchMaxEntries). It implements the observer's TaskQueue.
func (q *FIFOQueues) Enqueue(ctx context.Context, tasks []contract.Task) error {
	byClass := map[string][]Message{}
	var order []string
	for _, t := range tasks {
		m, err := contract.TaskMessage(t)
		if err != nil {
			return err
		}
		class := resources.QueueForKind(t.Kind)
		if _, ok := byClass[class]; !ok {
			order = append(order, class)
		}
		byClass[class] = append(byClass[class], m)
	}
	for _, class := range order {
		if err := q.Send(ctx, class, byClass[class]); err != nil {
			return err
		}
	}
	return nil
}

// Report sends a completion to the handoff queue. It implements
// compaction's Reporter and GC's CompletionSink.
func (q *FIFOQueues) Report(ctx context.Context, c contract.Completion) error {
	m, err := contract.CompletionMessage(c)
	if err != nil {
		return err
	}
	return q.Send(ctx, resources.QueueHandoff, []Message{m})
}

// RequestNamespaceRelease sends a namespace release request to the
// handoff queue (reconciliation found the release owed; the handoff
// records it). It implements handoff.ReleaseQueue.
func (q *FIFOQueues) RequestNamespaceRelease(ctx context.Context, r contract.NamespaceRelease) error {
	m, err := contract.NamespaceReleaseMessage(r)
	if err != nil {
		return err
	}
	return q.Send(ctx, resources.QueueHandoff, []Message{m})
}

// SendReconcile sends reconcile requests to the reconcile queue. It
// implements the observer's ReconcileQueue.
func (q *FIFOQueues) SendReconcile(ctx context.Context, reqs []contract.ReconcileRequest) error {
	msgs := make([]Message, len(reqs))
	for i, r := range reqs {
		m, err := contract.ReconcileMessage(r)
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	return q.Send(ctx, resources.QueueReconcile, msgs)
}

// Send sends messages to the queue of class in batches of
// awslimit.SQSBatchMaxEntries.
func (q *FIFOQueues) Send(ctx context.Context, class string, msgs []Message) error {
	url, ok := q.urls[class]
	if !ok || url == "" {
		return fmt.Errorf("send to %s queue: no queue URL configured", class)
	}
	for start := 0; start < len(msgs); start += awslimit.SQSBatchMaxEntries {
		batch := msgs[start:min(start+awslimit.SQSBatchMaxEntries, len(msgs))]
		entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
		for i, m := range batch {
			entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(m.Body)),
				MessageGroupId: aws.String(m.Group), MessageDeduplicationId: aws.String(m.DedupID)}
		}
		out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return translate("send batch to", class+" queue", err, true)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return fmt.Errorf("send batch to %s queue: %d of %d entries failed, first %s: %s", class, len(out.Failed), len(batch), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return nil
}
