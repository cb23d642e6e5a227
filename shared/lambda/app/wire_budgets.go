package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// ClassGate is the fleet-wide concurrency gate of the consumer of queue
// class: slots in the coordinator's table, held at most the consumer's
// timeout plus clock skew; deferrals back to the same queue; throttled
// attempts recorded by Kind. Without the queue's URL (a configuration
// that cannot defer) nothing is gated.
func ClassGate(c Config, cl Clients, class string) handler.ClassGate {
	def := resources.For(c.Deployment, c.Policy)
	q, ok := def.Queue(class)
	url := c.QueueURLs[class]
	if !ok || url == "" || c.Table == "" {
		return handler.ClassGate{Pressure: cl.Throttles.Counts}
	}
	fn, _ := def.Function(q.Consumer)
	g := handler.GateFrom(c.Policy, fn.Timeout, awsio.NewSlots(cl.Dynamo, c.Table), awsio.NewDeferrals(cl.SQS, url, q.MaxReceiveCount))
	g.Pressure = cl.Throttles.Counts
	return g
}

// S3Budget paces a function's bulk S3 requests per prefix across the
// fleet (budgets.s3_*_per_sec_per_prefix), on the wall clock: pacing is a
// rate, independent of the business clock.
func S3Budget(c Config, cl Clients, fn string, m *metrics.Recorder) *awsio.PrefixBudget {
	b := c.Policy.Budgets
	if c.Table == "" || (b.S3ReadsPerSecPerPrefix <= 0 && b.S3WritesPerSecPerPrefix <= 0) {
		return nil
	}
	return awsio.NewPrefixBudget(cl.Dynamo, c.Table, fmt.Sprintf("%s-%016x", fn, rand.Uint64()), b.S3ReadsPerSecPerPrefix, b.S3WritesPerSecPerPrefix,
		time.Now, sleepContext).WithMetrics(m)
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
