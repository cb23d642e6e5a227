// Package memaws is in-memory Amazon S3, DynamoDB and SQS behind the very
// SDK method sets the adapters use (awsio.S3API and MultipartAPI,
// awsio.DynamoAPI, awsio.SQSAPI plus what a queue consumer needs), with AWS
// semantics where the coordinator relies on them, so that the simulation
// drives the shipped adapters instead of copies of them:
//
//   - S3: ETags, If-None-Match: * and If-Match with exactly one winner, 412
//     PreconditionFailed versus 404 NoSuchKey (If-Match on a missing key),
//     HeadObject's 404 NotFound, ranged GETs, DeleteObjects with per-key
//     results (a missing key is reported deleted; at most
//     awslimit.S3DeleteObjectsMaxKeys keys), ListObjectsV2 paging,
//     multipart uploads (parts of at least awslimit.S3MultipartMinPartBytes
//     but the last).
//   - DynamoDB: minidyn's in-process client (conditions, update expressions,
//     ReturnValuesOnConditionCheckFailure) behind a layer that fixes what
//     it answers differently from DynamoDB (PutItem's return values and its
//     ALL_OLD on a failed condition, an absent item on a failed condition).
//   - SQS: FIFO queues (group order, a group blocked while one of its
//     messages is in flight, the five-minute deduplication interval,
//     visibility timeouts and ChangeMessageVisibility, redrive to a DLQ
//     after maxReceiveCount, batches of awslimit.SQSBatchMaxEntries).
//
// Every call can be given a fault (Hooks.Fault) that answers with the error
// the SDK would return, so awsio's translate maps it exactly as a real one:
// throttling, an HTTP 500, a timeout, and a write that was APPLIED but whose
// answer was lost (a timeout or a 500 after the write took effect, or the
// SDK's retry of the identical request answering instead).
//
// Invariants: nothing depends on wall time or map order (a clock is
// injected, identifiers are counters, listings are sorted), so a simulation
// replays from its seed; hooks are called without any lock held, so a hook
// may call back into the stores or panic (a simulated crash); the
// inspection methods (Peek, Keys, Items, Messages, ...) bypass hooks and
// faults. It never ships (testkit).
package memaws
