// Package awsio holds the adapters from the use cases' small ports to the
// AWS SDK: S3 objects, the coordinator's DynamoDB table and SQS FIFO queues.
// Adapters translate SDK errors into package store's outcomes, so use cases
// branch on store.ErrNotFound, ErrPreconditionFailed, ErrConditionFailed and
// ErrAmbiguous and never on an SDK type.
//
// Vocabulary: an "ambiguous" failure is one after which the request may have
// been applied (a timeout, a connection reset, a 5xx on a write); only the
// owner's state can say what happened.
package awsio
