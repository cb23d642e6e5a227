// Package owners holds the coordinator's HTTP clients for the owners it
// hands work to: the Manifest Publisher (cutover candidates) and the Catalog
// Control Service (scheduling facts, collection list, release intents). The
// endpoints are configuration; locally they are the stand-ins mounted on the
// embedded stack.
//
// Requests are signed with AWS Signature Version 4 by default (NewSigned):
// an owner's API behind API Gateway with AWS_IAM authorization, or a Lambda
// function URL with AuthType AWS_IAM, admits only callers whose identity
// policy allows execute-api:Invoke (lambda:InvokeFunctionUrl) on it; the
// stand-ins verify the same signatures locally.
//
// Every write whose response is lost — a timeout, a reset connection, a 5xx —
// is reported as store.ErrAmbiguous: the request may have been applied, and
// the caller must re-read the owner's state before deciding anything.
package owners
