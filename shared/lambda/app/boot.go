package app

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/searchfabric/bcc/shared/lambda/handler"
)

// Boot is what every function's main does before lambda.Start: parse the
// configuration from the environment once, build the SDK clients once, and
// set up logging (JSON to stderr, scoped) and EMF metrics (stdout). The returned
// Runtime's logger is usable even when err is set.
func Boot(ctx context.Context) (Config, Clients, Runtime, error) {
	// JSON lines (Lambda's JSON log format passes them as they are), each
	// with the invocation's request id and the collection and task being
	// handled (handler.ScopedHandler: one invocation at a time per
	// execution environment).
	rt := Runtime{Now: time.Now, Out: os.Stdout, Log: slog.New(handler.NewScopedHandler(slog.NewJSONHandler(os.Stderr, nil)))}
	cfg, err := FromEnv(os.Getenv)
	if err != nil {
		return cfg, Clients{}, rt, err
	}
	clients, err := NewClients(cfg, os.Getenv)
	return cfg, clients, rt, err
}
