// Command workload drives a stack so there is something to watch: it
// creates collections (CCS facts and version 1), commits appends of puts
// and deletes at a given rate through the stand-in publisher's commit path
// (the head CAS, as the platform's writers do), and drops collections
// (CCS tombstone) and creates replacements, printing one line per action.
//
//	workload [-endpoint URL] [-prefix P] [-bucket B] [-ccs-table T] [-collections N] [-rate R] [-commits N | -duration D]
//	         [-records N] [-delete-fraction F] [-drop-every N] [-name NAME] [-seed S]
//
// It works against `make local` (the default endpoint) and any endpoint
// that holds the deployment's bucket and the stand-in CCS table (the demo's
// stack, LocalStack, a sandbox stack: -endpoint ” with the stack's
// DataBucketName and StandinCcsTableName outputs, its names being
// generated; the output WorkloadCommand is that command line). A
// deployed platform's own publisher is not driven by it: the contract's
// publisher API is the cutover only.
//
// A dropped name is not re-created (a collection's namespace is released
// by the tombstone workflow; until then its head stays); the replacement
// is a new generation name (w001 -> w001g2).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/standin/ccs"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, time.Now); err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

type options struct {
	endpoint, prefix, name  string
	bucket, ccsTable        string
	collections, commits    int
	records, dropEvery      int
	rate, deleteFraction    float64
	duration                time.Duration
	seed                    uint64
	lifecycleRetention      time.Duration
	transitionAfter         time.Duration
	transitionTier, payload string
}

func run(ctx context.Context, args []string, out io.Writer, now func() time.Time) error {
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.endpoint, "endpoint", "http://"+localaws.DefaultAddr, "AWS endpoint (make local's by default; '' for AWS itself, with the default credentials)")
	fs.StringVar(&o.prefix, "prefix", "bcc", "the deployment's resource prefix")
	fs.StringVar(&o.bucket, "bucket", "", "data bucket (default <prefix>-data; a sandbox stack: its DataBucketName output)")
	fs.StringVar(&o.ccsTable, "ccs-table", "", "the stand-in CCS's table (default <prefix>-standin-ccs; a sandbox stack: its StandinCcsTableName output)")
	fs.StringVar(&o.name, "name", "w", "collection name prefix (collections are <name>001, <name>002, ...)")
	fs.IntVar(&o.collections, "collections", 3, "collections to create and write to")
	fs.IntVar(&o.commits, "commits", 0, "stop after this many commits (0: run until -duration or interrupted)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until -commits or interrupted)")
	fs.Float64Var(&o.rate, "rate", 2, "commits per second over all collections (0: as fast as possible)")
	fs.IntVar(&o.records, "records", 50, "records per commit")
	fs.Float64Var(&o.deleteFraction, "delete-fraction", 0.2, "share of the records that are deletes")
	fs.IntVar(&o.dropEvery, "drop-every", 0, "every N commits drop (tombstone) the oldest collection and create a replacement (0: never)")
	fs.DurationVar(&o.lifecycleRetention, "retention", 0, "CCS lifecycle retention of new collections (0: none)")
	fs.DurationVar(&o.transitionAfter, "transition-after", 0, "CCS lifecycle tier transition after (0: none)")
	fs.StringVar(&o.transitionTier, "transition-tier", contract.TierWarm, "tier of the lifecycle transition")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.collections < 1 || o.records < 1 || o.deleteFraction < 0 || o.deleteFraction > 1 || o.rate < 0 {
		return errors.New("-collections and -records must be >= 1, -delete-fraction in 0..1, -rate >= 0")
	}
	def := resources.Default(o.prefix)
	cl, err := clients(ctx, o.endpoint)
	if err != nil {
		return err
	}
	if o.bucket == "" {
		o.bucket = def.Bucket.Name
	}
	if o.ccsTable == "" {
		o.ccsTable = def.CCSTable.Name
	}
	bucket := awsio.NewBucket(cl.S3, o.bucket)
	ccsSvc := ccs.New(cl.Dynamo, o.ccsTable, now)
	ccsSvc.SetBucket(bucket)
	pub := publisher.New(bucket, now, publisher.Options{}, nil)
	gen := workload.New(pub, ccsSvc, bucket, now, o.seed, workload.Options{
		RecordsPerCommit: o.records, KeySpace: 20 * o.records, DeleteFraction: o.deleteFraction, PayloadBytes: 64})
	lc := contract.Lifecycle{RetentionMs: o.lifecycleRetention.Milliseconds()}
	if o.transitionAfter > 0 {
		lc.TransitionAfterMs, lc.TransitionToTier = o.transitionAfter.Milliseconds(), o.transitionTier
	}
	start := now()
	stamp := func() string { return fmt.Sprintf("%7.1fs", now().Sub(start).Seconds()) }
	create := func(name string) error {
		err := gen.Create(ctx, name, lc)
		if errors.Is(err, publisher.ErrExists) {
			// A collection of an earlier run: keep writing to it.
			if _, ferr := ccsSvc.Facts(ctx, name); errors.Is(ferr, ccs.ErrUnknownCollection) {
				if _, ferr = ccsSvc.PutFacts(ctx, contract.CollectionFacts{Collection: name, Lifecycle: lc}); ferr != nil {
					return ferr
				}
			}
			gen.Reset(name, nil)
			fmt.Fprintf(out, "%s %-10s exists: writing to it\n", stamp(), name)
			return nil
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		fmt.Fprintf(out, "%s %-10s created (v1)\n", stamp(), name)
		return nil
	}
	live := make([]string, 0, o.collections)
	gens := map[string]int{}
	for i := 1; i <= o.collections; i++ {
		name := fmt.Sprintf("%s%03d", o.name, i)
		gen := 1
		err := create(name)
		for base := name; errors.Is(err, ccs.ErrReserved) && gen < 100; {
			// Dropped by an earlier run and not released yet: its name is
			// reserved; write to the next generation's name.
			gen++
			name = fmt.Sprintf("%sg%d", base, gen)
			err = create(name)
		}
		if err != nil {
			return err
		}
		live, gens[name] = append(live, name), gen
	}
	var tick <-chan time.Time
	if o.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
		defer t.Stop()
		tick = t.C
	}
	var deadline <-chan time.Time
	if o.duration > 0 {
		deadline = time.After(o.duration)
	}
	commits, records, deletes, drops := 0, 0, 0, 0
	defer func() {
		fmt.Fprintf(out, "%s done: %d commits (%d records, %d deletes), %d drops, collections %v\n", stamp(), commits, records, deletes, drops, live)
	}()
	for n := 0; o.commits == 0 || commits < o.commits; n++ {
		if tick != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-deadline:
				return nil
			case <-tick:
			}
		} else if ctx.Err() != nil {
			return nil
		}
		c := live[n%len(live)]
		ws := gen.Random()
		dels := 0
		for _, w := range ws {
			if w.Delete {
				dels++
			}
		}
		head, err := gen.Append(ctx, c, ws)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		commits, records, deletes = commits+1, records+len(ws), deletes+dels
		fmt.Fprintf(out, "%s %-10s v%-4d append %d records (%d deletes)\n", stamp(), c, head.Version, len(ws), dels)
		if o.dropEvery > 0 && commits%o.dropEvery == 0 {
			old := live[0]
			f, err := ccsSvc.Facts(ctx, old)
			if err != nil {
				return err
			}
			f.Tombstoned, f.ReservationHorizonUnixMs = true, now().UnixMilli()
			if _, err := ccsSvc.PutFacts(ctx, f); err != nil {
				return fmt.Errorf("drop %s: %w", old, err)
			}
			drops++
			fmt.Fprintf(out, "%s %-10s dropped (CCS tombstone; the coordinator cleans it up)\n", stamp(), old)
			base := old
			if g := gens[old]; g > 1 {
				base = old[:len(old)-len(fmt.Sprintf("g%d", g))]
			}
			next := fmt.Sprintf("%sg%d", base, gens[old]+1)
			if err := create(next); err != nil {
				return err
			}
			live = append(live[1:], next)
			gens[next] = gens[old] + 1
		}
	}
	return nil
}

// clients are the tool's SDK clients: the shared AWS configuration of the
// person running it (profiles, SSO, ...), or fixed test credentials for a
// local endpoint. (The functions take theirs from the Lambda environment,
// app.NewClients, and link no shared-configuration loader.)
func clients(ctx context.Context, endpoint string) (app.Clients, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if endpoint != "" {
		opts = append(opts, awsconfig.WithRegion("us-east-1"),
			awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return app.Clients{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return app.ClientsFor(cfg, endpoint), nil
}
