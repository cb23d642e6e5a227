package app

import (
	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// CompactionOptions replace parts of the compaction wiring in tests and
// mutation proofs. The zero value is production.
type CompactionOptions struct {
	Guards   *guard.Set       // nil: guard.All()
	Reporter compact.Reporter // nil: the handoff FIFO queue (awsio.FIFOQueues.Report)
	// Objects wraps the data bucket (fault injection); nil: the bucket.
	Objects func(*awsio.Bucket) compact.Objects
	// Sleep is how a rewrite waits for a still head; nil: real time.
	Sleep compact.Sleeper
}

// CompactionHandler wires the compaction function.
func CompactionHandler(c Config, cl Clients, rt Runtime) *handler.Compaction {
	return CompactionHandlerWith(c, cl, rt, CompactionOptions{})
}

// CompactionHandlerWith wires the compaction function with options.
func CompactionHandlerWith(c Config, cl Clients, rt Runtime, o CompactionOptions) *handler.Compaction {
	ex, m := CompactionExecutor(c, cl, rt, o)
	b := handler.BatchFrom(c.Policy)
	if o.Guards != nil {
		b.Guards = *o.Guards
	}
	return handler.NewCompaction(ex, m, rt.Out, rt.Now, rt.Log).WithBatch(b).WithGate(ClassGate(c, cl, resources.QueueCompaction))
}

// CompactionExecutor wires the compaction use case and its recorder.
func CompactionExecutor(c Config, cl Clients, rt Runtime, o CompactionOptions) (*compact.Executor, *metrics.Recorder) {
	m := metrics.NewFor(c.Deployment, resources.FnCompaction)
	g := guard.All()
	if o.Guards != nil {
		g = *o.Guards
	}
	// Reads and writes count against their collection prefix's S3 rates.
	bucket := awsio.NewBucket(cl.S3, c.Bucket).WithRequestBudget(S3Budget(c, cl, resources.FnCompaction, m))
	cfg := compact.ExecConfigFrom(c.Policy, g)
	// Each lease records the interval the executor heartbeats it at, so
	// its record says when its holder is overdue (lease.Classify).
	leases := lease.New(awsio.NewLeaseTable(cl.Dynamo, c.Table), g).WithHeartbeat(cfg.Heartbeat)
	rep := o.Reporter
	if rep == nil {
		rep = awsio.NewFIFOQueues(cl.SQS, c.QueueURLs)
	}
	var facts compact.Facts
	if ccs := c.ccs(cl); ccs != nil {
		facts = ccs
	}
	var objects compact.Objects = bucket
	if o.Objects != nil {
		objects = o.Objects(bucket)
	}
	ex := compact.NewExecutor(objects, leases, facts, rep, rt.Now, cfg, m, rt.Log).WithRewrites(awsio.NewObservedTable(cl.Dynamo, c.Table))
	if o.Sleep != nil {
		ex = ex.WithSleep(o.Sleep)
	}
	return ex, m
}
