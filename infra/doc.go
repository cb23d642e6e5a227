// Command infra is the AWS CDK app (Go) that deploys the Background Compute
// Coordinator: the data bucket (created, or an existing one imported by
// name), the head-object notification to the observer, one FIFO task queue
// per class with a FIFO dead-letter queue, the coordinator's DynamoDB table,
// the four Lambda functions, the reconciliation schedule, a CloudWatch
// dashboard and alarms.
//
// It is a nested Go module so that the root module's build and tests stay
// free of CDK and Node. It imports the root module's shared/resources and
// shared/contract through a replace directive.
//
// Invariants this package keeps (each is pinned by a test in this package):
//
//   - Every name, timeout, memory size, batch size, concurrency, receive count,
//     retention and schedule comes from resources.Default(prefix); every object
//     key pattern in an IAM policy is derived from shared/contract's key layout.
//     Nothing here re-declares them.
//   - S3 notifies only the observer, only for object-created events whose key
//     starts with the collections prefix and ends with the head suffix (S3
//     cannot notify a FIFO queue; the observer is what writes to FIFO).
//   - Every task queue is FIFO with a FIFO DLQ, redrive after MaxReceiveCount,
//     a visibility timeout at least six times its consumer's timeout, and an
//     event source mapping that reports batch item failures.
//   - Functions run bootstrap binaries on provided.al2023, arm64. Synthesis
//     fails with an error (never a silent empty zip) when a function's asset
//     directory or bootstrap is missing, or the bootstrap is not a linux/arm64
//     ELF executable.
//   - Least privilege: each function has its own role with only the actions it
//     uses, on only the resources it uses. No role can write or delete a
//     head object (collections/<c>/manifest_committed_head.json): a dropped
//     incarnation's head is retired by the Manifest Publisher on GC's
//     request (GC may invoke the publisher's POST /retire only, the handoff
//     POST /cutover only). Only GC may delete: data and manifest keys, and
//     the control artifacts CCS names for a dropped incarnation
//     (collections/<c>/control/). No IAM action is a wildcard.
//   - Bucket, queues and table are encrypted; bucket and queues refuse non-TLS
//     requests; the bucket blocks public access and logs server access.
//   - cdk-nag's AwsSolutions pack runs on every synthesis (CLI and tests) and
//     has zero unsuppressed findings; every suppression carries its reason.
//   - Coordinator state is disposable: the table may be destroyed with the
//     stack. The data bucket is never destroyed by the stack, so no retained
//     resource carries a fixed name (a redeploy after destroy must work).
//   - Head events reach the observer by the bucket's notification, or in
//     EventBridge mode by a rule whose key filter is exactly the head key
//     shape of shared/contract.
//   - Owner calls are SigV4-signed by default; a function may invoke exactly
//     the contract routes of the owners whose URL its environment carries.
//   - Every coordinator metric, alarm and search selects its deployment.
//   - cfn-lint finds no error; its accepted warnings are listed with reasons.
package main
