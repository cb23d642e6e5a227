package fidelity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/testkit/moto"
)

// backend is one implementation of the AWS APIs under test.
type backend struct {
	name  string
	c     localaws.Clients
	stack *localaws.Stack // embedded only
	moto  *moto.Server    // moto only
}

var motoServer *moto.Server

func TestMain(m *testing.M) {
	code := func() int {
		if os.Getenv("BCC_E2E_MOTO") == "1" {
			srv, err := moto.Start(context.Background(), moto.Options{})
			if err != nil {
				fmt.Fprintln(os.Stderr, "fidelity:", err)
				return 1
			}
			defer srv.Close()
			motoServer = srv
		}
		return m.Run()
	}()
	os.Exit(code)
}

// each runs a case on the embedded stack and, under make e2e-moto, on moto.
func each(t *testing.T, run func(t *testing.T, b backend)) {
	t.Run("embedded", func(t *testing.T) {
		st, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0", HoldS3Events: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		run(t, backend{name: "embedded", c: st.Clients(), stack: st})
	})
	t.Run("moto", func(t *testing.T) {
		if motoServer == nil {
			t.Skip("moto_server runs under make e2e-moto (BCC_E2E_MOTO=1)")
		}
		run(t, backend{name: "moto", c: localaws.NewClients(motoServer.Config(motoServer.Admin)), moto: motoServer})
	})
}

var ctx = context.Background()

// knownDivergences are answers of a backend that depart from AWS's
// documented behaviour, with why the product does not depend on them. A
// case logs them (so they stay visible in the test output and docs/testing.md's
// fidelity table) instead of failing.
var knownDivergences = map[string]string{
	"moto/s3-event-sequencer": "moto's S3 events carry no sequencer: the observer never orders or trusts events, it re-reads the head (rule: never trust the event)",
	"moto/sqs-dedup-scope-group": "moto ignores DeduplicationScope=messageGroup (it deduplicates per queue): task ids embed the collection, " +
		"which is the message group, so per-queue and per-group scopes absorb the same duplicates for the product's messages",
	"embedded/s3-copy-source-version": "gofakes3 copies the current version whatever versionId the copy source names: only an operator's restore " +
		"(docs/operations.md, \"Restoring deleted objects\") copies a version, and moto (as S3) copies the one named",
}

// diverges reports (and logs) whether b is known to depart from AWS in case.
func diverges(t *testing.T, b backend, id string) bool {
	t.Helper()
	why, ok := knownDivergences[b.name+"/"+id]
	if ok {
		t.Logf("known divergence of %s: %s", b.name, why)
	}
	return ok
}

func unique(prefix string) string { return fmt.Sprintf("%s-%08x", prefix, rand.Uint32()) }

func bucket(t *testing.T, b backend) string {
	t.Helper()
	name := unique("fid")
	if _, err := b.c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return name
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}

func put(b backend, bk, key, body string, mod func(*s3.PutObjectInput)) (string, error) {
	in := &s3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String(key), Body: strings.NewReader(body)}
	if mod != nil {
		mod(in)
	}
	out, err := b.c.S3.PutObject(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// S3: an overwrite replaces the object's metadata, checksums included: a
// reader validating response checksums (the SDK's default) reads what was
// written last whatever checksum (or none) each writer sent. The
// publisher rewrites a head with no checksum after one written with one.
func TestS3OverwriteReplacesTheChecksum(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		get := func() string {
			t.Helper()
			out, err := b.c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), ChecksumMode: s3types.ChecksumModeEnabled})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Body.Close()
			got, err := io.ReadAll(out.Body)
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			return string(got)
		}
		for _, w := range []struct {
			body string
			alg  s3types.ChecksumAlgorithm
		}{{"v1 crc32", s3types.ChecksumAlgorithmCrc32}, {"v2 none", ""}, {"v3 sha256", s3types.ChecksumAlgorithmSha256}, {"v4 crc32", s3types.ChecksumAlgorithmCrc32}} {
			in := &s3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), Body: strings.NewReader(w.body), ChecksumAlgorithm: w.alg}
			noneUnlessAsked := func(o *s3.Options) {
				if w.alg == "" {
					o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
				}
			}
			if _, err := b.c.S3.PutObject(ctx, in, noneUnlessAsked); err != nil {
				t.Fatalf("put %q: %v", w.body, err)
			}
			if got := get(); got != w.body {
				t.Fatalf("read %q after writing %q", got, w.body)
			}
		}
	})
}

// S3: If-None-Match "*" creates only (a second create answers 412).
func TestS3IfNoneMatchCreatesOnly(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		create := func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }
		if _, err := put(b, bk, "k", "1", create); err != nil {
			t.Fatal(err)
		}
		if _, err := put(b, bk, "k", "2", create); code(err) != "PreconditionFailed" {
			t.Fatalf("second create: %v, want PreconditionFailed (412)", err)
		}
	})
}

// S3: If-Match is compare-and-swap on the ETag: a stale ETag answers 412,
// and of concurrent writers with the same ETag exactly one wins.
func TestS3IfMatchCompareAndSwap(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		e1, err := put(b, bk, "head", "v1", nil)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := put(b, bk, "head", "v2", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(e1) })
		if err != nil {
			t.Fatalf("CAS with the current ETag: %v", err)
		}
		if _, err := put(b, bk, "head", "v3", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(e1) }); code(err) != "PreconditionFailed" {
			t.Fatalf("CAS with a stale ETag: %v, want PreconditionFailed (412)", err)
		}
		var wins sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 8 {
			wins.Add(1)
			go func() {
				defer wins.Done()
				if _, err := put(b, bk, "head", "race"+strconv.Itoa(i), func(in *s3.PutObjectInput) { in.IfMatch = aws.String(e2) }); err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wins.Wait()
		if won != 1 {
			t.Fatalf("%d of 8 concurrent CAS writers won, want exactly 1", won)
		}
	})
}

// S3: a conditional PUT on a missing key answers 404 NoSuchKey for
// If-Match (not 412), and a GET of a missing key 404 NoSuchKey.
func TestS3MissingKeyIs404NotPrecondition(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		_, err := put(b, bk, "missing", "x", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"0123456789abcdef0123456789abcdef"`) })
		if code(err) != "NoSuchKey" {
			t.Errorf("If-Match on a missing key: %v, want NoSuchKey (404)", err)
		}
		_, err = b.c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String("missing")})
		if code(err) != "NoSuchKey" {
			t.Errorf("GET of a missing key: %v, want NoSuchKey (404)", err)
		}
	})
}

// S3: DeleteObjects answers per key; deleting a missing key is a success;
// a key the caller may not delete comes back in Errors while the rest are
// deleted (a partial failure).
func TestS3DeleteObjectsAnswersPerKey(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		for _, k := range []string{"a", "keep/b"} {
			if _, err := put(b, bk, k, k, nil); err != nil {
				t.Fatal(err)
			}
		}
		del := func(keys ...string) *s3.DeleteObjectsOutput {
			var objs []s3types.ObjectIdentifier
			for _, k := range keys {
				objs = append(objs, s3types.ObjectIdentifier{Key: aws.String(k)})
			}
			out, err := b.c.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bk), Delete: &s3types.Delete{Objects: objs, Quiet: aws.Bool(false)}})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		out := del("a", "never-existed")
		if len(out.Deleted) != 2 || len(out.Errors) != 0 {
			t.Fatalf("delete of an existing and a missing key: %d deleted, %d errors, want 2 and 0", len(out.Deleted), len(out.Errors))
		}
		// A partial failure needs a key the caller may not delete: a bucket
		// policy denying it.
		policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::%s/keep/*"}]}`, bk)
		if _, err := b.c.S3.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(bk), Policy: aws.String(policy)}); err != nil {
			t.Skipf("%s: cannot deny one key (PutBucketPolicy answers %v: no bucket policies): no per-key failure can be produced; "+
				"GC's handling of them is tested with injected failures (TestGCRetriesPartialDeleteFailuresUntilConfirmed)", b.name, code(err))
		}
		if _, err := put(b, bk, "c", "c", nil); err != nil {
			t.Fatal(err)
		}
		out = del("c", "keep/b")
		if len(out.Deleted) != 1 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "keep/b" || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
			t.Fatalf("partial failure: deleted %d, errors %+v, want c deleted and keep/b AccessDenied", len(out.Deleted), out.Errors)
		}
	})
}

// S3: ListObjectsV2 pages with continuation tokens.
func TestS3ListObjectsV2Pages(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		for i := range 5 {
			if _, err := put(b, bk, fmt.Sprintf("collections/c1/data/l0/%d.seg", i), "x", nil); err != nil {
				t.Fatal(err)
			}
		}
		p := s3.NewListObjectsV2Paginator(b.c.S3, &s3.ListObjectsV2Input{Bucket: aws.String(bk), Prefix: aws.String("collections/c1/data/"), MaxKeys: aws.Int32(2)})
		pages, keys := 0, 0
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			keys += len(out.Contents)
		}
		if pages != 3 || keys != 5 {
			t.Fatalf("%d pages, %d keys, want 3 and 5", pages, keys)
		}
	})
}

// S3 notifications: an object created under the filter's prefix with its
// suffix produces exactly one event, in S3's shape (eventSource aws:s3,
// ObjectCreated:Put, the key URL-encoded, size, eTag, a sequencer); keys
// outside the filter produce none. The embedded stack delivers to a
// function; moto (which runs no functions) to an SQS queue.
func TestS3NotificationShapeAndFilter(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		filter := &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{
			{Name: s3types.FilterRuleNamePrefix, Value: aws.String("collections/")},
			{Name: s3types.FilterRuleNameSuffix, Value: aws.String("manifest_committed_head.json")},
		}}}
		events := []s3types.Event{s3types.EventS3ObjectCreated}
		var queueURL string
		cfg := &s3types.NotificationConfiguration{}
		if b.stack != nil {
			cfg.LambdaFunctionConfigurations = []s3types.LambdaFunctionConfiguration{{Id: aws.String("heads"), LambdaFunctionArn: aws.String(localaws.FunctionARN("observer")), Events: events, Filter: filter}}
		} else {
			q, err := b.c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(unique("fid-events"))})
			if err != nil {
				t.Fatal(err)
			}
			queueURL = aws.ToString(q.QueueUrl)
			a, _ := b.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
			cfg.QueueConfigurations = []s3types.QueueConfiguration{{Id: aws.String("heads"), QueueArn: aws.String(a.Attributes["QueueArn"]), Events: events, Filter: filter}}
		}
		if _, err := b.c.S3.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String(bk), NotificationConfiguration: cfg}); err != nil {
			t.Fatal(err)
		}
		head := "collections/c 1/manifest_committed_head.json"
		for _, k := range []string{head, "collections/c1/manifests/1.json", "other/manifest_committed_head.json"} {
			if _, err := put(b, bk, k, "{}", nil); err != nil {
				t.Fatal(err)
			}
		}
		var payloads [][]byte
		if b.stack != nil {
			for _, ev := range b.stack.TakeS3Events() {
				payloads = append(payloads, ev.Payload)
			}
		} else {
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				out, err := b.c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range out.Messages {
					if strings.Contains(aws.ToString(m.Body), `"Records"`) { // moto also sends s3:TestEvent
						payloads = append(payloads, []byte(aws.ToString(m.Body)))
					}
				}
				if len(payloads) > 0 {
					time.Sleep(500 * time.Millisecond) // anything more would be a filter failure
					out, _ := b.c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10})
					for _, m := range out.Messages {
						if strings.Contains(aws.ToString(m.Body), `"Records"`) {
							payloads = append(payloads, []byte(aws.ToString(m.Body)))
						}
					}
					break
				}
			}
		}
		if len(payloads) != 1 {
			t.Fatalf("%d events for 1 matching and 2 filtered keys", len(payloads))
		}
		var ev struct {
			Records []struct {
				EventSource string `json:"eventSource"`
				EventName   string `json:"eventName"`
				S3          struct {
					Bucket struct{ Name string } `json:"bucket"`
					Object struct {
						Key       string `json:"key"`
						Size      int64  `json:"size"`
						ETag      string `json:"eTag"`
						Sequencer string `json:"sequencer"`
					} `json:"object"`
				} `json:"s3"`
			}
		}
		if err := json.Unmarshal(payloads[0], &ev); err != nil || len(ev.Records) != 1 {
			t.Fatalf("event %s: %v", payloads[0], err)
		}
		r := ev.Records[0]
		key, _ := url.QueryUnescape(r.S3.Object.Key)
		if r.EventSource != "aws:s3" || r.EventName != "ObjectCreated:Put" || r.S3.Bucket.Name != bk || key != head ||
			r.S3.Object.Key == head || r.S3.Object.Size != 2 || r.S3.Object.ETag == "" {
			t.Fatalf("event shape %s", payloads[0])
		}
		if r.S3.Object.Sequencer == "" && !diverges(t, b, "s3-event-sequencer") {
			t.Fatalf("event without a sequencer: %s", payloads[0])
		}
	})
}

func fifo(t *testing.T, b backend, attrs map[string]string) (url, dlq string) {
	t.Helper()
	d, err := b.c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(unique("fid-dlq") + ".fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: d.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30",
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, a.Attributes["QueueArn"])}
	for k, v := range attrs {
		all[k] = v
	}
	q, err := b.c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(unique("fid") + ".fifo"), Attributes: all})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(q.QueueUrl), aws.ToString(d.QueueUrl)
}

func send(t *testing.T, b backend, url, group, dedup, body string) {
	t.Helper()
	if _, err := b.c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageGroupId: aws.String(group),
		MessageDeduplicationId: aws.String(dedup), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, b backend, url string, max int32) []sqstypes.Message {
	t.Helper()
	out, err := b.c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: max,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func bodies(ms []sqstypes.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, aws.ToString(m.Body))
	}
	return strings.Join(out, ",")
}

// SQS FIFO: a group is blocked while one of its messages is in flight;
// another group is not; order within a group holds.
func TestSQSFIFOGroupBlocking(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		q, _ := fifo(t, b, nil)
		send(t, b, q, "A", "a1", "A1")
		send(t, b, q, "A", "a2", "A2")
		send(t, b, q, "B", "b1", "B1")
		first := recv(t, b, q, 1)
		if bodies(first) != "A1" {
			t.Fatalf("first receive %q, want A1", bodies(first))
		}
		if got := bodies(recv(t, b, q, 10)); got != "B1" {
			t.Fatalf("while A1 is in flight: %q, want only B1 (A2 blocked behind A1)", got)
		}
		if _, err := b.c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: first[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		if got := bodies(recv(t, b, q, 10)); got != "A2" {
			t.Fatalf("after A1 is deleted: %q, want A2", got)
		}
	})
}

// SQS FIFO deduplication: the same deduplication id within the 5-minute
// window is absorbed; with DeduplicationScope messageGroup (high-throughput
// mode, as deployed) it is absorbed within a group only.
func TestSQSDeduplication(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		q, _ := fifo(t, b, nil)
		send(t, b, q, "A", "task-1", "first")
		send(t, b, q, "A", "task-1", "again")
		send(t, b, q, "B", "task-1", "other group, same id")
		if got := recv(t, b, q, 10); len(got) != 1 || aws.ToString(got[0].Body) != "first" {
			t.Fatalf("per-queue scope: %q, want only the first", bodies(got))
		}
		hq, _ := fifo(t, b, map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
		send(t, b, hq, "A", "task-1", "A first")
		send(t, b, hq, "A", "task-1", "A again")
		send(t, b, hq, "B", "task-1", "B first")
		got := bodies(recv(t, b, hq, 10))
		if strings.Contains(got, "again") || !strings.Contains(got, "A first") {
			t.Fatalf("per-group scope: %q absorbed nothing within group A", got)
		}
		if !strings.Contains(got, "B first") && !diverges(t, b, "sqs-dedup-scope-group") {
			t.Fatalf("per-group scope: %q, want A first and B first", got)
		}
	})
}

// SQS visibility: a received message stays hidden; ChangeMessageVisibility
// to 0 returns it at once with its receive count increased; after
// maxReceiveCount receives it moves to the dead-letter queue.
func TestSQSVisibilityAndRedrive(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		q, dlq := fifo(t, b, nil)
		send(t, b, q, "A", "m1", "M")
		for i := 1; i <= 2; i++ {
			ms := recv(t, b, q, 1)
			if len(ms) != 1 || ms[0].Attributes["ApproximateReceiveCount"] != strconv.Itoa(i) {
				t.Fatalf("receive %d: %d messages, attributes %v", i, len(ms), ms)
			}
			if got := recv(t, b, q, 1); len(got) != 0 {
				t.Fatalf("message visible while in flight")
			}
			if _, err := b.c.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: ms[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
				t.Fatal(err)
			}
		}
		if got := recv(t, b, q, 1); len(got) != 0 {
			t.Fatalf("message received a third time past maxReceiveCount 2")
		}
		if got := recv(t, b, dlq, 1); bodies(got) != "M" {
			t.Fatalf("dead-letter queue holds %q, want M", bodies(got))
		}
	})
}

func table(t *testing.T, b backend) string {
	t.Helper()
	name := unique("fid")
	_, err := b.c.Dynamo.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}}})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// DynamoDB: a failed condition answers ConditionalCheckFailedException and,
// with ReturnValuesOnConditionCheckFailure ALL_OLD, carries the item as it
// is (UpdateItem: the lease and observed-state adapters read it there);
// if_not_exists counts from a default.
func TestDynamoConditionalWrites(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		tb := table(t, b)
		key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "lease#c1"}}
		upd := func(cond string, holder string) error {
			_, err := b.c.Dynamo.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tb), Key: key,
				UpdateExpression:                    aws.String("SET holder = :h, epoch = if_not_exists(epoch, :zero) + :one"),
				ConditionExpression:                 aws.String(cond),
				ExpressionAttributeValues:           map[string]ddbtypes.AttributeValue{":h": &ddbtypes.AttributeValueMemberS{Value: holder}, ":zero": &ddbtypes.AttributeValueMemberN{Value: "0"}, ":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
				ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
			})
			return err
		}
		if err := upd("attribute_not_exists(pk)", "w1"); err != nil {
			t.Fatal(err)
		}
		err := upd("attribute_not_exists(pk)", "w2")
		var ccf *ddbtypes.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("second claim: %v, want ConditionalCheckFailedException", err)
		}
		if h, ok := ccf.Item["holder"].(*ddbtypes.AttributeValueMemberS); !ok || h.Value != "w1" {
			t.Fatalf("ALL_OLD on condition failure: item %v, want holder w1", ccf.Item)
		}
		if err := upd("holder = :h", "w1"); err != nil { // renew by the holder
			t.Fatal(err)
		}
		out, err := b.c.Dynamo.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tb), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := out.Item["epoch"].(*ddbtypes.AttributeValueMemberN); !ok || e.Value != "2" {
			t.Fatalf("epoch %v, want 2 (if_not_exists + 1, twice)", out.Item["epoch"])
		}
	})
}

// DynamoDB: REMOVE in an UpdateItem deletes the attribute (alone, and next
// to SET in one expression); GC's sweep record clears gc_due_at this way.
func TestDynamoUpdateRemovesAttributes(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		tb := table(t, b)
		key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "c1"}}
		n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
		if _, err := b.c.Dynamo.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tb), Item: map[string]ddbtypes.AttributeValue{
			"pk": key["pk"], "a": n("1"), "b": n("2"), "c": n("3")}}); err != nil {
			t.Fatal(err)
		}
		attrs := func() []string {
			t.Helper()
			out, err := b.c.Dynamo.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tb), Key: key, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for k := range out.Item {
				names = append(names, k)
			}
			slices.Sort(names)
			return names
		}
		if _, err := b.c.Dynamo.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tb), Key: key, UpdateExpression: aws.String("REMOVE a")}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(attrs(), ","); got != "b,c,pk" {
			t.Fatalf("after REMOVE a: attributes %s, want b,c,pk", got)
		}
		if _, err := b.c.Dynamo.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tb), Key: key,
			UpdateExpression: aws.String("SET d = :v REMOVE b, #c"), ExpressionAttributeNames: map[string]string{"#c": "c"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": n("4")}}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(attrs(), ","); got != "d,pk" {
			t.Fatalf("after SET d REMOVE b, #c: attributes %s, want d,pk", got)
		}
	})
}
