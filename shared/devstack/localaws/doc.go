// Package localaws is the embedded local AWS stack: one loopback HTTP
// endpoint (default 127.0.0.1:4566, the LocalStack edge convention) serving
// S3 (gofakes3, in process), DynamoDB (minidyn, in process) and SQS (package
// sqsd, this product's own JSON-protocol implementation), routed per request
// by X-Amz-Target.
//
// It also does what AWS does between services and nothing on this machine
// otherwise would: it delivers S3 object-created notifications, per the
// bucket's notification configuration (set with the real
// PutBucketNotificationConfiguration call), as exact S3 event JSON with a
// per-key increasing sequencer, to the subscribed function as an
// asynchronous invocation (with Lambda's two retries); and it runs SQS event
// source mappings that poll queues with the real SDK, invoke the consumer
// with exact SQS event batches, and delete only the messages that the
// handler did not report in batchItemFailures. Functions are invoked through
// aws-lambda-go's real handler dispatch (lambda.NewHandler(h).Invoke).
//
// Where gofakes3 differs from S3 in a way the product could notice, the
// stack corrects it: If-Match on a missing key answers 404 NoSuchKey as S3
// does (gofakes3 answers 412), and DeleteObject with If-Match is a real
// conditional delete (gofakes3 ignores the header and deletes anyway).
//
// S3 stamps LastModified from Options.Now (the environment's clock) when
// set: in AWS, S3's clock is within the deployment's skew of the
// functions', and GC ages never-committed outputs by LastModified, so a
// test clock moved on must move S3's stamps too (with wall-clock stamps a
// test that waited out a two-day horizon saw a fresh output as two days
// old and GC reclaimed it before its cutover). An Upstream stamps with its
// own clock.
//
// Tests can inject a fault per operation (InjectFault): apply a request and
// then answer HTTP 500 or drop the connection, or refuse it with a 500
// before applying it. The product's clients are the real SDK clients, so
// its real retryer sends the identical request again and a conditional
// write meets its own first attempt: the ambiguous outcome rule 13 is
// about, reproduced on the wire rather than simulated in a fake client.
//
// The stack counts requests per service and operation so tests and
// benchmarks can assert how many AWS calls a use case makes.
package localaws
