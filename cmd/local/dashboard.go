package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/dashview"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/monitoring"
)

// serveDashboard serves the deployed dashboard, drawn live from what the
// local stack's functions emit, on addr (a loopback address: the page
// shows the run's metrics to anyone who can reach it). It returns the
// page's URL.
func serveDashboard(ctx context.Context, env *localenv.Env, addr string, log *slog.Logger) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("dashboard address %q is not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("dashboard: %w", err)
	}
	def := env.Prov.Def
	store := dashview.NewStore()
	names := dashview.NamesOf(def)
	now := env.Now
	if now == nil {
		now = time.Now
	}
	rec := dashview.NewRecorder(store, names, now)
	env.Stack.OnInvoke(rec.Invocation)
	go rec.SampleQueues(ctx, env.Stack, 5*time.Second)
	live := &dashview.Live{Model: monitoring.Build(def, def.FunctionName), Store: store, Names: names, Now: now,
		Refresh: 10 * time.Second, EMF: env.Metrics.Since, Log: log}
	// Loopback Host and no foreign Origin only (DNS rebinding, other pages).
	srv := &http.Server{Handler: localaws.LocalOnly{Next: live}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "http://" + ln.Addr().String() + "/", nil
}
