// Command observer is the observer Lambda: S3 notifications for committed
// heads and the reconciliation schedule.
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
	lambda.Start(app.ObserverHandler(cfg, clients, rt).Handle)
}
