package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Issue 16 item 3: throttling pressure is counted per attempt, retried or
// not: S3's 503 SlowDown and DynamoDB's throttling exceptions, each
// under its own name.
func TestClientsCountThrottledAttempts(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("X-Amz-Target") != "" { // DynamoDB (JSON protocol)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}`))
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 2,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}
	cl := ClientsFrom(cfg, true)
	if _, err := cl.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("collections/c1/x")}); err == nil {
		t.Fatal("want SlowDown")
	}
	if _, err := cl.Dynamo.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "x"}}}); err == nil {
		t.Fatal("want ThrottlingException")
	}
	got := cl.Throttles.Counts()
	if got.S3SlowDown != 2 || got.Dynamo != 2 || got.SQS != 0 {
		t.Fatalf("throttled attempts %v (server saw %d calls), want 2 S3 and 2 DynamoDB (two attempts each)", got, calls.Load())
	}
}
