// Package sqsd is an in-process Amazon SQS endpoint for the product's
// embedded local AWS stack. It speaks the AWS JSON 1.0 protocol used by
// current aws-sdk-go-v2 service/sqs clients: POST /, X-Amz-Target
// "AmazonSQS.<Operation>", Content-Type application/x-amz-json-1.0.
//
// Errors are rendered as AWS renders them for this @awsQueryCompatible
// service: HTTP 400, body {"__type":"com.amazonaws.sqs#<Shape>","message":...}
// and header x-amzn-query-error: "<legacy query code>;Sender". The SDK
// therefore yields its typed errors (*types.QueueDoesNotExist,
// *types.TooManyEntriesInBatchRequest, ...) whose ErrorCode() is the legacy
// code (for example "AWS.SimpleQueueService.NonExistentQueue"), exactly as
// against AWS. Errors SQS does not model (InvalidParameterValue,
// MissingParameter, InvalidAction) surface as smithy.APIError with that code.
//
// Faithful to the documented SQS behaviour:
//   - Queue naming, CreateQueue idempotency (QueueNameExists when a given
//     attribute differs), QueueDeletedRecently for 60 s after DeleteQueue,
//     PurgeQueue at most once per 60 s, queue attribute ranges and defaults
//     (including the 1 MiB MaximumMessageSize now documented by AWS).
//   - FIFO: MessageGroupId required, MessageDeduplicationId required unless
//     ContentBasedDeduplication (SHA-256 of the body), 5-minute deduplication
//     interval that survives deletion (duplicates are acknowledged with the
//     original MessageId and not enqueued), DeduplicationScope=messageGroup,
//     20-digit increasing SequenceNumber, strict per-group order, a group is
//     blocked while any of its messages is in flight, per-message
//     DelaySeconds rejected.
//   - Visibility timeouts, ChangeMessageVisibility(+Batch), receive counts,
//     ApproximateFirstReceiveTimestamp, retention period, delay queues,
//     long polling (WaitTimeSeconds / ReceiveMessageWaitTimeSeconds) that
//     returns as soon as a message is available or the request is cancelled.
//   - RedrivePolicy: a message that would be received for the
//     (maxReceiveCount+1)-th time is moved to the dead-letter queue with its
//     MessageId, body, attributes and group id.
//   - Standard queues reject MessageDeduplicationId and accept MessageGroupId
//     (fair queues); FIFO queues reject per-message DelaySeconds.
//   - Message attributes and MD5OfMessageBody / MD5OfMessageAttributes /
//     MD5OfMessageSystemAttributes computed with the SQS algorithm.
//   - Batch rules: 1-10 entries, distinct well-formed ids, 1 MiB total
//     payload, per-entry Successful/Failed results.
//
// Deliberately not implemented: encryption (KmsMasterKeyId,
// SqsManagedSseEnabled and Policy are stored and returned only), permissions
// and IAM, tags (CreateQueue accepts and ignores them), message move tasks, ListDeadLetterSourceQueues (these
// return UnsupportedOperation), ReceiveRequestAttemptId retries, FIFO
// throughput limits, the eventual consistency of standard queues (a receive
// sees every visible message; order is send order), the legacy awsQuery
// (form-encoded) protocol, and the exact receive count and retention clock
// of redriven messages (a message moved to a dead-letter queue starts with
// a receive count of zero and keeps its original SentTimestamp).
//
// Time comes from Options.Now, so tests can drive deduplication,
// visibility, delay and retention without sleeping. The long-poll wait
// itself uses real time.
package sqsd
