package app

import (
	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// HandoffOptions replace parts of the handoff wiring in tests and mutation
// proofs. The zero value is production.
type HandoffOptions struct {
	Guards    *guard.Set        // nil: guard.All()
	Publisher handoff.Publisher // nil: the publisher endpoint
	// Reclaimer is the naive cleanup of an ambiguous cutover's outputs
	// that guard ambiguous_reread exists against: used only with that
	// guard off, injected by its mutation proofs (testkit/naive). The
	// shipped handoff deletes nothing.
	Reclaimer handoff.Reclaimer
}

// HandoffHandler wires the handoff function.
func HandoffHandler(c Config, cl Clients, rt Runtime) *handler.Handoff {
	return HandoffHandlerWith(c, cl, rt, HandoffOptions{})
}

// HandoffHandlerWith wires the handoff function with options.
func HandoffHandlerWith(c Config, cl Clients, rt Runtime, o HandoffOptions) *handler.Handoff {
	uc, m := HandoffUseCase(c, cl, rt, o)
	b := handler.BatchFrom(c.Policy)
	if o.Guards != nil {
		b.Guards = *o.Guards
	}
	if len(c.HandoffSenders) == 0 && rt.Log != nil {
		rt.Log.Error("no handoff senders configured: every handoff message is refused", "env", resources.EnvHandoffSenders)
	}
	return handler.NewHandoff(uc, m, rt.Out, rt.Now, rt.Log).WithBatch(b).WithSenders(handler.Senders(c.HandoffSenders))
}

// PublisherClient is the handoff function's client of the Manifest
// Publisher, signed as the function signs it.
func PublisherClient(c Config, cl Clients) *owners.Publisher {
	return owners.NewPublisher(c.owner(c.PublisherEndpoint, cl))
}

// HandoffUseCase wires the handoff use case and its recorder.
func HandoffUseCase(c Config, cl Clients, rt Runtime, o HandoffOptions) (*handoff.Handoff, *metrics.Recorder) {
	m := metrics.NewFor(c.Deployment, resources.FnHandoff)
	g := guard.All()
	if o.Guards != nil {
		g = *o.Guards
	}
	bucket := awsio.NewBucket(cl.S3, c.Bucket)
	pub := o.Publisher
	if pub == nil {
		pub = owners.NewPublisher(c.owner(c.PublisherEndpoint, cl))
	}
	var ccs handoff.CCS
	if s := c.ccs(cl); s != nil {
		ccs = s
	}
	cfg := handoff.ConfigFrom(c.Policy, g)
	// The shipped handoff deletes nothing: only the mutation with the
	// ambiguous re-read switched off gets a reclaimer, to show the harm.
	var reclaim handoff.Reclaimer
	if !g.AmbiguousReread {
		reclaim = o.Reclaimer
	}
	return handoff.New(lineage.New(bucket, 256), pub, ccs, reclaim, rt.Now, cfg, m, rt.Log).WithRemains(bucket).WithWritten(bucket), m
}
