package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// GC handles batches of the gc FIFO queue: each record is a task naming a
// collection to sweep. The queue entry is only a hint; the executor re-reads
// the head and judges every delete at execution time.
type GC struct {
	batch   Batch
	gate    ClassGate
	ex      *gc.Executor
	metrics *metrics.Recorder
	out     io.Writer
	now     func() time.Time
	log     *slog.Logger
}

// NewGC returns the GC handler.
func NewGC(ex *gc.Executor, m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) *GC {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GC{ex: ex, metrics: m, out: out, now: now, log: log, batch: DefaultBatch()}
}

// WithBatch returns h walking its batches with b.
func (h *GC) WithBatch(b Batch) *GC {
	c := *h
	c.batch = b
	return &c
}

// WithGate returns h bounding each class's concurrency fleet-wide with g.
func (h *GC) WithGate(g ClassGate) *GC {
	c := *h
	c.gate = g
	return &c
}

// Handle runs each record's task. A record that fails (malformed body, a
// task the gc queue does not carry, deletes not confirmed, a transient read
// error) is reported in batchItemFailures, and so is every later record of
// its message group (see Batch): on a FIFO queue a later message of the
// group must not overtake it; other collections' records go on.
func (h *GC) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer scopeInvocation(ctx, h.log)()
	defer h.flush()
	return h.batch.walk(ctx, ev, h.log, h.metrics, func(r events.SQSMessage) error {
		if err := h.one(ctx, r); err != nil {
			if errors.Is(err, errDeferred) {
				return err
			}
			h.log.Error("gc task failed; message will be retried", "message", r.MessageId, "err", err)
			h.metrics.Add("GCTaskFailures", 1)
			return err
		}
		return nil
	}), nil
}

func (h *GC) one(ctx context.Context, r events.SQSMessage) error {
	task, err := contract.DecodeTask(r.MessageId, []byte(r.Body))
	if err != nil {
		h.metrics.Add("MalformedTasks", 1)
		return fmt.Errorf("malformed task (nothing deleted): %w", err)
	}
	if resources.QueueForKind(task.Kind) != resources.QueueGC {
		h.metrics.Add("MalformedTasks", 1)
		return fmt.Errorf("task %s of kind %s does not belong on the gc queue (nothing deleted)", task.TaskID, task.Kind)
	}
	return h.gate.run(ctx, r, task, holderID(ctx, r.MessageId), h.metrics, h.log, func() error {
		_, err := h.ex.Run(ctx, task)
		return err
	})
}

func (h *GC) flush() {
	if err := h.metrics.Flush(h.out, h.now()); err != nil {
		h.log.Warn("metrics flush failed", "err", err)
	}
}
