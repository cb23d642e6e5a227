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
	uc      *compact.Executor
	metrics *metrics.Recorder
	out     io.Writer
	now     func() time.Time
	log     *slog.Logger
}

// NewCompaction returns the compaction handler.
func NewCompaction(uc *compact.Executor, m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) *Compaction {
	return &Compaction{uc: uc, metrics: m, out: out, now: now, log: log}
}

// Handle runs each task in order and reports partial batch failures.
func (h *Compaction) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer flushMetrics(h.metrics, h.out, h.now, h.log)
	return fifoOrderedBatch(ev, h.log, h.metrics, func(m events.SQSMessage) error {
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
	})
}

// holderID names one lease holder: the invocation and the message.
func holderID(ctx context.Context, messageID string) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID + "/" + messageID
	}
	return fmt.Sprintf("local-%d/%s", time.Now().UnixNano(), messageID)
}

// fifoOrderedBatch processes a FIFO batch in order. After the first failure
// that record and every later one are reported failed: later messages of
// the group must not overtake it.
func fifoOrderedBatch(ev events.SQSEvent, log *slog.Logger, m *metrics.Recorder, fn func(events.SQSMessage) error) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	failed := false
	for _, r := range ev.Records {
		if failed {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			continue
		}
		if err := fn(r); err != nil {
			failed = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	if n := len(resp.BatchItemFailures); n > 0 {
		m.Add("BatchItemFailures", float64(n))
		log.Warn("batch items failed; they return to the queue", "failed", n, "records", len(ev.Records))
	}
	return resp, nil
}

func flushMetrics(m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) {
	if err := m.Flush(out, now()); err != nil {
		log.Warn("metrics flush failed", "err", err)
	}
}
