package sqsd_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
	"github.com/searchfabric/bcc/shared/testkit/jsonref"
)

// fuzzOps are the operations FuzzSQSDRequest selects by op % len(fuzzOps).
var fuzzOps = []string{"CreateQueue", "GetQueueUrl", "ListQueues", "DeleteQueue", "GetQueueAttributes", "SetQueueAttributes",
	"PurgeQueue", "SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch",
	"ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "TagQueue", "Frobnicate"}

const (
	fifoURL = "http://localhost:4566/000000000000/work.fifo"
	stdURL  = "http://localhost:4566/000000000000/plain"
)

// post sends one request to s in process, with an already cancelled
// context so a long poll returns at once.
func post(s *sqsd.Server, op string, body []byte) *httptest.ResponseRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(string(body)))
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// fuzzServer is a server with a FIFO queue (redriving to a DLQ) and a
// standard queue, each holding messages, one of them in flight.
func fuzzServer(t *testing.T) *sqsd.Server {
	clock := time.Unix(1_800_000_000, 0)
	s := sqsd.New(sqsd.Options{Now: func() time.Time { return clock }})
	for _, step := range []struct{ op, body string }{
		{"CreateQueue", `{"QueueName":"dlq.fifo","Attributes":{"FifoQueue":"true"}}`},
		{"CreateQueue", `{"QueueName":"work.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true","RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:dlq.fifo\",\"maxReceiveCount\":2}"}}`},
		{"CreateQueue", `{"QueueName":"plain"}`},
		{"SendMessage", `{"QueueUrl":"` + fifoURL + `","MessageBody":"a","MessageGroupId":"g1"}`},
		{"SendMessage", `{"QueueUrl":"` + fifoURL + `","MessageBody":"b","MessageGroupId":"g2"}`},
		{"SendMessage", `{"QueueUrl":"` + stdURL + `","MessageBody":"c"}`},
		{"ReceiveMessage", `{"QueueUrl":"` + fifoURL + `","MaxNumberOfMessages":1}`},
	} {
		if rec := post(s, step.op, []byte(step.body)); rec.Code != http.StatusOK {
			t.Fatalf("setup %s: %d %s", step.op, rec.Code, rec.Body)
		}
	}
	return s
}

// FuzzSQSDRequest sends any body to any operation of the embedded SQS
// server. Properties: it never panics and never answers 5xx (bad input is
// the sender's fault); every answer is one JSON document, an error one
// carrying __type and the query error header; an accepted request had
// unique member names; and the server still serves its queues afterwards.
func FuzzSQSDRequest(f *testing.F) {
	seeds := map[string]string{
		"CreateQueue":                  `{"QueueName":"x.fifo","Attributes":{"FifoQueue":"true","VisibilityTimeout":"5"},"tags":{"a":"b"}}`,
		"GetQueueUrl":                  `{"QueueName":"plain"}`,
		"ListQueues":                   `{"QueueNamePrefix":"w","MaxResults":1}`,
		"DeleteQueue":                  `{"QueueUrl":"` + stdURL + `"}`,
		"GetQueueAttributes":           `{"QueueUrl":"` + fifoURL + `","AttributeNames":["All"]}`,
		"SetQueueAttributes":           `{"QueueUrl":"` + stdURL + `","Attributes":{"VisibilityTimeout":"10"}}`,
		"PurgeQueue":                   `{"QueueUrl":"` + stdURL + `"}`,
		"SendMessage":                  `{"QueueUrl":"` + fifoURL + `","MessageBody":"m","MessageGroupId":"g","MessageDeduplicationId":"d","MessageAttributes":{"k":{"DataType":"String","StringValue":"v"}}}`,
		"SendMessageBatch":             `{"QueueUrl":"` + fifoURL + `","Entries":[{"Id":"1","MessageBody":"x","MessageGroupId":"g"},{"Id":"2","MessageBody":"y","MessageGroupId":"g"}]}`,
		"ReceiveMessage":               `{"QueueUrl":"` + fifoURL + `","MaxNumberOfMessages":10,"VisibilityTimeout":30,"WaitTimeSeconds":1,"AttributeNames":["All"]}`,
		"DeleteMessage":                `{"QueueUrl":"` + fifoURL + `","ReceiptHandle":"nope"}`,
		"DeleteMessageBatch":           `{"QueueUrl":"` + fifoURL + `","Entries":[{"Id":"1","ReceiptHandle":"nope"}]}`,
		"ChangeMessageVisibility":      `{"QueueUrl":"` + fifoURL + `","ReceiptHandle":"nope","VisibilityTimeout":0}`,
		"ChangeMessageVisibilityBatch": `{"QueueUrl":"` + fifoURL + `","Entries":[{"Id":"1","ReceiptHandle":"nope","VisibilityTimeout":0}]}`,
	}
	for i, op := range fuzzOps {
		f.Add(uint16(i), []byte(seeds[op]))
	}
	f.Add(uint16(0), []byte(`{"QueueName":"a","queuename":"b"}`))
	f.Fuzz(func(t *testing.T, op uint16, body []byte) {
		s := fuzzServer(t)
		name := fuzzOps[int(op)%len(fuzzOps)]
		rec := post(s, name, body)
		if rec.Code >= 500 {
			t.Fatalf("%s answered %d to %q: %s", name, rec.Code, body, rec.Body)
		}
		var doc map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s answered %d with a body that is not one JSON object: %v: %q", name, rec.Code, err, rec.Body)
		}
		if rec.Code != http.StatusOK {
			if typ, _ := doc["__type"].(string); typ == "" || rec.Header().Get("x-amzn-query-error") == "" {
				t.Fatalf("%s error without __type or query error header: %d %v", name, rec.Code, doc)
			}
		} else if len(body) > 0 {
			written, err := jsonref.Parse(body)
			if err != nil {
				t.Fatalf("%s accepted %q, which a duplicate-rejecting reader refuses: %v", name, body, err)
			}
			// What was acted on is what was written (exact member names).
			in, _ := written.(map[string]any)
			switch name {
			case "CreateQueue":
				if q, _ := in["QueueName"].(string); !strings.HasSuffix(doc["QueueUrl"].(string), "/"+q) {
					t.Fatalf("CreateQueue of %q created %v", q, doc["QueueUrl"])
				}
			case "SendMessage":
				m, _ := in["MessageBody"].(string)
				if sum := md5.Sum([]byte(m)); doc["MD5OfMessageBody"] != hex.EncodeToString(sum[:]) {
					t.Fatalf("SendMessage of %q stored a body with MD5 %v", m, doc["MD5OfMessageBody"])
				}
			}
		}
		for _, q := range []string{fifoURL, stdURL} {
			if name == "DeleteQueue" {
				break
			}
			if rec := post(s, "GetQueueAttributes", []byte(`{"QueueUrl":"`+q+`","AttributeNames":["All"]}`)); rec.Code != http.StatusOK {
				t.Fatalf("after %s %q the server no longer serves %s: %d %s", name, body, q, rec.Code, rec.Body)
			}
		}
	})
}
