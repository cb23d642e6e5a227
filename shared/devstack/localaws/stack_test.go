package localaws_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

func startStack(t *testing.T, hold bool) (*localaws.Stack, localaws.Clients, localaws.Provisioned) {
	t.Helper()
	s, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0", HoldS3Events: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := s.Clients()
	p, err := localaws.Provision(context.Background(), c, resources.Default("t"), localaws.ProvisionOptions{VisibilityTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, c, p
}

func TestS3ConditionalWrites(t *testing.T) {
	_, c, p := startStack(t, false)
	ctx := context.Background()
	b := awsio.NewBucket(c.S3, p.Def.Bucket.Name)
	etag, err := b.PutIfAbsent(ctx, "k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutIfAbsent(ctx, "k", []byte("again")); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("If-None-Match on existing key: %v, want 412", err)
	}
	etag2, err := b.PutIfMatch(ctx, "k", []byte("v2"), etag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutIfMatch(ctx, "k", []byte("v3"), etag); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("stale If-Match: %v, want 412", err)
	}
	if _, err := b.PutIfMatch(ctx, "missing", []byte("x"), etag2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("If-Match on a missing key: %v, want 404 NoSuchKey as on S3", err)
	}
	// Concurrent CAS: exactly one winner.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.PutIfMatch(ctx, "k", []byte("w"+strconv.Itoa(i)), etag2); err == nil {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d concurrent If-Match winners, want exactly 1", wins.Load())
	}
}

func TestDynamoDBConditionFailureIsTyped(t *testing.T) {
	_, c, p := startStack(t, false)
	ctx := context.Background()
	item := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "b"}}
	put := &dynamodb.PutItemInput{TableName: aws.String(p.Def.Table.Name), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}
	if _, err := c.Dynamo.PutItem(ctx, put); err != nil {
		t.Fatal(err)
	}
	_, err := c.Dynamo.PutItem(ctx, put)
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second conditional put: %T %v, want *ConditionalCheckFailedException", err, err)
	}
}

func TestHeadNotificationHasS3EventShape(t *testing.T) {
	s, c, p := startStack(t, true)
	ctx := context.Background()
	b := awsio.NewBucket(c.S3, p.Def.Bucket.Name)
	for _, k := range []string{"collections/c1/manifest_committed_head.json", "collections/c1/data/l0/x.seg", "other/manifest_committed_head.json", "collections/c1/manifest_committed_head.json"} {
		if _, err := b.Put(ctx, k, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	held := s.TakeS3Events()
	if len(held) != 2 {
		t.Fatalf("%d notifications, want 2 (prefix+suffix filter)", len(held))
	}
	var seqs []string
	for _, h := range held {
		var ev events.S3Event
		if err := json.Unmarshal(h.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		r := ev.Records[0]
		if h.Function != resources.FnObserver || r.EventSource != "aws:s3" || r.EventName != "ObjectCreated:Put" ||
			r.S3.Bucket.Name != p.Def.Bucket.Name || r.S3.Object.URLDecodedKey != "collections/c1/manifest_committed_head.json" ||
			r.S3.Object.Size != 2 || r.S3.Object.ETag == "" || r.S3.Object.Sequencer == "" {
			t.Fatalf("unexpected event %s", h.Payload)
		}
		seqs = append(seqs, r.S3.Object.Sequencer)
	}
	if !(seqs[0] < seqs[1]) {
		t.Fatalf("sequencers not increasing for one key: %v", seqs)
	}
	out, err := c.S3.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String(p.Def.Bucket.Name)})
	if err != nil || len(out.LambdaFunctionConfigurations) != 1 || aws.ToString(out.LambdaFunctionConfigurations[0].LambdaFunctionArn) != localaws.FunctionARN(resources.FnObserver) {
		t.Fatalf("notification configuration round trip: %v %+v", err, out)
	}
}

// The event source mapping deletes what the handler processed, leaves the
// items it reports in batchItemFailures for redelivery, and redrive moves a
// message that keeps failing to the DLQ after maxReceiveCount.
func TestEventSourceMappingPartialFailuresAndRedrive(t *testing.T) {
	s, c, p := startStack(t, false)
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string]int{}
	s.RegisterFunction("consumer", func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			if r.EventSource != "aws:sqs" || r.Attributes["MessageGroupId"] == "" || r.Attributes["ApproximateReceiveCount"] == "" {
				t.Errorf("record lacks SQS event attributes: %+v", r)
			}
			seen[r.Body]++
			if strings.HasPrefix(r.Body, "poison") {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}, 5*time.Second)
	url := p.QueueURLs[resources.QueueHandoff]
	for i, body := range []string{"ok-1", "poison-1", "ok-2"} {
		_, err := c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
			MessageGroupId: aws.String("g" + strconv.Itoa(i)), MessageDeduplicationId: aws.String(body)})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.MapQueue(localaws.Mapping{QueueURL: url, Function: "consumer", BatchSize: 10, MaxConcurrency: 1})
	q, _ := p.Def.Queue(resources.QueueHandoff)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(p.DLQURLs[resources.QueueHandoff]), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 1 {
			if aws.ToString(out.Messages[0].Body) != "poison-1" {
				t.Fatalf("DLQ got %q", aws.ToString(out.Messages[0].Body))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("poison message never reached the DLQ")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["ok-1"] != 1 || seen["ok-2"] != 1 || seen["poison-1"] != q.MaxReceiveCount {
		t.Fatalf("deliveries %v, want ok once each and poison %d times", seen, q.MaxReceiveCount)
	}
}

func TestRequestsAreCountedPerOperation(t *testing.T) {
	s, c, p := startStack(t, false)
	before := s.Counter().Snapshot()
	b := awsio.NewBucket(c.S3, p.Def.Bucket.Name)
	if _, err := b.Put(context.Background(), "x", bytes.Repeat([]byte("a"), 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	got := s.Counter().Since(before)
	if got["s3:PutObject"] != 1 || got["s3:GetObject"] != 1 || localaws.Total(got) != 2 {
		t.Fatalf("counts %v", got)
	}
}

// A streaming upload holds one part in memory: large objects go as a
// multipart upload that becomes visible only on Close; Abort leaves nothing.
func TestStreamingUploadIsMultipartAndAtomic(t *testing.T) {
	_, c, p := startStack(t, false)
	ctx := context.Background()
	b := awsio.NewBucket(c.S3, p.Def.Bucket.Name)
	body := bytes.Repeat([]byte("0123456789abcdef"), (2*awsio.PartSize+12345)/16)
	up, err := b.Create(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(body); off += 100_000 {
		if _, err := up.Write(body[off:min(off+100_000, len(body))]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Size(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("object visible before Close: %v", err)
	}
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, "big")
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back %d bytes (err %v), want %d identical", len(got), err, len(body))
	}
	up, _ = b.Create(ctx, "aborted")
	_, _ = up.Write(body)
	if err := up.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Size(ctx, "aborted"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("aborted upload left an object: %v", err)
	}
}

// With Upstream set the stack proxies every AWS API call to another
// endpoint (LocalStack in make e2e-localstack; here, a second embedded
// stack) and still delivers the notifications itself.
func TestUpstreamProxyKeepsEventDelivery(t *testing.T) {
	up, upClients, _ := startStack(t, false)
	s, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0", HoldS3Events: true, Upstream: up.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	p, err := localaws.Provision(ctx, s.Clients(), resources.Default("proxied"), localaws.ProvisionOptions{VisibilityTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := awsio.NewBucket(s.Clients().S3, p.Def.Bucket.Name).Put(ctx, "collections/c1/manifest_committed_head.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := awsio.NewBucket(upClients.S3, p.Def.Bucket.Name).Get(ctx, "collections/c1/manifest_committed_head.json"); err != nil {
		t.Fatalf("object not stored upstream: %v", err)
	}
	if n := len(s.TakeS3Events()); n != 1 {
		t.Fatalf("%d notifications from the proxying stack, want 1", n)
	}
	if _, err := upClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(p.Def.Queues[0].Name)}); err != nil {
		t.Fatalf("queue not created upstream: %v", err)
	}
}

// An S3 notification whose asynchronous invocation fails every attempt goes
// to the on-failure destination queue in Lambda's destination record shape:
// no head event is lost silently.
func TestExhaustedNotificationGoesToFailureDestination(t *testing.T) {
	s, c, p := startStack(t, false)
	ctx := context.Background()
	var calls atomic.Int32
	s.RegisterFunction(resources.FnObserver, func(ctx context.Context, ev events.S3Event) error {
		calls.Add(1)
		return errors.New("head not usable")
	}, time.Second)
	s.SetAsyncFailureQueue(p.FailureQueueURL)
	if _, err := awsio.NewBucket(c.S3, p.Def.Bucket.Name).Put(ctx, "collections/c1/manifest_committed_head.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(p.FailureQueueURL), WaitTimeSeconds: 5})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("no destination record: %v %+v", err, out)
	}
	var rec struct {
		RequestContext struct {
			Condition string `json:"condition"`
		} `json:"requestContext"`
		RequestPayload  events.S3Event `json:"requestPayload"`
		ResponsePayload struct {
			ErrorMessage string `json:"errorMessage"`
		} `json:"responsePayload"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(out.Messages[0].Body)), &rec); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 || rec.RequestContext.Condition != "RetriesExhausted" || rec.ResponsePayload.ErrorMessage != "head not usable" ||
		rec.RequestPayload.Records[0].S3.Object.URLDecodedKey != "collections/c1/manifest_committed_head.json" {
		t.Fatalf("invocations %d, record %+v", calls.Load(), rec)
	}
}

// The stack's SQS endpoint (the same sqsd the stack mounts) through the
// real SDK: FIFO order within a group, a group blocked while one of its
// messages is in flight while another group is served, deduplication,
// ChangeMessageVisibility, approximate counts and AWS's error for a missing
// group id. (shared/devstack/localaws/sqsd's own tests cover the rest, including the
// 5-minute window on an injected clock.)
func TestStackSQSFIFOSemantics(t *testing.T) {
	_, c, p := startStack(t, false)
	ctx := context.Background()
	url := aws.String(p.QueueURLs[resources.QueueCompaction])
	send := func(group, dedup string) {
		t.Helper()
		if _, err := c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(group + "/" + dedup),
			MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)}); err != nil {
			t.Fatal(err)
		}
	}
	send("a", "a1")
	send("a", "a2")
	send("b", "b1")
	send("a", "a1") // duplicate within the window: accepted, not enqueued
	if _, err := c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("x")}); err == nil ||
		!strings.Contains(err.Error(), "MissingParameter") {
		t.Fatalf("FIFO send without a group id: %v, want MissingParameter", err)
	}
	recv := func() []sqstypes.Message {
		t.Helper()
		out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 1})
		if err != nil {
			t.Fatal(err)
		}
		return out.Messages
	}
	first := recv()
	if len(first) != 1 || aws.ToString(first[0].Body) != "a/a1" {
		t.Fatalf("first receive %v, want a/a1", first)
	}
	// a is blocked while a1 is in flight; b is served.
	second := recv()
	if len(second) != 1 || aws.ToString(second[0].Body) != "b/b1" {
		t.Fatalf("second receive %v, want b/b1 (group a blocked)", second)
	}
	if got := recv(); len(got) != 0 {
		t.Fatalf("third receive %v, want nothing: a blocked, b in flight", got)
	}
	attrs, err := c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil || attrs.Attributes["ApproximateNumberOfMessages"] != "1" || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "2" {
		t.Fatalf("counts %v (err %v), want 1 visible and 2 in flight (the duplicate was not enqueued)", attrs.Attributes, err)
	}
	// Releasing a1 (visibility 0) makes it, not a2, the next of group a.
	if _, err := c.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	again := recv()
	if len(again) != 1 || aws.ToString(again[0].Body) != "a/a1" {
		t.Fatalf("after release %v, want a/a1 again", again)
	}
	if _, err := c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: again[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if next := recv(); len(next) != 1 || aws.ToString(next[0].Body) != "a/a2" {
		t.Fatalf("after deleting a1 %v, want a/a2", next)
	}
}

// Provisioning creates each task queue as deployed: FIFO in high-throughput
// mode (deduplication and throughput per message group) with a FIFO DLQ.
func TestProvisionedQueuesAreHighThroughputFIFO(t *testing.T) {
	_, c, p := startStack(t, false)
	for _, q := range p.Def.Queues {
		out, err := c.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(p.QueueURLs[q.Class]), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"FifoQueue": "true", "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
		for k, v := range want {
			if out.Attributes[k] != v {
				t.Errorf("%s: %s = %q, want %q", q.Name, k, out.Attributes[k], v)
			}
		}
	}
}

// OnCall sees every AWS request with the identity that signed it, the
// operation, the resources it names and the answer.
func TestOnCallRecordsSignerOperationResourcesAndAnswer(t *testing.T) {
	var mu sync.Mutex
	var calls []localaws.Call
	s, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0", OnCall: func(c localaws.Call) { mu.Lock(); calls = append(calls, c); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	p, err := localaws.Provision(ctx, s.Clients(), resources.Default("rec"), localaws.ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Config()
	cfg.Credentials = credentialsFor("AKIDRECORDED")
	c := localaws.NewClients(cfg)
	b := awsio.NewBucket(c.S3, p.Def.Bucket.Name)
	if _, err := b.Put(ctx, "a/b.seg", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(p.Def.Bucket.Name), Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{{Key: aws.String("a/b.seg")}, {Key: aws.String("a/c.seg")}}, Quiet: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	_, _ = b.Get(ctx, "missing")
	// Versions and the bucket's own configuration are their own operations
	// (whatever the stack answers): the acts that would take the undo away.
	bucket := aws.String(p.Def.Bucket.Name)
	_, _ = c.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String("a/b.seg"), VersionId: aws.String("v1")})
	_, _ = c.S3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: bucket, VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusSuspended}})
	_, _ = c.S3.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: bucket})
	if _, err := c.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.QueueURLs[resources.QueueGC]), Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("1"), MessageBody: aws.String("m"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamo.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(p.Def.Table.Name),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "x"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "y"}}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, c := range calls {
		if c.AccessKey != "AKIDRECORDED" {
			continue
		}
		if c.Operation == "DeleteObject" || strings.Contains(c.Operation, "Bucket") {
			got = append(got, fmt.Sprintf("%s %s %s/%s %v %v", c.Service, c.Operation, c.Bucket, c.Key, c.Keys, c.VersionIDs))
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %s/%s %v %s %v %d %s", c.Service, c.Operation, c.Bucket, c.Key, c.Keys, c.QueueURL, c.Tables, c.Status, c.ErrorCode))
	}
	want := []string{
		"s3 PutObject " + p.Def.Bucket.Name + "/a/b.seg []  [] 200 ",
		"s3 DeleteObjects " + p.Def.Bucket.Name + "/ [a/b.seg a/c.seg]  [] 200 ",
		"s3 GetObject " + p.Def.Bucket.Name + "/missing []  [] 404 NoSuchKey",
		"s3 DeleteObject " + p.Def.Bucket.Name + "/a/b.seg [] [v1]",
		"s3 PutBucketVersioning " + p.Def.Bucket.Name + "/ [] []",
		"s3 DeleteBucketPolicy " + p.Def.Bucket.Name + "/ [] []",
		"sqs SendMessageBatch / [] " + p.QueueURLs[resources.QueueGC] + " [] 200 ",
		"dynamodb GetItem / []  [" + p.Def.Table.Name + "] 200 ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("recorded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A request whose body does not arrive whole (the caller hung up while
// sending it, as a cancelled context does at shutdown) is recorded as
// Truncated: it names no table, and no checker may judge it as a call.
func TestOnCallMarksARequestCutShort(t *testing.T) {
	got := make(chan localaws.Call, 1)
	s, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0", OnCall: func(c localaws.Call) {
		if c.Service == "dynamodb" {
			got <- c
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nX-Amz-Target: DynamoDB_20120810.UpdateItem\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 200\r\n\r\n{\"TableName\":", u.Host)
	_ = conn.Close()
	select {
	case c := <-got:
		if !c.Truncated || c.Operation != "UpdateItem" {
			t.Fatalf("recorded %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut-short request was not recorded")
	}
}

func credentialsFor(akid string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: akid, SecretAccessKey: "s"}, nil
	})
}

// The stack refuses, with an error naming it, a notification destination
// it would never deliver to, and overlapping configurations as S3 does.
func TestNotificationConfigurationRefusesWhatItDoesNotHonour(t *testing.T) {
	_, c, p := startStack(t, false)
	ctx := context.Background()
	put := func(cfg s3types.NotificationConfiguration) error {
		_, err := c.S3.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String(p.Def.Bucket.Name), NotificationConfiguration: &cfg})
		return err
	}
	events := []s3types.Event{s3types.EventS3ObjectCreated}
	filter := func(prefix, suffix string) *s3types.NotificationConfigurationFilter {
		return &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{
			{Name: s3types.FilterRuleNamePrefix, Value: aws.String(prefix)}, {Name: s3types.FilterRuleNameSuffix, Value: aws.String(suffix)}}}}
	}
	fn := func(id, prefix, suffix string) s3types.LambdaFunctionConfiguration {
		return s3types.LambdaFunctionConfiguration{Id: aws.String(id), LambdaFunctionArn: aws.String(localaws.FunctionARN(id)), Events: events, Filter: filter(prefix, suffix)}
	}
	for _, tc := range []struct {
		name string
		cfg  s3types.NotificationConfiguration
		want string
	}{
		{"queue target", s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{QueueArn: aws.String("arn:aws:sqs:us-east-1:000000000000:q"), Events: events}}},
			"NotImplemented: the embedded stack does not deliver S3 notifications to SQS queues (QueueConfiguration)"},
		{"topic target", s3types.NotificationConfiguration{TopicConfigurations: []s3types.TopicConfiguration{{TopicArn: aws.String("arn:aws:sns:us-east-1:000000000000:t"), Events: events}}},
			"NotImplemented: the embedded stack does not deliver S3 notifications to SNS topics (TopicConfiguration)"},
		{"overlapping functions", s3types.NotificationConfiguration{LambdaFunctionConfigurations: []s3types.LambdaFunctionConfiguration{
			fn("a", "collections/", ".json"), fn("b", "collections/c1/", "head.json")}}, "InvalidArgument: Configurations overlap"},
	} {
		err := put(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// Disjoint filters are fine, and EventBridge next to them too.
	if err := put(s3types.NotificationConfiguration{EventBridgeConfiguration: &s3types.EventBridgeConfiguration{},
		LambdaFunctionConfigurations: []s3types.LambdaFunctionConfiguration{fn("a", "collections/", ".json"), fn("b", "other/", ".json")}}); err != nil {
		t.Fatal(err)
	}
}

// EventBridge mode: the bucket's events reach the functions a rule
// targets, in S3's "Object Created" shape with the key as is; a pattern
// operator or a target the stack cannot honour is refused.
func TestEventBridgeRulesDeliverObjectCreatedEvents(t *testing.T) {
	s, c, p := startStack(t, false)
	ctx := context.Background()
	got := make(chan map[string]any, 4)
	s.RegisterFunction("target", func(_ context.Context, ev map[string]any) error { got <- ev; return nil }, time.Minute)
	if _, err := c.S3.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String(p.Def.Bucket.Name),
		NotificationConfiguration: &s3types.NotificationConfiguration{EventBridgeConfiguration: &s3types.EventBridgeConfiguration{}}}); err != nil {
		t.Fatal(err)
	}
	pattern, _ := json.Marshal(p.Def.Bucket.HeadEventPattern(p.Def.Bucket.Name))
	if _, err := c.Events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("heads"), EventPattern: aws.String(string(pattern))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("heads"), Targets: []ebtypes.Target{{Id: aws.String("t"), Arn: aws.String(localaws.FunctionARN("target"))}}}); err != nil {
		t.Fatal(err)
	}
	b := awsio.NewBucket(c.S3, p.Def.Bucket.Name)
	for _, k := range []string{"collections/c 1/manifest_committed_head.json", "collections/c1/manifests/x.json", "other/manifest_committed_head.json"} {
		if _, err := b.Put(ctx, k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d events delivered, want the head key's only", len(got))
	}
	ev := <-got
	detail := ev["detail"].(map[string]any)
	if ev["source"] != "aws.s3" || ev["detail-type"] != "Object Created" || detail["object"].(map[string]any)["key"] != "collections/c 1/manifest_committed_head.json" {
		t.Fatalf("event %v", ev)
	}
	for name, in := range map[string]*eventbridge.PutRuleInput{
		"numeric operator": {Name: aws.String("n"), EventPattern: aws.String(`{"detail":{"size":[{"numeric":[">",1]}]}}`)},
		"anything-but":     {Name: aws.String("a"), EventPattern: aws.String(`{"source":[{"anything-but":"x"}]}`)},
	} {
		if _, err := c.Events.PutRule(ctx, in); err == nil || !strings.Contains(err.Error(), "not supported by the embedded stack") {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if _, err := c.Events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("heads"), Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String("arn:aws:sqs:us-east-1:000000000000:q")}}}); err == nil ||
		!strings.Contains(err.Error(), "only to its Lambda functions") {
		t.Errorf("queue target: %v, want a refusal", err)
	}
}
