package handler

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/observe"
)

// HandleReconcile handles one batch of the reconcile queue (the observer
// function's SQS entry, as the event source mapping invokes it).
func (h *Observer) HandleReconcile(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer h.flush()
	resp, err := h.reconcileBatch(ctx, ev)
	return events.SQSEventResponse{BatchItemFailures: resp.BatchItemFailures}, err
}

// reconcileBatch handles each record on its own (Batch.walk: a failure
// returns its record and the later records of its group only; records are
// not started when the invocation's time runs short): a chunk is split
// further, a single collection is reconciled. A malformed body fails its
// record (after maxReceiveCount it rests in the reconcile DLQ).
func (h *Observer) reconcileBatch(ctx context.Context, ev events.SQSEvent) (ObserverResponse, error) {
	rep := observe.NewReconcileReport()
	sqsResp := h.batch.walk(ctx, ev, h.log, h.metrics, func(rec events.SQSMessage) error {
		r, err := h.reconcileRecord(ctx, rec)
		rep.Add(r)
		if err != nil {
			h.log.Warn("reconcile request failed", "message", rec.MessageId, "err", err)
			if len(r.Failed) == 0 {
				rep.Failed[rec.MessageId] = err.Error()
			}
		}
		return err
	})
	return ObserverResponse{Reconcile: &rep, BatchItemFailures: sqsResp.BatchItemFailures}, nil
}

func (h *Observer) reconcileRecord(ctx context.Context, rec events.SQSMessage) (observe.ReconcileReport, error) {
	req, err := contract.DecodeReconcileRequest(rec.MessageId, []byte(rec.Body))
	if err != nil {
		h.metrics.Add("ReconcileRequestsRejected", 1)
		return observe.NewReconcileReport(), fmt.Errorf("reconcile request %s: %w", rec.MessageId, err)
	}
	if len(req.Collections) > 1 {
		if h.reconciles == nil {
			return observe.NewReconcileReport(), errors.New("reconcile chunk: no reconcile queue configured")
		}
		return h.uc.FanOut(ctx, h.reconciles, req)
	}
	c := req.Collections[0]
	r, err := h.uc.ReconcileOne(ctx, c)
	if err != nil {
		r.Failed[c] = err.Error()
	}
	return r, err
}
