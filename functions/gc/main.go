// Command gc is the GC Lambda: it sweeps the collection each task of the gc
// FIFO queue names, deleting only what the canonical delete rule allows.
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
	lambda.Start(app.GCHandler(cfg, clients, rt).Handle)
}
