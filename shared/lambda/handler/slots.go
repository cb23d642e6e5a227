package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
)

// Slots are the fleet-wide concurrency slots of each task class
// (awsio.Slots).
type Slots interface {
	Acquire(ctx context.Context, class, holder string, limit int, now time.Time, lease time.Duration) (awsio.SlotGrant, error)
	Release(ctx context.Context, class, holder string, now time.Time) error
}

// Deferrer returns a received task to its queue, invisible for delay,
// without the return counting as a failed receive towards the DLQ
// (awsio.Deferrals).
type Deferrer interface {
	Defer(ctx context.Context, r events.SQSMessage, delay time.Duration) (resent bool, err error)
}

// errDeferred marks a record deferred by changing its visibility (no free
// slot of its class, or a rewrite waiting for a still head): it is
// reported in batchItemFailures (so the event source leaves it in the
// queue, to return after the delay) but is no failure of the task.
var errDeferred = errors.New("task deferred: returned to its queue for later")

// ClassGate bounds how many tasks of each class run at once across every
// instance of the fleet. A task that finds every slot of its class taken
// does not run: it is deferred (returned to its queue with a visibility
// delay, see awsio.Deferrals), never dropped and never counted as a
// failure. The zero value (no slots) lets every task run.
type ClassGate struct {
	Slots    Slots
	Deferrer Deferrer
	Limits   policy.ClassConcurrency
	// Lease is how long a slot is held without a release: the consumer
	// function's timeout plus clock skew, so a slot never expires under a
	// live holder and a crashed holder's slot frees after it.
	Lease time.Duration
	Delay time.Duration // the deferral's visibility delay
	Now   func() time.Time
	// Pressure returns the function's throttled AWS attempts so far
	// (app.Throttles.Counts); what a task's run adds is
	// recorded with its Kind. One task runs at a time per instance, so
	// the difference is the task's own. nil: not recorded.
	Pressure func() Throttled
}

// Throttled counts throttled AWS request attempts by service.
type Throttled struct{ S3SlowDown, Dynamo, SQS int64 }

// GateFrom is the gate of a consumer whose function times out after
// fnTimeout, under policy p.
func GateFrom(p policy.Policy, fnTimeout time.Duration, s Slots, d Deferrer) ClassGate {
	return ClassGate{Slots: s, Deferrer: d, Limits: p.Budgets.ClassConcurrency, Lease: fnTimeout + p.ClockSkew.D(),
		Delay: p.Budgets.DeferDelay.D(), Now: time.Now}
}

// run runs fn holding a slot of task's class, or defers the record. It
// returns errDeferred when the record must be reported to the event
// source (deferred by visibility), nil when it ran or was re-sent.
func (g ClassGate) run(ctx context.Context, r events.SQSMessage, task contract.Task, holder string, m *metrics.Recorder, log *slog.Logger, fn func() error) error {
	class := string(task.Kind)
	if g.Pressure != nil {
		before := g.Pressure()
		defer func() {
			after := g.Pressure()
			if d := after.S3SlowDown - before.S3SlowDown; d > 0 {
				m.AddDim("S3SlowDown", "Kind", class, float64(d))
			}
			if d := after.Dynamo - before.Dynamo; d > 0 {
				m.AddDim("DynamoThrottled", "Kind", class, float64(d))
			}
			if d := after.SQS - before.SQS; d > 0 {
				m.AddDim("SQSThrottled", "Kind", class, float64(d))
			}
		}()
	}
	limit := g.Limits.For(task.Kind)
	if g.Slots == nil || g.Deferrer == nil || limit <= 0 {
		return fn()
	}
	grant, err := g.Slots.Acquire(ctx, class, holder, limit, g.Now(), g.Lease)
	if err != nil && !errors.Is(err, awsio.ErrSlotContention) {
		return fmt.Errorf("acquire a %s slot: %w", class, err)
	}
	if !grant.Taken {
		m.AddDim("TasksDeferred", "Kind", class, 1)
		m.AddDim("ClassSlotsSaturated", "Kind", class, 1)
		delay := g.Delay
		resent, err := g.Deferrer.Defer(ctx, r, delay)
		if err != nil {
			return fmt.Errorf("defer %s task %s: %w", class, task.TaskID, err)
		}
		log.Info("task deferred: every slot of its class is taken", "task", task.TaskID, "kind", class, "holders", grant.Holders,
			"limit", limit, "delay_ms", delay.Milliseconds(), "resent", resent)
		if resent {
			return nil // a fresh copy is queued: the original is deleted
		}
		return errDeferred
	}
	defer func() {
		if err := g.Slots.Release(context.WithoutCancel(ctx), class, holder, g.Now()); err != nil {
			// The slot frees when its lease ends.
			log.Warn("slot release failed; it frees at its lease end", "kind", class, "err", err)
		}
	}()
	return fn()
}
