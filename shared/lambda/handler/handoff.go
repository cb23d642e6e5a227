package handler

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/metrics"
)

// Handoff handles completion batches from the handoff FIFO queue.
type Handoff struct {
	batch   Batch
	uc      *handoff.Handoff
	metrics *metrics.Recorder
	out     io.Writer
	now     func() time.Time
	log     *slog.Logger
}

// NewHandoff returns the handoff handler.
func NewHandoff(uc *handoff.Handoff, m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) *Handoff {
	return &Handoff{uc: uc, metrics: m, out: out, now: now, log: log, batch: DefaultBatch()}
}

// WithBatch returns h walking its batches with b.
func (h *Handoff) WithBatch(b Batch) *Handoff {
	c := *h
	c.batch = b
	return &c
}

// Handle hands each completion off in order and reports partial batch
// failures: a completion whose owner call fails (a CCS or publisher
// outage for its collection) holds back only its own message group.
func (h *Handoff) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer flushMetrics(h.metrics, h.out, h.now, h.log)
	return h.batch.walk(ctx, ev, h.log, h.metrics, func(m events.SQSMessage) error {
		c, err := contract.DecodeCompletion(m.MessageId, []byte(m.Body))
		if err != nil {
			h.metrics.Add("MalformedMessages", 1)
			h.log.Error("malformed completion message; left for the DLQ", "message_id", m.MessageId, "err", err)
			return err
		}
		res, err := h.uc.Process(ctx, c)
		if err != nil {
			h.metrics.Add("HandoffFailures", 1)
			h.log.Error("handoff failed; will retry", "task", c.TaskID, "collection", c.Collection, "err", err)
			return err
		}
		h.log.Info("completion handed off", "task", c.TaskID, "collection", c.Collection, "outcome", string(res.Outcome), "reason", res.Reason, "version", res.Version)
		return nil
	}), nil
}
