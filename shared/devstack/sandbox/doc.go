// Package sandbox runs the owners' stand-ins as Lambda functions, for a
// sandbox stack (CDK context sandbox=true, resources.SandboxDefinition):
// the stand-in Manifest Publisher and Catalog Control Service behind an API
// Gateway HTTP API (payload format 2.0, every route IAM-authorized: API
// Gateway verifies the coordinator functions' SigV4 signatures, as a real
// owner's API does), and the stand-in query-plane watermark on a schedule.
//
// It is devstack, like the stand-ins it wires: nothing here ships in the
// coordinator's functions (shared/layout_test.go). Its entry points are
// sandbox/<name>/main.go, outside functions/, built to
// <assetDir>/sandbox/<name>/bootstrap and deployed only by a sandbox stack.
//
// Vocabulary: mount is the path prefix under which the API routes to one
// stand-in (resources.Sandbox.PublisherPath, CCSPath); the stand-in sees the
// contract's own paths below it.
package sandbox
