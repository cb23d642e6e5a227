// Package resources is the one definition of every AWS resource the product
// uses: names, queue settings, event subscriptions, batch sizes, timeouts and
// the environment variables that carry them into functions. The embedded
// local stack creates exactly these resources and the CDK app synthesizes
// exactly these, so local runs and deployments cannot drift.
//
// Invariants: every task queue is FIFO with a FIFO DLQ; a queue's visibility
// timeout is at least six times its consumer's timeout (AWS's guidance for
// event source mappings); S3 notifies the observer only for keys ending in the
// head suffix (S3 cannot notify a FIFO queue, so the observer writes to FIFO).
package resources
