package handler

import (
	"context"
	"errors"
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
	gate    ClassGate
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

// WithGate returns h bounding each class's concurrency fleet-wide with g.
func (h *Compaction) WithGate(g ClassGate) *Compaction {
	c := *h
	c.gate = g
	return &c
}

// Handle runs each task in order and reports partial batch failures (per
// message group, see Batch).
func (h *Compaction) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer scopeInvocation(ctx, h.log)()
	defer flushMetrics(h.metrics, h.out, h.now, h.log)
	return h.batch.walk(ctx, ev, h.log, h.metrics, func(m events.SQSMessage) error {
		task, err := contract.DecodeTask(m.MessageId, []byte(m.Body))
		if err != nil {
			h.metrics.Add("MalformedMessages", 1)
			h.log.Error("malformed task message; left for the DLQ", "message_id", m.MessageId, "err", err)
			return err
		}
		if d := h.uc.StartDelay(ctx, task); d > 0 && h.gate.Deferrer != nil {
			// A coalesced rewrite waiting for a still head goes back to
			// its queue (its collection's group waits with it) instead
			// of holding a worker.
			resent, err := h.gate.Deferrer.Defer(ctx, m, d)
			if err != nil {
				return fmt.Errorf("defer %s until its head is still: %w", task.TaskID, err)
			}
			if resent {
				return nil
			}
			return errDeferred
		}
		var res compact.Result
		holder := holderID(ctx, m.MessageId)
		err = h.gate.run(ctx, m, task, holder, h.metrics, h.log, func() error {
			var err error
			res, err = h.uc.Run(ctx, task, holder)
			return err
		})
		if errors.Is(err, errDeferred) {
			return err
		}
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
