// Package e2e holds end-to-end tests that run the product on the embedded
// stack through the real SDK, real event shapes and the functions' real
// handlers. With BCC_E2E_ENDPOINT the stack proxies S3, DynamoDB and SQS to
// another implementation (LocalStack); with BCC_E2E_MOTO=1 the test binary
// starts moto_server and proxies to it (make e2e-moto); with
// BCC_E2E_TEMPLATE every function runs as its own identity under its role's
// policies from the synthesized template, and every call it makes is judged
// against them (make e2e-iam; deployed_test.go).
package e2e
