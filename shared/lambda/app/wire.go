package app

import (
	"io"
	"log/slog"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// Runtime is what every handler needs besides its configuration.
type Runtime struct {
	Now func() time.Time
	Out io.Writer // EMF metric lines
	Log *slog.Logger
}

func (c Config) ccs() *owners.CCS {
	if c.CCSEndpoint == "" {
		return nil
	}
	return owners.NewCCS(owners.New(c.CCSEndpoint, c.Policy.OwnerTimeout.D()))
}

// ObserverHandler wires the observer function.
func ObserverHandler(c Config, cl Clients, rt Runtime) *handler.Observer {
	m := metrics.New(resources.FnObserver)
	bucket := awsio.NewBucket(cl.S3, c.Bucket)
	state := awsio.NewObservedTable(cl.Dynamo, c.Table)
	queues := awsio.NewFIFOQueues(cl.SQS, c.QueueURLs)
	ccs := c.ccs()
	var facts observe.FactsSource
	var catalog observe.Catalog
	if ccs != nil {
		facts, catalog = ccs, ccs
	}
	cfg := observe.ConfigFrom(c.Policy, compact.PolicyFrom(c.Policy.Compaction).Due)
	uc := observe.New(bucket, state, queues, facts, rt.Now, cfg, m, rt.Log)
	return handler.NewObserver(uc, catalog, m, rt.Out, rt.Now, rt.Log)
}
