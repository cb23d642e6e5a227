package handler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/metrics"
)

// Compaction handles compaction task batches from the compaction FIFO queue.
type Compaction struct {
	batch   Batch
	uc      *compact.Executor
	metrics *metrics.Recorder
	out     io.Writer
	now     func() time.Time
	log     *slog.Logger
}

// NewCompaction returns the compaction handler.
func NewCompaction(uc *compact.Executor, m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) *Compaction {
	return &Compaction{uc: uc, metrics: m, out: out, now: now, log: log, batch: DefaultBatch()}
}

// WithBatch returns h walking its batches with b.
func (h *Compaction) WithBatch(b Batch) *Compaction {
	c := *h
	c.batch = b
	return &c
}

// Handle runs each task in order and reports partial batch failures (per
// message group, see Batch).
func (h *Compaction) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer flushMetrics(h.metrics, h.out, h.now, h.log)
	return h.batch.walk(ctx, ev, h.log, h.metrics, func(m events.SQSMessage) error {
		task, err := contract.DecodeTask(m.MessageId, []byte(m.Body))
		if err != nil {
			h.metrics.Add("MalformedMessages", 1)
			h.log.Error("malformed task message; left for the DLQ", "message_id", m.MessageId, "err", err)
			return err
		}
		res, err := h.uc.Run(ctx, task, holderID(ctx, m.MessageId))
		if err != nil {
			h.metrics.Add("CompactionFailures", 1)
			h.log.Error("compaction failed", "task", task.TaskID, "collection", task.Collection, "err", err)
			return err
		}
		h.log.Info("compaction task handled", "task", task.TaskID, "collection", task.Collection, "outcome", string(res.Outcome), "reason", res.Reason)
		return nil
	}), nil
}

// holderID names one lease holder: the invocation and the message.
func holderID(ctx context.Context, messageID string) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID + "/" + messageID
	}
	return fmt.Sprintf("local-%d/%s", time.Now().UnixNano(), messageID)
}

func flushMetrics(m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) {
	if err := m.Flush(out, now()); err != nil {
		log.Warn("metrics flush failed", "err", err)
	}
}
