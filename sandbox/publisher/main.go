// Command publisher is the stand-in Manifest Publisher behind the sandbox stack's HTTP API
// (resources.SandboxDefinition). It is a stand-in, not the product: it lives
// outside functions/ and links shared/devstack, which the coordinator's
// functions never do.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/searchfabric/bcc/shared/devstack/sandbox"
)

func main() {
	ctx := context.Background()
	log := sandbox.Logger()
	h, err := sandbox.Publisher(ctx, os.Getenv, log)
	if err != nil {
		log.Error("stand-in not started", "err", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
