// Package handler holds the Lambda handlers: each decodes its event, calls
// one use case, encodes the answer and flushes its metrics as one EMF line.
// Handlers never exit the process; a failure is an error return (S3 async
// invocations are retried by Lambda) or a batchItemFailures entry (SQS
// messages return to the queue and, after maxReceiveCount, to the DLQ).
//
// A message that can never succeed (malformed, unknown fields) is still
// reported as failed rather than dropped, so it reaches the DLQ with its
// body intact: bad input loses nothing and never leads to a delete or a
// publish.
package handler
