// Package localenv brings the whole product up on the embedded stack: it
// starts the stack, provisions the resources of the one definition, mounts
// the stand-in owners, registers every function's real handler (wired by
// package app exactly as on Lambda) and starts the S3 notification and SQS
// event source delivery. make demo, make local and the end-to-end tests all
// use it.
package localenv
