package awslimit

import "time"

// Amazon S3.
const (
	// S3DeleteObjectsMaxKeys is the most keys one DeleteObjects call takes.
	S3DeleteObjectsMaxKeys = 1000
	// S3ListMaxKeys is the most keys one ListObjectsV2 page returns.
	S3ListMaxKeys = 1000
	// S3MultipartMinPartBytes is the smallest part of a multipart upload
	// (every part but the last).
	S3MultipartMinPartBytes = 5 << 20
	// S3MultipartMaxParts is the most parts of one multipart upload.
	S3MultipartMaxParts = 10_000
	// S3MaxObjectBytes is the largest object (5 TiB).
	S3MaxObjectBytes = 5 << 40
	// S3MaxKeyBytes is the longest object key (UTF-8 bytes).
	S3MaxKeyBytes = 1024
	// S3WritesPerSecPerPrefix is the request rate S3 supports per
	// partitioned prefix for PUT, COPY, POST and DELETE (each key of a
	// DeleteObjects call counts); more returns 503 SlowDown.
	S3WritesPerSecPerPrefix = 3500
	// S3ReadsPerSecPerPrefix is the same for GET and HEAD.
	S3ReadsPerSecPerPrefix = 5500
)

// Amazon SQS.
const (
	// SQSBatchMaxEntries is the most entries of one SendMessageBatch,
	// DeleteMessageBatch or ChangeMessageVisibilityBatch call, and the most
	// messages one ReceiveMessage returns.
	SQSBatchMaxEntries = 10
	// SQSMaxMessageBytes is the largest message body, and the largest
	// total payload of one batch (1 MiB).
	SQSMaxMessageBytes = 1 << 20
	// SQSMaxIDLength is the longest MessageGroupId and
	// MessageDeduplicationId (alphanumeric and punctuation characters).
	SQSMaxIDLength = 128
	// SQSDedupInterval is FIFO queues' deduplication interval.
	SQSDedupInterval = 5 * time.Minute
	// SQSMaxVisibilityTimeout is the longest visibility timeout.
	SQSMaxVisibilityTimeout = 12 * time.Hour
	// SQSMaxReceiveCountLimit bounds a redrive policy's maxReceiveCount.
	SQSMaxReceiveCountLimit = 1000
)

// Amazon DynamoDB.
const (
	// DynamoMaxItemBytes is the largest item (400 KB).
	DynamoMaxItemBytes = 400 * 1024
	// DynamoBatchWriteMaxItems is the most requests of one BatchWriteItem.
	DynamoBatchWriteMaxItems = 25
	// DynamoTransactMaxItems is the most actions of one TransactWriteItems.
	DynamoTransactMaxItems = 100
)

// AWS Lambda.
const (
	// LambdaMaxTimeout is the longest function timeout.
	LambdaMaxTimeout = 15 * time.Minute
	// LambdaMinTimeout is the shortest function timeout.
	LambdaMinTimeout = time.Second
	// LambdaSQSVisibilityFactor: AWS recommends a queue's visibility
	// timeout of at least six times its consumer function's timeout, so
	// that retries of a throttled batch do not redeliver it while it runs.
	LambdaSQSVisibilityFactor = 6
)
