package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

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
var errNoCCS = fmt.Errorf("no CCS endpoint (--ccs, %s, or the stack's %s output): CCS facts unknown", envCCS, resources.OutCCSEndpoint)

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

// lineageOf reads the deployment's heads and manifests.
func lineageOf(d *deployment) *lineage.Reader {
	return lineage.New(awsio.NewBucket(d.cl.S3, d.cfg.Bucket), 64)
}

// gcReadPorts are GC's read-only ports (app.GCReadPorts) with the
// watermark's and the listing's SDK errors said in one line.
func gcReadPorts(cfg app.Config, cl app.Clients) gc.ReadPorts {
	rp := app.GCReadPorts(cfg, cl)
	rp.Watermark = shortWatermark{rp.Watermark}
	if rp.Lister != nil {
		rp.Lister = shortLister{rp.Lister}
	}
	return rp
}

type shortWatermark struct{ gc.WatermarkSource }

func (s shortWatermark) Watermark(ctx context.Context) (contract.Watermark, error) {
	w, err := s.WatermarkSource.Watermark(ctx)
	return w, shorten(err)
}

type shortLister struct{ gc.Lister }

func (s shortLister) List(ctx context.Context, prefix string, page func([]gc.Listed) error) error {
	return shorten(s.Lister.List(ctx, prefix, page))
}

// statusPorts wires every read-only source of a snapshot: GetObject,
// ListObjects, GetItem, Scan, GetQueueUrl, GetQueueAttributes and CCS GETs.
func statusPorts(d *deployment, asOf time.Time) status.Ports {
	cfg, cl := d.cfg, d.cl
	bucket := awsio.NewBucket(cl.S3, cfg.Bucket)
	ccs := ccsOf(cfg, cl)
	observed := awsio.NewObservedTable(cl.Dynamo, cfg.Table)
	gcPorts := gcReadPorts(cfg, cl)
	gcCfg := gc.ConfigFrom(cfg.Policy, guard.All())
	lin := lineage.New(bucket, 64)
	// The observer's Preview only reads (head, root, facts, state Get): it
	// is given no queue.
	var state observe.StateStore = observed
	obs := observe.New(bucket, state, nil, ccs, func() time.Time { return asOf }, observerConfig(cfg), nil, nil)
	p := status.Ports{
		Catalog: shortCCS{ccs}, Facts: shortCCS{ccs}, Heads: shortHeads{lin}, Observed: observedOrNone{observed, lin},
		Preview: func(ctx context.Context, c string) (observe.Result, observe.Observed, error) {
			r, o, err := obs.Preview(ctx, c)
			return r, o, shorten(err)
		},
		GC: func(ctx context.Context, c string, now time.Time) (gc.Plan, error) {
			p, err := gc.PlanSweep(ctx, gcPorts, gcCfg, c, now)
			return p, shorten(err)
		},
		Leases: func(ctx context.Context, c string) ([]lease.State, error) {
			ls, err := awsio.ListLeases(ctx, cl.Dynamo, cfg.Table, c)
			return ls, shorten(err)
		},
		Classes: queueClasses,
	}
	p.Queue = func(ctx context.Context, class string) (status.QueueCounts, status.QueueCounts, error) {
		var m, dl status.QueueCounts
		if q, ok := d.main[class]; ok {
			c, err := queueDepth(ctx, cl.SQS, q)
			if err != nil {
				return m, dl, err
			}
			m = c
		}
		q, ok := d.dlq[class]
		if !ok {
			return m, dl, fmt.Errorf("no queue of class %s", class)
		}
		dl, err := queueDepth(ctx, cl.SQS, q)
		return m, dl, err
	}
	progress := awsio.NewProgressTable(cl.Dynamo, cfg.Table)
	p.Cleanup = func(ctx context.Context, c string, inc uint64) (gc.TombstoneProgress, error) { // GetItem only
		pr, err := progress.LoadProgress(ctx, c, inc)
		return pr, shorten(err)
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
	inc := uint64(1)
	if h, err := o.lin.Head(ctx, c); err == nil {
		inc = h.Inc()
	}
	st, err := o.t.Get(ctx, c, inc)
	return st, shorten(err)
}

// shortCCS and shortHeads say their sources' SDK errors in one line.
type shortCCS struct{ ccsPort }

func (s shortCCS) Facts(ctx context.Context, c string) (contract.CollectionFacts, error) {
	f, err := s.ccsPort.Facts(ctx, c)
	return f, shorten(err)
}

func (s shortCCS) Collections(ctx context.Context) ([]string, error) {
	cs, err := s.ccsPort.Collections(ctx)
	return cs, shorten(err)
}

type shortHeads struct{ lin *lineage.Reader }

func (s shortHeads) Head(ctx context.Context, c string) (contract.Head, error) {
	h, err := s.lin.Head(ctx, c)
	return h, shorten(err)
}

// queueDepth reads a queue's counts by URL, or by name (GetQueueUrl
// first): read-only.
func queueDepth(ctx context.Context, api *sqs.Client, q queueRef) (status.QueueCounts, error) {
	if q.url == "" && q.name == "" {
		return status.QueueCounts{}, fmt.Errorf("no URL for the queue (the stack has no output for it)")
	}
	url := q.url
	if url == "" {
		u, err := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
		if err != nil {
			return status.QueueCounts{}, fmt.Errorf("queue %s: %s", q.name, oneLine(err))
		}
		url = aws.ToString(u.QueueUrl)
	}
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		return status.QueueCounts{}, fmt.Errorf("queue %s: %s", q, oneLine(err))
	}
	n := func(k sqstypes.QueueAttributeName) int64 {
		v, _ := strconv.ParseInt(out.Attributes[string(k)], 10, 64)
		return v
	}
	return status.QueueCounts{Visible: n(sqstypes.QueueAttributeNameApproximateNumberOfMessages), InFlight: n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)}, nil
}
