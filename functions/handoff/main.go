// Command handoff is the handoff Lambda: batches from the handoff FIFO queue with
// partial batch failures.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/searchfabric/bcc/shared/lambda/app"
)

func main() {
	cfg, clients, rt, err := app.Boot(context.Background())
	if err != nil {
		rt.Log.Error("function not started", "err", err)
		os.Exit(1)
	}
	lambda.Start(app.HandoffHandler(cfg, clients, rt).Handle)
}
