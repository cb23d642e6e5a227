package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/contract/strictjson"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/metrics"
)

// Observer handles head events (S3 notifications, or S3 "Object Created"
// events through EventBridge), the scheduled reconciliation event (which
// fans out) and batches of the reconcile queue (each collection reconciled
// on its own).
type Observer struct {
	uc         *observe.Observer
	catalog    observe.Catalog
	reconciles observe.ReconcileQueue
	batch      Batch
	metrics    *metrics.Recorder
	out        io.Writer
	now        func() time.Time
	log        *slog.Logger
}

// NewObserver returns the observer handler; batch walks the reconcile
// queue's batches as every consumer walks its own.
func NewObserver(uc *observe.Observer, catalog observe.Catalog, reconciles observe.ReconcileQueue, batch Batch, m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) *Observer {
	return &Observer{uc: uc, catalog: catalog, reconciles: reconciles, batch: batch, metrics: m, out: out, now: now, log: log}
}

// ObserverResponse is the invocation's answer (visible in tests and logs).
// For a reconcile queue batch, BatchItemFailures is the partial batch
// response the event source mapping reads (ReportBatchItemFailures); the
// other members are ignored there.
type ObserverResponse struct {
	Results           []ObservedHead               `json:"results,omitempty"`
	Reconcile         *observe.ReconcileReport     `json:"reconcile,omitempty"`
	BatchItemFailures []events.SQSBatchItemFailure `json:"batchItemFailures,omitempty"`
}

// ObservedHead summarises one record.
type ObservedHead struct {
	Key        string   `json:"key"`
	Outcome    string   `json:"outcome"`
	Collection string   `json:"collection,omitempty"`
	Version    uint64   `json:"version,omitempty"`
	Origin     string   `json:"origin,omitempty"` // create, append or cutover
	Tasks      []string `json:"tasks,omitempty"`  // task kinds enqueued
}

// ErrUnrecognisedEvent: the payload is neither an S3 event nor a schedule.
var ErrUnrecognisedEvent = errors.New("unrecognised event")

type envelope struct {
	// Records is nil when the member is absent (an EventBridge or a
	// scheduled event), empty when present and empty.
	Records *[]struct {
		EventSource string `json:"eventSource"`
	} `json:"Records"`
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
}

// firstSource is the eventSource of the first record ("" without records).
func (e envelope) firstSource() string {
	if e.Records == nil || len(*e.Records) == 0 {
		return ""
	}
	return (*e.Records)[0].EventSource
}

// eventBridgeObject is the part of S3's EventBridge "Object Created" event
// the observer reads.
type eventBridgeObject struct {
	Detail struct {
		Object struct {
			Key string `json:"key"`
		} `json:"object"`
	} `json:"detail"`
}

// Handle dispatches on the event's shape.
func (h *Observer) Handle(ctx context.Context, raw json.RawMessage) (ObserverResponse, error) {
	defer scopeInvocation(ctx, h.log)()
	defer h.flush()
	// AWS adds fields to its events over time, so unknown names pass; a
	// duplicate name or a case variant of a known one is refused
	// (strictjson): the keys observed are exactly the keys AWS sent.
	var env envelope
	if err := strictjson.Unmarshal(raw, &env, strictjson.IgnoreUnknown); err != nil {
		return ObserverResponse{}, fmt.Errorf("%w: %w", ErrUnrecognisedEvent, err)
	}
	if env.Records != nil && (env.Source != "" || env.DetailType != "") {
		// No AWS event is both a record batch and an EventBridge event:
		// read one way by one reader and another way by another, it has
		// no single meaning.
		return ObserverResponse{}, fmt.Errorf("%w: the payload carries both Records and an EventBridge source/detail-type", ErrUnrecognisedEvent)
	}
	switch {
	case env.firstSource() == "aws:s3":
		var ev events.S3Event
		if err := strictjson.Unmarshal(raw, &ev, strictjson.IgnoreUnknown); err != nil {
			return ObserverResponse{}, fmt.Errorf("decode S3 event: %w", err)
		}
		return h.handleS3(ctx, ev)
	case env.Source == "aws.s3" && env.DetailType == "Object Created":
		// EventBridge mode: the key is carried as is (not URL-encoded).
		// Decoded as strictly as the notification path: a duplicate or a
		// case variant of a member read ("key" and "Key") is refused, so
		// the key observed is the one a case-sensitive reader sees.
		var ev eventBridgeObject
		if err := strictjson.Unmarshal(raw, &ev, strictjson.IgnoreUnknown); err != nil {
			return ObserverResponse{}, fmt.Errorf("%w: decode S3 EventBridge event: %w", ErrUnrecognisedEvent, err)
		}
		if ev.Detail.Object.Key == "" {
			return ObserverResponse{}, fmt.Errorf("%w: S3 EventBridge event without detail.object.key", ErrUnrecognisedEvent)
		}
		return h.handleKeys(ctx, []string{ev.Detail.Object.Key})
	case env.firstSource() == "aws:sqs":
		var ev events.SQSEvent
		if err := strictjson.Unmarshal(raw, &ev, strictjson.IgnoreUnknown); err != nil {
			return ObserverResponse{}, fmt.Errorf("decode SQS event: %w", err)
		}
		return h.reconcileBatch(ctx, ev)
	case env.Source == "aws.events" && env.DetailType == "Scheduled Event":
		if h.catalog == nil || h.reconciles == nil {
			return ObserverResponse{}, errors.New("scheduled reconciliation: no catalog (CCS endpoint) or no reconcile queue configured")
		}
		rep, err := h.uc.ScheduleReconcile(ctx, h.catalog, h.reconciles)
		return ObserverResponse{Reconcile: &rep}, err
	}
	return ObserverResponse{}, fmt.Errorf("%w: no S3 records and not a scheduled event", ErrUnrecognisedEvent)
}

func (h *Observer) handleS3(ctx context.Context, ev events.S3Event) (ObserverResponse, error) {
	var keys []string
	for _, r := range ev.Records {
		keys = append(keys, r.S3.Object.URLDecodedKey)
	}
	return h.handleKeys(ctx, keys)
}

// handleKeys observes the head keys of one event, in order.
func (h *Observer) handleKeys(ctx context.Context, keys []string) (ObserverResponse, error) {
	var resp ObserverResponse
	var errs []error
	for _, key := range keys {
		c, _ := contract.CollectionOfHeadKey(key)
		end := scopeCollection(h.log, c)
		res, err := h.uc.HandleKey(ctx, key)
		end()
		if err != nil {
			h.log.Error("head not observed", "key", key, "err", err)
			h.metrics.Add("ObserveFailures", 1)
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			resp.Results = append(resp.Results, ObservedHead{Key: key, Outcome: "error", Collection: res.Collection})
			continue
		}
		oh := ObservedHead{Key: key, Outcome: string(res.Outcome), Collection: res.Collection, Version: res.Version, Origin: res.Origin}
		for _, t := range res.Tasks {
			oh.Tasks = append(oh.Tasks, string(t.Kind))
		}
		resp.Results = append(resp.Results, oh)
	}
	return resp, errors.Join(errs...)
}

func (h *Observer) flush() {
	if err := h.metrics.Flush(h.out, h.now()); err != nil {
		h.log.Warn("metrics flush failed", "err", err)
	}
}
