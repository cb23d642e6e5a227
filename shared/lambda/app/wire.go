package app

import (
	"io"
	"log/slog"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/guard"
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

// CCS is the CCS client of c (nil without a CCS endpoint), authenticated
// as the functions' are (the operator's CLI reads facts through it).
func (c Config) CCS(cl Clients) *owners.CCS { return c.ccs(cl) }

func (c Config) ccs(cl Clients) *owners.CCS {
	if c.CCSEndpoint == "" {
		return nil
	}
	return owners.NewCCS(c.owner(c.CCSEndpoint, cl))
}

// owner is the client of one owner endpoint: signed (SigV4) with the
// function's own credentials unless c.OwnerAuth is owners.AuthNone. The
// signing service and region come from the endpoint's host (API Gateway,
// function URL); for a host that does not say (a custom domain, a local
// stand-in) from c.OwnerSigning, else API Gateway in the function's region.
func (c Config) owner(endpoint string, cl Clients) *owners.Client {
	if c.OwnerAuth == owners.AuthNone {
		return owners.New(endpoint, c.Policy.OwnerTimeout.D())
	}
	service, region, ok := owners.SigningFor(endpoint)
	switch {
	case ok:
	case c.OwnerSigning != "":
		service, region, _ = owners.ParseSigning(c.OwnerSigning) // validated by FromEnv
	default:
		service, region = owners.ServiceAPIGateway, cl.Region
	}
	return owners.NewSigned(endpoint, c.Policy.OwnerTimeout.D(), owners.Signing{Credentials: cl.Credentials, Service: service, Region: region})
}

// ObserverHandler wires the observer function.
func ObserverHandler(c Config, cl Clients, rt Runtime) *handler.Observer {
	return ObserverHandlerWith(c, cl, rt, guard.All())
}

// ObserverHandlerWith wires the observer function with guards g (mutation
// proofs; production runs guard.All()).
func ObserverHandlerWith(c Config, cl Clients, rt Runtime, g guard.Set) *handler.Observer {
	m := metrics.NewFor(c.Deployment, resources.FnObserver)
	bucket := awsio.NewBucket(cl.S3, c.Bucket)
	state := awsio.NewObservedTable(cl.Dynamo, c.Table)
	queues := awsio.NewFIFOQueues(cl.SQS, c.QueueURLs)
	ccs := c.ccs(cl)
	var facts observe.FactsSource
	var catalog observe.Catalog
	if ccs != nil {
		facts, catalog = ccs, ccs
	}
	cfg := observe.ConfigFrom(c.Policy, compact.PolicyFrom(c.Policy.Compaction).Due)
	uc := observe.New(bucket, state, queues, facts, rt.Now, cfg, m, rt.Log).WithGuards(g)
	uc.SetCleanups(awsio.NewProgressTable(cl.Dynamo, c.Table))
	if ccs != nil {
		// A namespace dropped after its children were released: its
		// release is found owed by reconciliation of a released child and
		// requested from the handoff (the one role that may record
		// release intents), through the handoff queue.
		uc.SetNamespaceReleaser(handoff.NewNamespaceRequester(ccs, ccs, queues, rt.Now, g, m, rt.Log))
	}
	return handler.NewObserver(uc, catalog, queues, handler.Batch{Reserve: c.Policy.BatchReserve(), Guards: g}, m, rt.Out, rt.Now, rt.Log)
}
