package sqsd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
)

// clock is a manually driven time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type env struct {
	t      *testing.T
	ctx    context.Context
	client *sqs.Client
	clock  *clock
	url    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := &clock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	var base string
	srv := httptest.NewServer(sqsd.New(sqsd.Options{
		BaseURL: func() string { return base },
		Now:     clk.Now,
	}))
	t.Cleanup(srv.Close)
	base = srv.URL
	client := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	return &env{t: t, ctx: context.Background(), client: client, clock: clk, url: srv.URL}
}

func (e *env) createQueue(name string, attrs map[string]string) string {
	e.t.Helper()
	out, err := e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		e.t.Fatalf("CreateQueue(%s): %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

func (e *env) send(queueURL, body, group, dedup string) *sqs.SendMessageOutput {
	e.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}
	if group != "" {
		in.MessageGroupId = aws.String(group)
	}
	if dedup != "" {
		in.MessageDeduplicationId = aws.String(dedup)
	}
	out, err := e.client.SendMessage(e.ctx, in)
	if err != nil {
		e.t.Fatalf("SendMessage(%s): %v", body, err)
	}
	return out
}

func (e *env) receive(queueURL string, max int32) []types.Message {
	e.t.Helper()
	out, err := e.client.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         max,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		e.t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

func (e *env) deleteMessage(queueURL string, m types.Message) {
	e.t.Helper()
	if _, err := e.client.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		e.t.Fatalf("DeleteMessage: %v", err)
	}
}

func (e *env) attributes(queueURL string, names ...types.QueueAttributeName) map[string]string {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: names})
	if err != nil {
		e.t.Fatalf("GetQueueAttributes: %v", err)
	}
	return out.Attributes
}

func (e *env) counts(queueURL string) (visible, inFlight string) {
	e.t.Helper()
	a := e.attributes(queueURL, types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	return a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"]
}

func bodies(msgs []types.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = aws.ToString(m.Body)
	}
	return out
}

func wantBodies(t *testing.T, msgs []types.Message, want ...string) {
	t.Helper()
	if got := strings.Join(bodies(msgs), ","); got != strings.Join(want, ",") {
		t.Fatalf("received [%s], want [%s]", got, strings.Join(want, ","))
	}
}

// wantAPIError asserts the SDK surfaced an API error with the given code.
func wantAPIError(t *testing.T, err error, code string) smithy.APIError {
	t.Helper()
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v is not a smithy.APIError", err)
	}
	if apiErr.ErrorCode() != code {
		t.Fatalf("error code %q (%v), want %q", apiErr.ErrorCode(), err, code)
	}
	return apiErr
}

var fifoAttrs = map[string]string{"FifoQueue": "true"}

func TestFIFORequiresGroupAndDeduplication(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("orders.fifo", fifoAttrs)

	_, err := e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	wantAPIError(t, err, "MissingParameter")

	_, err = e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x"), MessageGroupId: aws.String("g")})
	apiErr := wantAPIError(t, err, "InvalidParameterValue")
	if want := "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"; apiErr.ErrorMessage() != want {
		t.Fatalf("message %q, want %q", apiErr.ErrorMessage(), want)
	}

	_, err = e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d"), DelaySeconds: 5})
	wantAPIError(t, err, "InvalidParameterValue")

	cbd := e.createQueue("cbd.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	first := e.send(cbd, "same body", "g", "")
	second := e.send(cbd, "same body", "g", "")
	if aws.ToString(first.MessageId) != aws.ToString(second.MessageId) {
		t.Fatalf("content-based duplicate got a new MessageId %s vs %s", aws.ToString(second.MessageId), aws.ToString(first.MessageId))
	}
	e.send(cbd, "other body", "g", "")
	msgs := e.receive(cbd, 10)
	wantBodies(t, msgs, "same body", "other body")
	if got := msgs[0].Attributes["MessageDeduplicationId"]; len(got) != 64 {
		t.Fatalf("content-based MessageDeduplicationId %q is not a SHA-256 hex digest", got)
	}
}

func TestFIFODeduplicationIntervalSurvivesDeletion(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("dedup.fifo", fifoAttrs)

	orig := e.send(q, "payload", "g", "id-1")
	msgs := e.receive(q, 10)
	wantBodies(t, msgs, "payload")
	e.deleteMessage(q, msgs[0])

	e.clock.Advance(4*time.Minute + 59*time.Second)
	dup := e.send(q, "payload again", "g", "id-1")
	if aws.ToString(dup.MessageId) != aws.ToString(orig.MessageId) {
		t.Fatalf("duplicate send returned MessageId %s, want original %s", aws.ToString(dup.MessageId), aws.ToString(orig.MessageId))
	}
	wantBodies(t, e.receive(q, 10))

	e.clock.Advance(time.Second) // the 5-minute interval has now elapsed
	fresh := e.send(q, "payload after interval", "g", "id-1")
	if aws.ToString(fresh.MessageId) == aws.ToString(orig.MessageId) {
		t.Fatal("send after the deduplication interval was treated as a duplicate")
	}
	wantBodies(t, e.receive(q, 10), "payload after interval")
}

func TestFIFOGroupOrderAndBlocking(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("groups.fifo", map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"})

	var prev string
	for i, spec := range [][2]string{{"a1", "A"}, {"a2", "A"}, {"b1", "B"}, {"a3", "A"}, {"b2", "B"}} {
		out := e.send(q, spec[0], spec[1], "d"+strconv.Itoa(i))
		seq := aws.ToString(out.SequenceNumber)
		if len(seq) != 20 || seq <= prev {
			t.Fatalf("SequenceNumber %q not a 20-digit increasing value after %q", seq, prev)
		}
		prev = seq
	}

	a1 := e.receive(q, 1)
	wantBodies(t, a1, "a1")
	// Group A is blocked while a1 is in flight; group B is still served, in order.
	wantBodies(t, e.receive(q, 10), "b1", "b2")
	wantBodies(t, e.receive(q, 10))

	e.deleteMessage(q, a1[0])
	a := e.receive(q, 2)
	wantBodies(t, a, "a2", "a3")

	// a2 visible again but a3 still in flight: the whole group stays blocked.
	if _, err := e.client.ChangeMessageVisibility(e.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: a[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	wantBodies(t, e.receive(q, 10))

	// Once a3 times out too, the group is redelivered from a2, in order
	// (interleaved with group B in send order).
	e.clock.Advance(31 * time.Second)
	again := e.receive(q, 10)
	wantBodies(t, again, "a2", "b1", "a3", "b2")
	if got := again[0].Attributes["ApproximateReceiveCount"]; got != "2" {
		t.Fatalf("ApproximateReceiveCount %s, want 2", got)
	}
	if again[0].Attributes["MessageGroupId"] != "A" || again[0].Attributes["SequenceNumber"] == "" {
		t.Fatalf("FIFO system attributes missing: %v", again[0].Attributes)
	}
}

func TestVisibilityTimeoutAndReceiptHandles(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("work", map[string]string{"VisibilityTimeout": "30"})
	e.send(q, "job", "", "")

	first := e.receive(q, 1)
	wantBodies(t, first, "job")
	if got := first[0].Attributes["ApproximateReceiveCount"]; got != "1" {
		t.Fatalf("ApproximateReceiveCount %s, want 1", got)
	}
	e.clock.Advance(29 * time.Second)
	wantBodies(t, e.receive(q, 1))

	e.clock.Advance(2 * time.Second)
	second := e.receive(q, 1)
	wantBodies(t, second, "job")
	if got := second[0].Attributes["ApproximateReceiveCount"]; got != "2" {
		t.Fatalf("ApproximateReceiveCount %s, want 2", got)
	}
	if second[0].Attributes["ApproximateFirstReceiveTimestamp"] != first[0].Attributes["ApproximateFirstReceiveTimestamp"] {
		t.Fatal("ApproximateFirstReceiveTimestamp changed between receives")
	}

	// A stale receipt handle is accepted but does not delete the message.
	e.deleteMessage(q, first[0])
	if visible, inFlight := e.counts(q); visible != "0" || inFlight != "1" {
		t.Fatalf("after stale delete: visible=%s inFlight=%s, want 0/1", visible, inFlight)
	}
	_, err := e.client.ChangeMessageVisibility(e.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 0})
	var invalid *types.ReceiptHandleIsInvalid
	if !errors.As(err, &invalid) {
		t.Fatalf("ChangeMessageVisibility with stale handle: %v, want *types.ReceiptHandleIsInvalid", err)
	}
	_, err = e.client.ChangeMessageVisibility(e.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String("garbage"), VisibilityTimeout: 0})
	if !errors.As(err, &invalid) {
		t.Fatalf("ChangeMessageVisibility with garbage handle: %v, want *types.ReceiptHandleIsInvalid", err)
	}
	_, err = e.client.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String("garbage")})
	if !errors.As(err, &invalid) {
		t.Fatalf("DeleteMessage with garbage handle: %v, want *types.ReceiptHandleIsInvalid", err)
	}

	// VisibilityTimeout 0 makes the message visible at once.
	if _, err := e.client.ChangeMessageVisibility(e.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: second[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.ChangeMessageVisibility(e.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: second[0].ReceiptHandle, VisibilityTimeout: 10})
	var notInflight *types.MessageNotInflight
	if !errors.As(err, &notInflight) {
		t.Fatalf("ChangeMessageVisibility on a visible message: %v, want *types.MessageNotInflight", err)
	}

	third := e.receive(q, 1)
	wantBodies(t, third, "job")
	e.deleteMessage(q, third[0])
	e.clock.Advance(time.Hour)
	wantBodies(t, e.receive(q, 1))
	if visible, inFlight := e.counts(q); visible != "0" || inFlight != "0" {
		t.Fatalf("after delete: visible=%s inFlight=%s, want 0/0", visible, inFlight)
	}
}

func TestRedrivePolicyMovesToDeadLetterQueue(t *testing.T) {
	e := newEnv(t)
	dlq := e.createQueue("jobs-dlq.fifo", fifoAttrs)
	_, err := e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"), Attributes: map[string]string{
		"FifoQueue":     "true",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:missing.fifo","maxReceiveCount":"3"}`,
	}})
	wantAPIError(t, err, "InvalidParameterValue")

	q := e.createQueue("jobs.fifo", map[string]string{
		"FifoQueue":         "true",
		"VisibilityTimeout": "10",
		"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:jobs-dlq.fifo","maxReceiveCount":"3"}`,
	})
	sent, err := e.client.SendMessage(e.ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q), MessageBody: aws.String("poison"), MessageGroupId: aws.String("g1"), MessageDeduplicationId: aws.String("p"),
		MessageAttributes: map[string]types.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("test")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.send(q, "next", "g1", "n")

	for i := 1; i <= 3; i++ {
		got := e.receive(q, 1)
		wantBodies(t, got, "poison")
		if rc := got[0].Attributes["ApproximateReceiveCount"]; rc != strconv.Itoa(i) {
			t.Fatalf("receive %d: ApproximateReceiveCount %s", i, rc)
		}
		e.clock.Advance(11 * time.Second)
	}
	// The fourth receive moves "poison" to the DLQ and serves the group's next message.
	wantBodies(t, e.receive(q, 1), "next")

	moved := e.receive(dlq, 10)
	wantBodies(t, moved, "poison")
	m := moved[0]
	if aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) {
		t.Fatalf("DLQ MessageId %s, want %s", aws.ToString(m.MessageId), aws.ToString(sent.MessageId))
	}
	if m.Attributes["MessageGroupId"] != "g1" || aws.ToString(m.MessageAttributes["kind"].StringValue) != "test" {
		t.Fatalf("DLQ message lost group or attributes: %v %v", m.Attributes, m.MessageAttributes)
	}
	if aws.ToString(m.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) {
		t.Fatal("DLQ MD5OfMessageAttributes differs from the send")
	}

	// maxReceiveCount as a JSON number, on standard queues.
	sdlq := e.createQueue("std-dlq", nil)
	src := e.createQueue("std", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:std-dlq","maxReceiveCount":1}`})
	e.send(src, "once", "", "")
	wantBodies(t, e.receive(src, 1), "once")
	e.clock.Advance(2 * time.Second)
	wantBodies(t, e.receive(src, 1))
	wantBodies(t, e.receive(sdlq, 1), "once")
	if rp := e.attributes(src, types.QueueAttributeNameRedrivePolicy)["RedrivePolicy"]; !strings.Contains(rp, `"maxReceiveCount":1`) {
		t.Fatalf("RedrivePolicy rendered as %s", rp)
	}
}

func TestApproximateCounts(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("counts", nil)
	for i := range 3 {
		e.send(q, fmt.Sprint("m", i), "", "")
	}
	if _, err := e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("later"), DelaySeconds: 60}); err != nil {
		t.Fatal(err)
	}
	e.receive(q, 1)
	a := e.attributes(q, types.QueueAttributeNameAll)
	want := map[string]string{
		"ApproximateNumberOfMessages":           "2",
		"ApproximateNumberOfMessagesNotVisible": "1",
		"ApproximateNumberOfMessagesDelayed":    "1",
		"VisibilityTimeout":                     "30",
		"QueueArn":                              "arn:aws:sqs:us-east-1:000000000000:counts",
		"SqsManagedSseEnabled":                  "true",
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s = %q, want %q", k, a[k], v)
		}
	}
	if _, ok := a["FifoQueue"]; ok {
		t.Error("standard queue reports FifoQueue")
	}
	e.clock.Advance(61 * time.Second) // delay over, in-flight message visible again
	if visible, inFlight := e.counts(q); visible != "4" || inFlight != "0" {
		t.Fatalf("visible=%s inFlight=%s, want 4/0", visible, inFlight)
	}
	if _, err := e.client.PurgeQueue(e.ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(q)}); err != nil {
		t.Fatal(err)
	}
	if visible, _ := e.counts(q); visible != "0" {
		t.Fatalf("after purge visible=%s", visible)
	}
	_, err := e.client.PurgeQueue(e.ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(q)})
	var inProgress *types.PurgeQueueInProgress
	if !errors.As(err, &inProgress) {
		t.Fatalf("second purge within 60s: %v, want *types.PurgeQueueInProgress", err)
	}
}

func TestStandardQueueParameters(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("plain", nil)
	_, err := e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	wantAPIError(t, err, "InvalidParameterValue")

	// Since fair queues, standard queues accept MessageGroupId.
	e.send(q, "tenant", "tenant-1", "")
	got := e.receive(q, 1)
	wantBodies(t, got, "tenant")
	if got[0].Attributes["MessageGroupId"] != "tenant-1" {
		t.Fatalf("MessageGroupId not returned: %v", got[0].Attributes)
	}

	_, err = e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("bad \x01 char")})
	var contents *types.InvalidMessageContents
	if !errors.As(err, &contents) {
		t.Fatalf("control character: %v, want *types.InvalidMessageContents", err)
	}
	_, err = e.client.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 11})
	wantAPIError(t, err, "InvalidParameterValue")
}

func TestBatchLimits(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("batch", map[string]string{"MaximumMessageSize": "262144"})
	entries := func(n int, body string) []types.SendMessageBatchRequestEntry {
		out := make([]types.SendMessageBatchRequestEntry, n)
		for i := range out {
			out[i] = types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(body)}
		}
		return out
	}
	send := func(es []types.SendMessageBatchRequestEntry) (*sqs.SendMessageBatchOutput, error) {
		return e.client.SendMessageBatch(e.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q), Entries: es})
	}

	_, err := send(entries(11, "x"))
	var tooMany *types.TooManyEntriesInBatchRequest
	if !errors.As(err, &tooMany) {
		t.Fatalf("11 entries: %v, want *types.TooManyEntriesInBatchRequest", err)
	}
	dup := entries(2, "x")
	dup[1].Id = dup[0].Id
	_, err = send(dup)
	var notDistinct *types.BatchEntryIdsNotDistinct
	if !errors.As(err, &notDistinct) {
		t.Fatalf("duplicate ids: %v, want *types.BatchEntryIdsNotDistinct", err)
	}
	_, err = send([]types.SendMessageBatchRequestEntry{})
	var empty *types.EmptyBatchRequest
	if !errors.As(err, &empty) {
		t.Fatalf("no entries: %v, want *types.EmptyBatchRequest", err)
	}
	_, err = send(entries(5, strings.Repeat("b", 250*1024)))
	var tooLong *types.BatchRequestTooLong
	if !errors.As(err, &tooLong) {
		t.Fatalf("1.2 MiB batch: %v, want *types.BatchRequestTooLong", err)
	}

	_, err = e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(strings.Repeat("b", 256*1024+1))})
	wantAPIError(t, err, "InvalidParameterValue")

	mixed := entries(3, "ok")
	mixed[1].MessageBody = aws.String(strings.Repeat("b", 256*1024+1))
	out, err := send(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 2 || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "e1" || aws.ToString(out.Failed[0].Code) != "InvalidParameterValue" || !out.Failed[0].SenderFault {
		t.Fatalf("mixed batch: successful=%d failed=%+v", len(out.Successful), out.Failed)
	}

	msgs := e.receive(q, 10)
	del := []types.DeleteMessageBatchRequestEntry{{Id: aws.String("bad"), ReceiptHandle: aws.String("garbage")}}
	for i, m := range msgs {
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("d", i)), ReceiptHandle: m.ReceiptHandle})
	}
	dout, err := e.client.DeleteMessageBatch(e.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q), Entries: del})
	if err != nil {
		t.Fatal(err)
	}
	if len(dout.Successful) != 2 || len(dout.Failed) != 1 || aws.ToString(dout.Failed[0].Code) != "ReceiptHandleIsInvalid" {
		t.Fatalf("delete batch: successful=%d failed=%+v", len(dout.Successful), dout.Failed)
	}
}

func TestChangeMessageVisibilityBatch(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("cmvb", nil)
	e.send(q, "one", "", "")
	e.send(q, "two", "", "")
	msgs := e.receive(q, 10)
	out, err := e.client.ChangeMessageVisibilityBatch(e.ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q), Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0},
		{Id: aws.String("b"), ReceiptHandle: msgs[1].ReceiptHandle, VisibilityTimeout: 300},
	}})
	if err != nil || len(out.Successful) != 2 {
		t.Fatalf("ChangeMessageVisibilityBatch: %v %+v", err, out)
	}
	wantBodies(t, e.receive(q, 10), "one")
}

func TestMessageAttributesChecksum(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("attrs", nil)
	// Digest pinned by moto's SQS suite as the value AWS returns.
	out, err := e.client.SendMessage(e.ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q), MessageBody: aws.String("derp"),
		MessageAttributes: map[string]types.MessageAttributeValue{"timestamp": {DataType: aws.String("Number"), StringValue: aws.String("1493147359900")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(out.MD5OfMessageAttributes); got != "235c5c510d26fb653d073faed50ae77c" {
		t.Fatalf("MD5OfMessageAttributes %s", got)
	}
	if got := aws.ToString(out.MD5OfMessageBody); got != "58fd9edd83341c29f1aebba81c31e257" {
		t.Fatalf("MD5OfMessageBody %s", got)
	}
	_, err = e.client.SendMessage(e.ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q), MessageBody: aws.String("bin"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"b":     {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
			"s.tag": {DataType: aws.String("String.custom"), StringValue: aws.String("héllo")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	msgs := e.receive(q, 10)
	wantBodies(t, msgs, "derp", "bin")
	if got := aws.ToString(msgs[0].MD5OfMessageAttributes); got != "235c5c510d26fb653d073faed50ae77c" {
		t.Fatalf("received MD5OfMessageAttributes %s", got)
	}
	if b := msgs[1].MessageAttributes["b"].BinaryValue; string(b) != "\x00\x01\x02\xff" {
		t.Fatalf("binary attribute round trip: %v", b)
	}

	_, err = e.client.SendMessage(e.ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q), MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{"AWS.reserved": {DataType: aws.String("String"), StringValue: aws.String("v")}},
	})
	wantAPIError(t, err, "InvalidParameterValue")
}

func TestQueueLifecycle(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("life", map[string]string{"VisibilityTimeout": "60"})
	if again := e.createQueue("life", map[string]string{"VisibilityTimeout": "60"}); again != q {
		t.Fatalf("idempotent CreateQueue returned %s, want %s", again, q)
	}
	_, err := e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String("life"), Attributes: map[string]string{"VisibilityTimeout": "61"}})
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) {
		t.Fatalf("CreateQueue with different attributes: %v, want *types.QueueNameExists", err)
	}
	_, err = e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String("nofifo.fifo")})
	wantAPIError(t, err, "InvalidParameterValue")
	_, err = e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String("nosuffix"), Attributes: fifoAttrs})
	wantAPIError(t, err, "InvalidParameterValue")
	_, err = e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String("badvis"), Attributes: map[string]string{"VisibilityTimeout": "43201"}})
	var badValue *types.InvalidAttributeValue
	if !errors.As(err, &badValue) {
		t.Fatalf("VisibilityTimeout out of range: %v, want *types.InvalidAttributeValue", err)
	}
	_, err = e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String("badattr"), Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
	var badName *types.InvalidAttributeName
	if !errors.As(err, &badName) {
		t.Fatalf("FIFO attribute on standard queue: %v, want *types.InvalidAttributeName", err)
	}

	// Lookups only care about the queue name, not the host.
	other := strings.Replace(q, "127.0.0.1", "localhost", 1)
	e.send(other, "via localhost", "", "")
	wantBodies(t, e.receive(q, 1), "via localhost")

	e.createQueue("life-two", nil)
	e.createQueue("other", nil)
	list, err := e.client.ListQueues(e.ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("life")})
	if err != nil || len(list.QueueUrls) != 2 {
		t.Fatalf("ListQueues(prefix life): %v %v", list.QueueUrls, err)
	}

	if _, err := e.client.DeleteQueue(e.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q)}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetQueueUrl(e.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("life")})
	var missing *types.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Fatalf("GetQueueUrl after delete: %v, want *types.QueueDoesNotExist", err)
	}
	if missing.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("ErrorCode %q, want the legacy query code", missing.ErrorCode())
	}
	_, err = e.client.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x")})
	if !errors.As(err, &missing) {
		t.Fatalf("SendMessage to deleted queue: %v", err)
	}
	_, err = e.client.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: aws.String("life")})
	var recently *types.QueueDeletedRecently
	if !errors.As(err, &recently) {
		t.Fatalf("recreate within 60s: %v, want *types.QueueDeletedRecently", err)
	}
	e.clock.Advance(61 * time.Second)
	e.createQueue("life", nil)
}

func TestLongPolling(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("poll", nil)

	start := time.Now()
	go func() {
		time.Sleep(100 * time.Millisecond)
		e.send(q, "late", "", "")
	}()
	out, err := e.client.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), WaitTimeSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	wantBodies(t, out.Messages, "late")
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("long poll took %v; it should return when the message arrives", elapsed)
	}

	ctx, cancel := context.WithTimeout(e.ctx, 150*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = e.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), WaitTimeSeconds: 20})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled long poll: err=%v after %v", err, time.Since(start))
	}

	_, err = e.client.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), WaitTimeSeconds: 21})
	wantAPIError(t, err, "InvalidParameterValue")
}

func TestProtocolErrors(t *testing.T) {
	srv := httptest.NewServer(sqsd.New(sqsd.Options{}))
	defer srv.Close()
	post := func(target, body string) (*http.Response, map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		return resp, doc
	}

	resp, doc := post("AmazonSQS.Frobnicate", "{}")
	if resp.StatusCode != http.StatusBadRequest || !strings.HasSuffix(doc["__type"], "#UnknownOperationException") || resp.Header.Get("x-amzn-query-error") != "InvalidAction;Sender" {
		t.Fatalf("unknown operation: %d %v %q", resp.StatusCode, doc, resp.Header.Get("x-amzn-query-error"))
	}
	resp, doc = post("AmazonSQS.CreateQueue", "{not json")
	if resp.StatusCode != http.StatusBadRequest || !strings.HasSuffix(doc["__type"], "#SerializationException") || doc["message"] == "" {
		t.Fatalf("malformed JSON: %d %v", resp.StatusCode, doc)
	}
	resp, doc = post("AmazonSQS.SendMessage", `{"MessageBody":"x"}`)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("x-amzn-query-error") != "MissingParameter;Sender" {
		t.Fatalf("missing QueueUrl: %d %v", resp.StatusCode, doc)
	}
	resp, doc = post("AmazonSQS.GetQueueUrl", `{"QueueName":"nope"}`)
	if doc["__type"] != "com.amazonaws.sqs#QueueDoesNotExist" || resp.Header.Get("x-amzn-query-error") != "AWS.SimpleQueueService.NonExistentQueue;Sender" {
		t.Fatalf("QueueDoesNotExist wire form: %v %q", doc, resp.Header.Get("x-amzn-query-error"))
	}

	s := sqsd.New(sqsd.Options{})
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	if s.Handles(req) {
		t.Fatal("Handles without X-Amz-Target")
	}
	req.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
	if !s.Handles(req) {
		t.Fatal("Handles rejects an SQS target")
	}
}

func TestConcurrentProducersConsumers(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("busy.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	const perGroup = 20
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGroup {
				e.send(q, fmt.Sprintf("g%d-%03d", g, i), fmt.Sprint("g", g), "")
			}
		}()
	}
	wg.Wait()

	var mu sync.Mutex
	seen := map[string][]string{}
	received := 0
	deadline := time.Now().Add(10 * time.Second)
	var consumers sync.WaitGroup
	for range 3 {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for {
				out, err := e.client.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 3,
					MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done := received == 4*perGroup
				mu.Unlock()
				if done || time.Now().After(deadline) {
					return
				}
				mu.Lock()
				received += len(out.Messages)
				for _, m := range out.Messages {
					g := m.Attributes["MessageGroupId"]
					seen[g] = append(seen[g], aws.ToString(m.Body))
				}
				mu.Unlock()
				for _, m := range out.Messages {
					if _, err := e.client.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	consumers.Wait()
	if received != 4*perGroup {
		t.Fatalf("received %d messages, want %d", received, 4*perGroup)
	}
	for g, got := range seen {
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("group %s delivered out of order: %v", g, got)
			}
		}
	}
}
