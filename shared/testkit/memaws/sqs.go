package memaws

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/awslimit"
)

// SQS is in-memory Amazon SQS (the method set of awsio.SQSAPI plus what a
// consumer needs: ReceiveMessage, DeleteMessage, ChangeMessageVisibility),
// with FIFO semantics: group order, a group blocked while one of its
// messages is in flight, deduplication within awslimit.SQSDedupInterval,
// visibility timeouts, and redrive to a dead-letter queue once a message
// was received maxReceiveCount times.
type SQS struct {
	Hooks
	// Pick chooses which of n receivable message groups a ReceiveMessage
	// serves first (nil: the one whose message was sent first). SQS does
	// not specify the order; a simulation draws it from its seed.
	Pick func(n int) int

	now    func() time.Time
	mu     sync.Mutex
	queues map[string]*queue // by URL
	byARN  map[string]*queue
	seq    int
}

type queue struct {
	name, url, arn string
	fifo           bool
	contentDedup   bool
	visibility     time.Duration
	dlqARN         string
	maxReceive     int
	msgs           []*message           // send order
	dedup          map[string]time.Time // dedup id -> end of its interval
}

type message struct {
	id, group, dedupID, body string
	sentAt                   time.Time
	receives                 int
	firstReceive             time.Time
	hiddenUntil              time.Time
	receipt                  string // the latest receipt handle
}

// NewSQS returns SQS without queues on the given clock.
func NewSQS(now func() time.Time) *SQS {
	return &SQS{now: now, queues: map[string]*queue{}, byARN: map[string]*queue{}}
}

const (
	account = "000000000000"
	region  = "us-east-1"
)

// QueueURL is the URL of the queue called name.
func QueueURL(name string) string {
	return "https://sqs." + region + ".amazonaws.com/" + account + "/" + name
}

func (s *SQS) call(op, url string, write bool) Call {
	name := url[strings.LastIndex(url, "/")+1:]
	return Call{Service: "SQS", Op: op, Resource: name, Write: write}
}

func (s *SQS) queueLocked(c Call, url string) (*queue, error) {
	q, ok := s.queues[url]
	if !ok {
		return nil, apiError(c, 400, &sqstypes.QueueDoesNotExist{Message: ptr("The specified queue does not exist.")})
	}
	return q, nil
}

// CreateQueue creates a queue (FifoQueue, ContentBasedDeduplication,
// VisibilityTimeout and RedrivePolicy are honoured; other attributes are
// refused).
func (s *SQS) CreateQueue(_ context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	name := aws.ToString(in.QueueName)
	url := QueueURL(name)
	c := s.call("CreateQueue", url, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queues[url]; ok {
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(url)}, nil
	}
	q := &queue{name: name, url: url, arn: "arn:aws:sqs:" + region + ":" + account + ":" + name, visibility: 30 * time.Second, dedup: map[string]time.Time{}}
	for k, v := range in.Attributes {
		switch k {
		case "FifoQueue":
			q.fifo = v == "true"
		case "ContentBasedDeduplication":
			q.contentDedup = v == "true"
		case "VisibilityTimeout":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || time.Duration(n)*time.Second > awslimit.SQSMaxVisibilityTimeout {
				return nil, generic(c, 400, "InvalidAttributeValue", "Invalid value for the parameter VisibilityTimeout.")
			}
			q.visibility = time.Duration(n) * time.Second
		case "RedrivePolicy":
			var rp struct {
				DeadLetterTargetArn string `json:"deadLetterTargetArn"`
				MaxReceiveCount     any    `json:"maxReceiveCount"`
			}
			if err := json.Unmarshal([]byte(v), &rp); err != nil {
				return nil, generic(c, 400, "InvalidAttributeValue", "Invalid value for the parameter RedrivePolicy.")
			}
			n, err := strconv.Atoi(fmt.Sprint(rp.MaxReceiveCount))
			if err != nil || n < 1 || n > awslimit.SQSMaxReceiveCountLimit || rp.DeadLetterTargetArn == "" {
				return nil, generic(c, 400, "InvalidAttributeValue", "Invalid value for the parameter RedrivePolicy.")
			}
			q.dlqARN, q.maxReceive = rp.DeadLetterTargetArn, n
		case "MessageRetentionPeriod", "DeduplicationScope", "FifoThroughputLimit":
			// accepted; messages are never expired, deduplication is per queue
		default:
			return nil, generic(c, 400, "InvalidAttributeName", "Unknown Attribute %s.", k)
		}
	}
	if q.fifo != strings.HasSuffix(name, ".fifo") {
		return nil, generic(c, 400, "InvalidParameterValue", "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix.")
	}
	s.queues[url], s.byARN[q.arn] = q, q
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(url)}, nil
}

// GetQueueUrl resolves a queue name.
func (s *SQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	url := QueueURL(aws.ToString(in.QueueName))
	c := s.call("GetQueueUrl", url, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.queueLocked(c, url); err != nil {
		return nil, err
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(url)}, nil
}

var idChars = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`) // alphanumeric and punctuation

type entry struct {
	id, body, group, dedup string
}

// send validates and enqueues one entry; sent is false when its
// deduplication id was seen within the interval (accepted, not enqueued).
func (s *SQS) sendLocked(c Call, q *queue, e entry) (msgID string, sent bool, err error) {
	if len(e.body) == 0 || len(e.body) > awslimit.SQSMaxMessageBytes {
		return "", false, generic(c, 400, "InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", awslimit.SQSMaxMessageBytes)
	}
	now := s.now()
	if q.fifo {
		if e.group == "" || !idChars.MatchString(e.group) {
			return "", false, generic(c, 400, "MissingParameter", "The request must contain the parameter MessageGroupId.")
		}
		if e.dedup == "" && q.contentDedup {
			sum := sha256.Sum256([]byte(e.body))
			e.dedup = hex.EncodeToString(sum[:])
		}
		if e.dedup == "" || !idChars.MatchString(e.dedup) {
			return "", false, generic(c, 400, "InvalidParameterValue", "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		if end, ok := q.dedup[e.dedup]; ok && now.Before(end) {
			return "dedup-" + e.dedup, false, nil
		}
		q.dedup[e.dedup] = now.Add(awslimit.SQSDedupInterval)
	}
	s.seq++
	m := &message{id: fmt.Sprintf("m-%d", s.seq), group: e.group, dedupID: e.dedup, body: e.body, sentAt: now}
	q.msgs = append(q.msgs, m)
	return m.id, true, nil
}

// SendMessage sends one message.
func (s *SQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c := s.call("SendMessage", aws.ToString(in.QueueUrl), true)
	return write(&s.Hooks, &s.mu, c, func() (*sqs.SendMessageOutput, []Change, error) {
		q, err := s.queueLocked(c, aws.ToString(in.QueueUrl))
		if err != nil {
			return nil, nil, err
		}
		body := aws.ToString(in.MessageBody)
		id, sent, err := s.sendLocked(c, q, entry{body: body, group: aws.ToString(in.MessageGroupId), dedup: aws.ToString(in.MessageDeduplicationId)})
		if err != nil {
			return nil, nil, err
		}
		ch := []Change{{Call: c, Deduplicated: 1}}
		if sent {
			ch = []Change{{Call: c, Messages: 1}}
		}
		return &sqs.SendMessageOutput{MessageId: aws.String(id), MD5OfMessageBody: aws.String(md5hex(body))}, ch, nil
	})
}

func md5hex(s string) string { sum := md5.Sum([]byte(s)); return hex.EncodeToString(sum[:]) }

// SendMessageBatch sends up to awslimit.SQSBatchMaxEntries messages.
func (s *SQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c := s.call("SendMessageBatch", aws.ToString(in.QueueUrl), true)
	if n := len(in.Entries); n == 0 || n > awslimit.SQSBatchMaxEntries {
		if n == 0 {
			return nil, apiError(c, 400, &sqstypes.EmptyBatchRequest{Message: ptr("There should be at least one SendMessageBatchRequestEntry in the request.")})
		}
		return nil, apiError(c, 400, &sqstypes.TooManyEntriesInBatchRequest{Message: ptr(fmt.Sprintf("Maximum number of entries per request are %d. You have sent %d.", awslimit.SQSBatchMaxEntries, n))})
	}
	total, ids := 0, map[string]bool{}
	for _, e := range in.Entries {
		total += len(aws.ToString(e.MessageBody))
		id := aws.ToString(e.Id)
		if ids[id] {
			return nil, apiError(c, 400, &sqstypes.BatchEntryIdsNotDistinct{Message: ptr("Id " + id + " repeated.")})
		}
		ids[id] = true
	}
	if total > awslimit.SQSMaxMessageBytes {
		return nil, apiError(c, 400, &sqstypes.BatchRequestTooLong{Message: ptr("Batch requests cannot be longer than 1048576 bytes.")})
	}
	return write(&s.Hooks, &s.mu, c, func() (*sqs.SendMessageBatchOutput, []Change, error) {
		q, err := s.queueLocked(c, aws.ToString(in.QueueUrl))
		if err != nil {
			return nil, nil, err
		}
		out := &sqs.SendMessageBatchOutput{}
		sent := 0
		for _, e := range in.Entries {
			body := aws.ToString(e.MessageBody)
			id, ok, err := s.sendLocked(c, q, entry{id: aws.ToString(e.Id), body: body, group: aws.ToString(e.MessageGroupId), dedup: aws.ToString(e.MessageDeduplicationId)})
			if err != nil {
				out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String(err.Error()), SenderFault: true})
				continue
			}
			if ok {
				sent++
			}
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id), MD5OfMessageBody: aws.String(md5hex(body))})
		}
		return out, []Change{{Call: c, Messages: sent, Deduplicated: len(out.Successful) - sent}}, nil
	})
}

// blockedLocked: the FIFO groups with a message in flight.
func (q *queue) blockedLocked(now time.Time) map[string]bool {
	blocked := map[string]bool{}
	if q.fifo {
		for _, m := range q.msgs {
			if m.hiddenUntil.After(now) {
				blocked[m.group] = true
			}
		}
	}
	return blocked
}

// order is the receive scan order: send order, with the picked receivable
// group's messages first.
func (s *SQS) orderLocked(q *queue, now time.Time) []*message {
	if !q.fifo || s.Pick == nil {
		return slices.Clone(q.msgs)
	}
	blocked := q.blockedLocked(now)
	var groups []string
	seen := map[string]bool{}
	for _, m := range q.msgs {
		if !seen[m.group] && !blocked[m.group] {
			groups = append(groups, m.group)
		}
		seen[m.group] = true
	}
	if len(groups) < 2 {
		return slices.Clone(q.msgs)
	}
	first := groups[s.Pick(len(groups))%len(groups)]
	var head, tail []*message
	for _, m := range q.msgs {
		if m.group == first {
			head = append(head, m)
		} else {
			tail = append(tail, m)
		}
	}
	return append(head, tail...)
}

// ReceiveMessage receives up to MaxNumberOfMessages visible messages,
// making them in flight for the visibility timeout. A message already
// received maxReceiveCount times moves to the dead-letter queue instead.
func (s *SQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c := s.call("ReceiveMessage", aws.ToString(in.QueueUrl), false)
	max := int(in.MaxNumberOfMessages)
	if max == 0 {
		max = 1
	}
	if max < 1 || max > awslimit.SQSBatchMaxEntries {
		return nil, generic(c, 400, "InvalidParameterValue", "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", max)
	}
	// A receive changes visibility: the Applied* faults mean "received, but
	// the answer was lost" (the messages stay in flight until they time out).
	return write(&s.Hooks, &s.mu, c, func() (*sqs.ReceiveMessageOutput, []Change, error) {
		q, err := s.queueLocked(c, aws.ToString(in.QueueUrl))
		if err != nil {
			return nil, nil, err
		}
		now := s.now()
		vis := q.visibility
		if in.VisibilityTimeout != 0 {
			vis = time.Duration(in.VisibilityTimeout) * time.Second
		}
		blocked := q.blockedLocked(now)
		out := &sqs.ReceiveMessageOutput{}
		for _, m := range s.orderLocked(q, now) {
			if len(out.Messages) == max {
				break
			}
			if q.fifo && blocked[m.group] {
				continue
			}
			if m.hiddenUntil.After(now) {
				continue
			}
			if q.maxReceive > 0 && m.receives >= q.maxReceive {
				if dlq := s.byARN[q.dlqARN]; dlq != nil {
					q.msgs = slices.DeleteFunc(q.msgs, func(x *message) bool { return x == m })
					moved := *m
					moved.receives, moved.hiddenUntil, moved.receipt = 0, time.Time{}, ""
					dlq.msgs = append(dlq.msgs, &moved)
					continue
				}
			}
			m.receives++
			if m.receives == 1 {
				m.firstReceive = now
			}
			m.hiddenUntil = now.Add(vis)
			m.receipt = fmt.Sprintf("%s#%s#%d", q.name, m.id, m.receives)
			out.Messages = append(out.Messages, sqstypes.Message{
				MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.receipt), Body: aws.String(m.body), MD5OfBody: aws.String(md5hex(m.body)),
				Attributes: map[string]string{
					"ApproximateReceiveCount":          strconv.Itoa(m.receives),
					"SentTimestamp":                    strconv.FormatInt(m.sentAt.UnixMilli(), 10),
					"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
					"MessageGroupId":                   m.group,
					"MessageDeduplicationId":           m.dedupID,
				},
			})
		}
		return out, nil, nil
	})
}

func (s *SQS) byReceiptLocked(q *queue, handle string) *message {
	for _, m := range q.msgs {
		if m.receipt == handle {
			return m
		}
	}
	return nil
}

// DeleteMessage deletes a received message. A stale receipt handle (the
// message was received again since) succeeds without deleting, as SQS
// allows; so does the handle of a message already deleted.
func (s *SQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	c := s.call("DeleteMessage", aws.ToString(in.QueueUrl), true)
	return write(&s.Hooks, &s.mu, c, func() (*sqs.DeleteMessageOutput, []Change, error) {
		q, err := s.queueLocked(c, aws.ToString(in.QueueUrl))
		if err != nil {
			return nil, nil, err
		}
		h := aws.ToString(in.ReceiptHandle)
		if h == "" || strings.Count(h, "#") != 2 {
			return nil, nil, apiError(c, 400, &sqstypes.ReceiptHandleIsInvalid{Message: ptr("The input receipt handle \"" + h + "\" is not a valid receipt handle.")})
		}
		if m := s.byReceiptLocked(q, h); m != nil {
			q.msgs = slices.DeleteFunc(q.msgs, func(x *message) bool { return x == m })
			return &sqs.DeleteMessageOutput{}, []Change{{Call: c}}, nil
		}
		return &sqs.DeleteMessageOutput{}, nil, nil
	})
}

// ChangeMessageVisibility makes an in-flight message visible after
// VisibilityTimeout seconds from now.
func (s *SQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	c := s.call("ChangeMessageVisibility", aws.ToString(in.QueueUrl), true)
	return write(&s.Hooks, &s.mu, c, func() (*sqs.ChangeMessageVisibilityOutput, []Change, error) {
		q, err := s.queueLocked(c, aws.ToString(in.QueueUrl))
		if err != nil {
			return nil, nil, err
		}
		t := time.Duration(in.VisibilityTimeout) * time.Second
		if t < 0 || t > awslimit.SQSMaxVisibilityTimeout {
			return nil, nil, generic(c, 400, "InvalidParameterValue", "Value %d for parameter VisibilityTimeout is invalid.", in.VisibilityTimeout)
		}
		m := s.byReceiptLocked(q, aws.ToString(in.ReceiptHandle))
		now := s.now()
		switch {
		case m == nil:
			return nil, nil, apiError(c, 400, &sqstypes.ReceiptHandleIsInvalid{Message: ptr("The receipt handle has expired.")})
		case !m.hiddenUntil.After(now):
			return nil, nil, apiError(c, 400, &sqstypes.MessageNotInflight{Message: ptr("The message referred to is not in flight.")})
		}
		m.hiddenUntil = now.Add(t)
		return &sqs.ChangeMessageVisibilityOutput{}, []Change{{Call: c}}, nil
	})
}

// GetQueueAttributes answers the approximate counts, QueueArn,
// VisibilityTimeout and RedrivePolicy.
func (s *SQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	c := s.call("GetQueueAttributes", aws.ToString(in.QueueUrl), false)
	return read(&s.Hooks, &s.mu, c, func() (*sqs.GetQueueAttributesOutput, error) {
		q, err := s.queueLocked(c, aws.ToString(in.QueueUrl))
		if err != nil {
			return nil, err
		}
		now := s.now()
		visible, inflight := 0, 0
		for _, m := range q.msgs {
			if m.hiddenUntil.After(now) {
				inflight++
			} else {
				visible++
			}
		}
		attrs := map[string]string{
			"ApproximateNumberOfMessages": strconv.Itoa(visible), "ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inflight),
			"QueueArn": q.arn, "VisibilityTimeout": strconv.Itoa(int(q.visibility / time.Second)), "FifoQueue": strconv.FormatBool(q.fifo),
		}
		if q.dlqARN != "" {
			attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, q.dlqARN, q.maxReceive)
		}
		return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
	})
}

// Peeked is a queued message as the inspection methods show it.
type Peeked struct {
	ID, Group, DedupID string
	Body               []byte
	Receives           int
	InFlight           bool
}

// Messages lists a queue's messages in send order (no hooks, no faults).
func (s *SQS) Messages(url string) []Peeked {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[url]
	if q == nil {
		return nil
	}
	now := s.now()
	out := make([]Peeked, len(q.msgs))
	for i, m := range q.msgs {
		out[i] = Peeked{ID: m.id, Group: m.group, DedupID: m.dedupID, Body: []byte(m.body), Receives: m.receives, InFlight: m.hiddenUntil.After(now)}
	}
	return out
}

// Len is the number of messages of a queue, visible or in flight.
func (s *SQS) Len(url string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[url]; q != nil {
		return len(q.msgs)
	}
	return 0
}

// NextVisible is when the earliest in-flight message of a queue becomes
// visible again (zero: none in flight).
func (s *SQS) NextVisible(url string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t time.Time
	now := s.now()
	if q := s.queues[url]; q != nil {
		for _, m := range q.msgs {
			if m.hiddenUntil.After(now) && (t.IsZero() || m.hiddenUntil.Before(t)) {
				t = m.hiddenUntil
			}
		}
	}
	return t
}

// Duplicate delivers the i-th message of a queue once more, as an
// at-least-once queue may (a fault, not an API): a copy without a
// deduplication id is appended. It returns the copy's id.
func (s *SQS) Duplicate(url string, i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[url]
	m := q.msgs[i]
	s.seq++
	c := &message{id: fmt.Sprintf("m-%d", s.seq), group: m.group, body: m.body, sentAt: s.now()}
	q.msgs = append(q.msgs, c)
	return c.id
}

// DeadLetter moves the message id of a queue to the queue's dead-letter
// queue, as a redrive after maxReceiveCount failed receives does (a fault,
// not an API: its consumer could not process it). It reports whether the
// message was there and the queue has a dead-letter queue.
func (s *SQS) DeadLetter(url, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[url]
	if q == nil {
		return false
	}
	dlq := s.byARN[q.dlqARN]
	if dlq == nil {
		return false
	}
	for i, m := range q.msgs {
		if m.id == id {
			q.msgs = slices.Delete(q.msgs, i, i+1)
			moved := *m
			moved.receives, moved.hiddenUntil, moved.receipt = 0, time.Time{}, ""
			dlq.msgs = append(dlq.msgs, &moved)
			return true
		}
	}
	return false
}
