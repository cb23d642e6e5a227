package main

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// errNoCCS: without a CCS endpoint there are no facts (status: Unknown).
var errNoCCS = fmt.Errorf("no -ccs endpoint: CCS facts unknown")

type noCCS struct{}

func (noCCS) Facts(context.Context, string) (contract.CollectionFacts, error) {
	return contract.CollectionFacts{}, errNoCCS
}
func (noCCS) Collections(context.Context) ([]string, error) { return nil, errNoCCS }

// ccsPort is the CCS facts and catalog.
type ccsPort interface {
	Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
	Collections(ctx context.Context) ([]string, error)
}

func ccsOf(cfg app.Config, cl app.Clients) ccsPort {
	if c := cfg.CCS(cl); c != nil {
		return c
	}
	return noCCS{}
}

// observerConfig is the observer's configuration under the policy (the
// reconciliation rule's inputs).
func observerConfig(cfg app.Config) observe.Config {
	return observe.ConfigFrom(cfg.Policy, compact.PolicyFrom(cfg.Policy.Compaction).Due)
}

// statusPorts wires every read-only source of a snapshot: GetObject,
// ListObjects, GetItem, Scan, GetQueueUrl, GetQueueAttributes and CCS GETs.
func statusPorts(cfg app.Config, cl app.Clients, def resources.Definition, asOf time.Time) status.Ports {
	bucket := awsio.NewBucket(cl.S3, cfg.Bucket)
	ccs := ccsOf(cfg, cl)
	var observed *awsio.ObservedTable
	if cfg.Table != "" {
		observed = awsio.NewObservedTable(cl.Dynamo, cfg.Table)
	}
	gcPorts := app.GCReadPorts(cfg, cl)
	gcCfg := gc.ConfigFrom(cfg.Policy, guard.All())
	lin := lineage.New(bucket, 64)
	// The observer's Preview only reads (head, root, facts, state Get): it
	// is given no queue.
	var state observe.StateStore
	if observed != nil {
		state = observed
	}
	obs := observe.New(bucket, state, nil, ccs, func() time.Time { return asOf }, observerConfig(cfg), nil, nil)
	p := status.Ports{
		Catalog: ccs, Facts: ccs, Heads: lin, Observed: observedOrNone{observed, lin},
		Preview: func(ctx context.Context, c string) (observe.Result, observe.Observed, error) {
			if observed == nil {
				return observe.Result{}, observe.Observed{}, fmt.Errorf("no -table: observed state unknown")
			}
			return obs.Preview(ctx, c)
		},
		GC: func(ctx context.Context, c string, now time.Time) (gc.Plan, error) {
			return gc.PlanSweep(ctx, gcPorts, gcCfg, c, now)
		},
		Leases: func(ctx context.Context, c string) ([]lease.State, error) {
			if cfg.Table == "" {
				return nil, fmt.Errorf("no -table: leases unknown")
			}
			return awsio.ListLeases(ctx, cl.Dynamo, cfg.Table, c)
		},
		Classes: []string{resources.QueueCompaction, resources.QueueGC, resources.QueueHandoff},
	}
	p.Queue = func(ctx context.Context, class string) (status.QueueCounts, status.QueueCounts, error) {
		q, ok := def.Queue(class)
		if !ok {
			return status.QueueCounts{}, status.QueueCounts{}, fmt.Errorf("no queue of class %s", class)
		}
		m, err := awsio.QueueDepth(ctx, cl.SQS, q.Name)
		if err != nil {
			return status.QueueCounts{}, status.QueueCounts{}, err
		}
		d, err := awsio.QueueDepth(ctx, cl.SQS, q.DLQName)
		return status.QueueCounts{Visible: m.Visible, InFlight: m.InFlight}, status.QueueCounts{Visible: d.Visible, InFlight: d.InFlight}, err
	}
	if cfg.Table != "" {
		p.Cleanup = awsio.NewProgressTable(cl.Dynamo, cfg.Table).LoadProgress // GetItem only
	}
	return p
}

// observedOrNone reads the observed state of the incarnation the head
// names (the first when there is no readable head).
type observedOrNone struct {
	t   *awsio.ObservedTable
	lin *lineage.Reader
}

func (o observedOrNone) Get(ctx context.Context, c string) (observe.Observed, error) {
	if o.t == nil {
		return observe.Observed{}, fmt.Errorf("no -table: observed state unknown")
	}
	inc := uint64(1)
	if h, err := o.lin.Head(ctx, c); err == nil {
		inc = h.Inc()
	}
	return o.t.Get(ctx, c, inc)
}
