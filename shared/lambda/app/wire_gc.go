package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// GCBucket adapts a bucket to the GC ports.
type GCBucket struct{ B *awsio.Bucket }

// Get reads an object.
func (g GCBucket) Get(ctx context.Context, key string) ([]byte, error) { return g.B.Get(ctx, key) }

// GetLimited reads an object of at most limit bytes (lineage.LimitedObjects).
func (g GCBucket) GetLimited(ctx context.Context, key string, limit int64) ([]byte, error) {
	return g.B.GetLimited(ctx, key, limit)
}

// List proposes keys under prefix, one page at a time.
func (g GCBucket) List(ctx context.Context, prefix string, fn func([]gc.Listed) error) error {
	return g.B.ListPages(ctx, prefix, func(page []awsio.Listed) error {
		out := make([]gc.Listed, len(page))
		for i, l := range page {
			out[i] = gc.Listed{Key: l.Key, LastModified: l.LastModified}
		}
		return fn(out)
	})
}

// DeleteProven is the delete port: one DeleteObjects call of a batch the
// delete gate proved (404 counts as deleted).
func (g GCBucket) DeleteProven(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
	return g.B.DeleteProven(ctx, b)
}

// GCReadPorts are the read-only ports (plans, the CLI).
func GCReadPorts(c Config, cl Clients) gc.ReadPorts {
	data := GCBucket{B: awsio.NewBucket(cl.S3, c.Bucket)}
	wmBucket := data
	if c.WatermarkBucket != "" && c.WatermarkBucket != c.Bucket {
		wmBucket = GCBucket{B: awsio.NewBucket(cl.S3, c.WatermarkBucket)}
	}
	rp := gc.ReadPorts{Objects: data, Lister: data, Watermark: gc.WatermarkObject{Objects: wmBucket, Key: c.WatermarkKey}}
	if c.Table != "" {
		rp.Memory = awsio.NewObservedTable(cl.Dynamo, c.Table) // read-only use: GetItem
		rp.Seen = awsio.NewProgressTable(cl.Dynamo, c.Table)   // read-only use: GetItem
	}
	if ccs := c.ccs(cl); ccs != nil {
		rp.Facts = ccs
	} else {
		rp.Facts = noFacts{}
	}
	return rp
}

// noFacts fails closed: without CCS there are no facts to judge by.
type noFacts struct{}

func (noFacts) Facts(context.Context, string) (contract.CollectionFacts, error) {
	return contract.CollectionFacts{}, errNoCCS
}

// GCPorts are every port the executor uses.
func GCPorts(c Config, cl Clients) gc.Ports {
	data := GCBucket{B: awsio.NewBucket(cl.S3, c.Bucket)}
	return gc.Ports{
		ReadPorts:   GCReadPorts(c, cl),
		Deleter:     data,
		Sweeps:      awsio.NewObservedTable(cl.Dynamo, c.Table),
		Completions: awsio.NewFIFOQueues(cl.SQS, c.QueueURLs),
		// gc.global_deletes_per_sec holds across every GC instance: one
		// token bucket in the coordinator's table, one second of burst.
		Budget: awsio.NewTokenBucket(cl.Dynamo, c.Table, GCDeleteBudget, c.Policy.GC.GlobalDeletesPerSec,
			max(c.Policy.GC.GlobalDeletesPerSec, float64(c.Policy.GC.BatchSize)), fmt.Sprintf("gc-%016x", rand.Uint64())),
		Progress:  awsio.NewProgressTable(cl.Dynamo, c.Table),
		Sightings: awsio.NewProgressTable(cl.Dynamo, c.Table),
		Heads:     headRetirer(c, cl),
		// A sweep stopped at its bound continues at the tail of its own queue.
		Continuations: continuations(c, cl),
	}
}

// continuations sends a sweep's next slice to the gc queue (nil without
// its URL: the next reconciliation continues the sweep).
func continuations(c Config, cl Clients) gc.TaskQueue {
	if c.QueueURLs[resources.QueueGC] == "" {
		return nil
	}
	return awsio.NewFIFOQueues(cl.SQS, c.QueueURLs)
}

// headRetirer is the publisher's head retirement (POST /retire, signed as
// the GC function signs it): the tombstone cleanup's last step. Without a
// publisher endpoint the head phase fails (nothing is deleted blindly).
func headRetirer(c Config, cl Clients) gc.HeadRetirer {
	if c.PublisherEndpoint == "" {
		return nil
	}
	return owners.NewPublisher(c.owner(c.PublisherEndpoint, cl))
}

// GCDeleteBudget names the fleet-wide GC delete budget's item.
const GCDeleteBudget = "gc-deletes"

// GCExecutor wires the GC use case with the given ports and guards. The
// pacer's clock is real time: pacing is a wall-clock rate, independent of
// the business clock rt.Now.
func GCExecutor(c Config, ports gc.Ports, rt Runtime, m *metrics.Recorder, g guard.Set) *gc.Executor {
	cfg := gc.ConfigFrom(c.Policy, g)
	pacer := gc.NewPacer(c.Policy.GC.DeletesPerSec, c.Policy.GC.GlobalDeletesPerSec, cfg.BatchSize, time.Now, gc.SleepContext).WithFleet(ports.Budget)
	if ports.PrefixBudget != nil {
		pacer.WithPrefix(ports.PrefixBudget)
	}
	return gc.New(ports, cfg, pacer, rt.Now, gc.SleepContext, m, rt.Log)
}

// GCHandler wires the GC function (production guards: all on).
func GCHandler(c Config, cl Clients, rt Runtime) *handler.GC {
	m := metrics.NewFor(c.Deployment, resources.FnGC)
	ports := GCPorts(c, cl)
	// Deletes count against their collection prefix's S3 write rate: the
	// delete gate takes it with the batch's delete budget, before its proof.
	if pb := S3Budget(c, cl, resources.FnGC, m); pb != nil {
		ports.PrefixBudget = pb
	}
	return handler.NewGC(GCExecutor(c, ports, rt, m, guard.All()), m, rt.Out, rt.Now, rt.Log).WithBatch(handler.BatchFrom(c.Policy)).
		WithGate(ClassGate(c, cl, resources.QueueGC))
}

var errNoCCS = errorString("no CCS endpoint configured: GC cannot read lifecycle/tombstone facts")

type errorString string

func (e errorString) Error() string { return string(e) }
