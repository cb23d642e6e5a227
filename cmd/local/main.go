// Command local runs the embedded AWS stack with the whole product in the
// foreground: S3, DynamoDB and SQS on one endpoint (default 127.0.0.1:4566),
// the resources of the one definition provisioned, the stand-in publisher
// and CCS mounted, and every function subscribed. Point any AWS SDK or CLI
// at it with an endpoint override.
//
// It runs as deployed, -time-scale times faster (default
// localenv.DefaultTimeScale, 30): the scheduled reconciliation every
// 5 min / 30 = 10 s (GC sweeps, rebuilds, tombstone cleanup and release
// intents then happen with no operator action), each FIFO queue's
// visibility timeout its deployed one / 30 but never below its consumer's
// timeout (which stays as deployed), the stand-in watermark moving
// every 2 s, and the GC's token lifetime, retention window and sweep
// interval and the clock-skew allowance divided by the same factor (localenv.ScaledPolicy) unless
// -policy gives a policy. -time-scale 1 is the deployed timing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	env, err := start(ctx, os.Args[1:], os.Stdout, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "local stack:", err)
		os.Exit(1)
	}
	defer env.Close()
	<-ctx.Done()
}

// start parses make local's flags, starts the environment and prints how
// to reach it.
func start(ctx context.Context, args []string, out io.Writer, log *slog.Logger) (*localenv.Env, error) {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	addr := fs.String("addr", localaws.DefaultAddr, "listen address (loopback only unless -allow-remote)")
	remote := fs.Bool("allow-remote", false, "let -addr be 0.0.0.0:<port> (reachable from other machines): the stack has no authorization, whoever reaches it can read and change everything")
	prefix := fs.String("prefix", "bcc", "resource name prefix")
	scale := fs.Float64("time-scale", localenv.DefaultTimeScale, "run as deployed this many times faster (schedules, visibility timeouts, GC horizons); 1: deployed timing")
	pol := fs.String("policy", "", "policy JSON (as BCC_POLICY); default: the built-in policy with its GC horizons scaled by -time-scale")
	dashAddr := fs.String("dashboard", "127.0.0.1:4580", "serve the deployed dashboard, drawn live from this stack's metrics, on this loopback address (\"\": off)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *scale < 1 {
		return nil, errors.New("-time-scale must be >= 1")
	}
	p := localenv.ScaledPolicy(policy.Default(), *scale)
	if *pol != "" {
		var err error
		if p, err = policy.Parse([]byte(*pol)); err != nil {
			return nil, fmt.Errorf("-policy: %w", err)
		}
	}
	env, err := localenv.Start(ctx, localenv.Options{Addr: *addr, AllowRemote: *remote, Prefix: *prefix, Log: log, Policy: &p, TimeScale: *scale})
	if err != nil {
		return nil, err
	}
	def := env.Prov.Def
	fmt.Fprintf(out, "embedded AWS stack listening on %s (region %s, any credentials)\n", env.Stack.URL(), localaws.Region)
	fmt.Fprintf(out, "  as deployed, %g times faster: reconciliation every %s (deployed %s); visibility timeouts / %g (at least each consumer's timeout); GC token lifetime %s, retention window %s, sweep interval %s, clock skew %s\n",
		*scale, scaled(def.ReconcileSchedule.Seconds(), *scale), def.ReconcileSchedule, *scale, p.GC.TokenLifetime.D(), p.GC.RetentionWindow.D(), p.GC.SweepInterval.D(), p.ClockSkew.D())
	fmt.Fprintf(out, "  bucket      %s (head notifications -> %s)\n", def.Bucket.Name, def.Bucket.NotifyFunction)
	fmt.Fprintf(out, "  table       %s\n", def.Table.Name)
	for _, q := range def.Queues {
		fmt.Fprintf(out, "  queue       %s -> %s (DLQ %s)\n", env.Prov.QueueURLs[q.Class], q.Consumer, q.DLQName)
	}
	fmt.Fprintf(out, "  publisher   %s/cutover\n", env.Stack.ServiceURL("publisher"))
	fmt.Fprintf(out, "  ccs         %s/collections\n", env.Stack.ServiceURL("ccs"))
	if *dashAddr != "" {
		url, err := serveDashboard(ctx, env, *dashAddr, log)
		if err != nil {
			_ = env.Close()
			return nil, err
		}
		fmt.Fprintf(out, "  dashboard   %s (the deployed dashboard, drawn from this stack's metrics; refreshes every 10 s)\n", url)
	}
	fmt.Fprintf(out, "try (any credentials are accepted; the CLI needs some and a region):\n")
	fmt.Fprintf(out, "  AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=%s aws --endpoint-url %s s3 ls s3://%s --recursive\n",
		localaws.Region, env.Stack.URL(), def.Bucket.Name)
	fmt.Fprintf(out, "operator CLI (make bcc builds bin/bcc; the stack's %s output):\n  %s status\n", resources.OutBccCommand, env.BccCommand())
	return env, nil
}

func scaled(seconds, scale float64) string { return fmt.Sprintf("%gs", seconds/scale) }
