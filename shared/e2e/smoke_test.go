package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/localenv"
)

func TestSmokeAppendsAreObserved(t *testing.T) {
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := env.Workload.Append(ctx, "c1", env.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Settle(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Log(env.Stack.Counter().Snapshot())
	t.Log(env.Metrics.String())
}
