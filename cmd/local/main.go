// Command local runs the embedded AWS stack with the whole product in the
// foreground: S3, DynamoDB and SQS on one endpoint (default 127.0.0.1:4566),
// the resources of the one definition provisioned, the stand-in publisher
// and CCS mounted, and every function subscribed. Point any AWS SDK or CLI
// at it with an endpoint override.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
)

func main() {
	addr := flag.String("addr", localaws.DefaultAddr, "listen address")
	prefix := flag.String("prefix", "bcc", "resource name prefix")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := localenv.Start(ctx, localenv.Options{Addr: *addr, Prefix: *prefix, Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local stack:", err)
		os.Exit(1)
	}
	defer env.Close()
	def := resources.Default(*prefix)
	fmt.Printf("embedded AWS stack listening on %s (region %s, any credentials)\n", env.Stack.URL(), localaws.Region)
	fmt.Printf("  bucket      %s (head notifications -> %s)\n", def.Bucket.Name, def.Bucket.NotifyFunction)
	fmt.Printf("  table       %s\n", def.Table.Name)
	for _, q := range def.Queues {
		fmt.Printf("  queue       %s -> %s (DLQ %s)\n", env.Prov.QueueURLs[q.Class], q.Consumer, q.DLQName)
	}
	fmt.Printf("  publisher   %s/cutover\n", env.Stack.ServiceURL("publisher"))
	fmt.Printf("  ccs         %s/collections\n", env.Stack.ServiceURL("ccs"))
	fmt.Printf("try: aws --endpoint-url %s s3 ls s3://%s --recursive\n", env.Stack.URL(), def.Bucket.Name)
	<-ctx.Done()
}
