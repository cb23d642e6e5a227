package sqsd_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
)

// Request member names are exact and unique: encoding/json alone would
// take {"QueueName":"a","queuename":"b"} as "b". The server answers a
// SerializationException instead, and creates nothing.
func TestRequestMemberNamesAreExact(t *testing.T) {
	srv := httptest.NewServer(sqsd.New(sqsd.Options{}))
	defer srv.Close()
	post := func(target, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		return resp.StatusCode, doc
	}
	for _, body := range []string{
		`{"QueueName":"a","queuename":"b"}`,
		`{"QueueName":"a","QueueName":"b"}`,
		`{"QueueName":"a","Attributes":{"FifoQueue":"false","FifoQueue":"true"}}`,
		`{"queueName":"b"}`,
	} {
		code, doc := post("AmazonSQS.CreateQueue", body)
		if typ, _ := doc["__type"].(string); code != http.StatusBadRequest || !strings.HasSuffix(typ, "#SerializationException") {
			t.Errorf("%s: %d %v", body, code, doc)
		}
	}
	code, doc := post("AmazonSQS.CreateQueue", `{"QueueName":"a","RedrivePolicyIsUnknownHere":1}`)
	if code != http.StatusOK {
		t.Fatalf("unknown member (ignored as before): %d %v", code, doc)
	}
	code, doc = post("AmazonSQS.ListQueues", `{}`)
	if urls, _ := doc["QueueUrls"].([]any); code != http.StatusOK || len(urls) != 1 {
		t.Fatalf("queues after refused requests: %d %v", code, doc)
	}
	q := doc["QueueUrls"].([]any)[0].(string)
	code, doc = post("AmazonSQS.SetQueueAttributes", `{"QueueUrl":"`+q+`","Attributes":{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:a\",\"maxReceiveCount\":1,\"maxReceiveCount\":5}"}}`)
	if code != http.StatusBadRequest {
		t.Fatalf("redrive policy with a duplicate member: %d %v", code, doc)
	}
}
