package app

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// Boot is what every function's main does before lambda.Start: parse the
// configuration from the environment once, build the SDK clients once, and
// set up logging (JSON to stderr) and EMF metrics (stdout). The returned
// Runtime's logger is usable even when err is set.
func Boot(ctx context.Context) (Config, Clients, Runtime, error) {
	rt := Runtime{Now: time.Now, Out: os.Stdout, Log: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	cfg, err := FromEnv(os.Getenv)
	if err != nil {
		return cfg, Clients{}, rt, err
	}
	clients, err := NewClients(ctx, cfg)
	return cfg, clients, rt, err
}
