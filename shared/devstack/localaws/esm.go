package localaws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Mapping configures an SQS event source mapping.
type Mapping struct {
	QueueURL       string
	Function       string
	BatchSize      int
	MaxConcurrency int
}

type mapping struct {
	Mapping
	arn    string
	mu     sync.Mutex
	active int
}

// MapQueue starts polling m.QueueURL and invoking m.Function with SQS event
// batches, as Lambda's event source mapping does with ReportBatchItemFailures:
// messages the handler reports in batchItemFailures (or all, when the
// invocation fails) stay in the queue and return after their visibility
// timeout; the rest are deleted.
func (s *Stack) MapQueue(m Mapping) {
	if m.BatchSize <= 0 {
		m.BatchSize = 10
	}
	if m.MaxConcurrency <= 0 {
		m.MaxConcurrency = 2
	}
	name := m.QueueURL[strings.LastIndex(m.QueueURL, "/")+1:]
	mp := &mapping{Mapping: m, arn: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", Region, AccountID, name)}
	s.mu.Lock()
	s.mappings = append(s.mappings, mp)
	s.mu.Unlock()
	client := s.serviceClients(m.Function).SQS
	for range m.MaxConcurrency {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.poll(client, mp)
		}()
	}
}

// esmPollWaitSeconds is the long poll of an event source mapping's
// ReceiveMessage, as Lambda's pollers wait (20 s, SQS's longest): a
// receive returns as soon as a message is available, so the wait costs no
// latency, and an idle queue costs one request per poller per 20 s, as
// deployed (the cost model counts these requests).
const esmPollWaitSeconds = 20

// pollWaitSeconds is esmPollWaitSeconds, or 1 s in front of an upstream
// (moto serves a long poll on one of few threads).
func (s *Stack) pollWaitSeconds() int32 {
	if s.opts.Upstream != "" {
		return 1
	}
	return esmPollWaitSeconds
}

func (s *Stack) poll(client *sqs.Client, mp *mapping) {
	for s.ctx.Err() == nil {
		out, err := client.ReceiveMessage(s.ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(mp.QueueURL), MaxNumberOfMessages: int32(mp.BatchSize), WaitTimeSeconds: s.pollWaitSeconds(),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("event source mapping receive failed", "queue", mp.QueueURL, "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		mp.mu.Lock()
		mp.active++
		mp.mu.Unlock()
		s.invokeBatch(client, mp, out.Messages)
		mp.mu.Lock()
		mp.active--
		mp.mu.Unlock()
	}
}

func (s *Stack) invokeBatch(client *sqs.Client, mp *mapping, msgs []sqstypes.Message) {
	payload, err := json.Marshal(sqsEvent(mp.arn, msgs))
	if err != nil {
		s.log.Error("encode sqs event", "err", err)
		return
	}
	resp, err := s.Invoke(s.ctx, mp.Function, payload)
	if err != nil {
		s.log.Warn("sqs batch invocation failed; messages return after visibility timeout", "function", mp.Function, "messages", len(msgs), "err", err)
		return
	}
	failed, err := batchFailures(resp)
	if err != nil {
		s.log.Warn("invalid batch response; treating whole batch as failed", "function", mp.Function, "err", err)
		return
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if failed[aws.ToString(m.MessageId)] {
			continue
		}
		entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(entries) == 0 {
		return
	}
	if _, err := client.DeleteMessageBatch(context.WithoutCancel(s.ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(mp.QueueURL), Entries: entries}); err != nil {
		s.log.Warn("delete processed messages failed", "queue", mp.QueueURL, "err", err)
	}
}

// batchFailures parses an SQSEventResponse. An empty or null response means
// full success, as with Lambda.
func batchFailures(resp []byte) (map[string]bool, error) {
	out := map[string]bool{}
	if len(resp) == 0 || string(resp) == "null" {
		return out, nil
	}
	var r events.SQSEventResponse
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, fmt.Errorf("decode batch response: %w", err)
	}
	for _, f := range r.BatchItemFailures {
		if f.ItemIdentifier == "" {
			return nil, errors.New("batch item failure with empty itemIdentifier")
		}
		out[f.ItemIdentifier] = true
	}
	return out, nil
}

func sqsEvent(arn string, msgs []sqstypes.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		attrs := map[string]string{}
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		mattrs := map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			mattrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType),
				StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues}
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes: attrs, MessageAttributes: mattrs, EventSourceARN: arn, EventSource: "aws:sqs", AWSRegion: Region,
		})
	}
	return ev
}

// queuesIdle reports whether every mapped queue is empty with nothing in
// flight and no invocation running.
func (s *Stack) queuesIdle() bool {
	s.mu.Lock()
	mps := append([]*mapping(nil), s.mappings...)
	s.mu.Unlock()
	client := s.internalClients().SQS
	for _, mp := range mps {
		mp.mu.Lock()
		active := mp.active
		mp.mu.Unlock()
		if active > 0 {
			return false
		}
		out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(mp.QueueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		})
		if err != nil {
			return false
		}
		if out.Attributes["ApproximateNumberOfMessages"] != "0" || out.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
			return false
		}
	}
	return true
}

// DeliverBatch receives one batch (up to batchSize messages) from queueURL
// and invokes function fn with it exactly as an event source mapping
// does: what the handler does not report in batchItemFailures is deleted.
// ok is false when no message was visible. For environments without
// delivery (tests that drive each step).
func (s *Stack) DeliverBatch(ctx context.Context, queueURL, fn string, batchSize int) (resp []byte, ok bool, err error) {
	client := s.serviceClients(fn).SQS
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MaxNumberOfMessages: int32(batchSize),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil || len(out.Messages) == 0 {
		return nil, false, err
	}
	name := queueURL[strings.LastIndex(queueURL, "/")+1:]
	payload, err := json.Marshal(sqsEvent(fmt.Sprintf("arn:aws:sqs:%s:%s:%s", Region, AccountID, name), out.Messages))
	if err != nil {
		return nil, true, err
	}
	resp, err = s.Invoke(ctx, fn, payload)
	if err != nil {
		return resp, true, err
	}
	failed, err := batchFailures(resp)
	if err != nil {
		return resp, true, err
	}
	for _, m := range out.Messages {
		if failed[aws.ToString(m.MessageId)] {
			continue
		}
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			return resp, true, err
		}
	}
	return resp, true, nil
}
