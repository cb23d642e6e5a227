// Command gc is the GC Lambda: it sweeps the collection each task of the gc
// FIFO queue names, deleting only what the canonical delete rule allows.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/searchfabric/bcc/shared/app"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := app.FromEnv(os.Getenv)
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(1)
	}
	clients, err := app.NewClients(context.Background(), cfg)
	if err != nil {
		log.Error("aws clients", "err", err)
		os.Exit(1)
	}
	h := app.GCHandler(cfg, clients, app.Runtime{Now: time.Now, Out: os.Stdout, Log: log})
	lambda.Start(h.Handle)
}
