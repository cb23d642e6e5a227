package handler

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
)

// Batch says how an SQS consumer walks one batch.
type Batch struct {
	// Reserve: a record is started only while the invocation has more than
	// this long left (one owner call plus a margin, policy.BatchReserve);
	// the records not started are reported failed, untouched, and come
	// back with the queue's next delivery instead of dying with a timed
	// out invocation.
	Reserve time.Duration
	// Guards: GroupIsolation confines a failure to its message group.
	Guards guard.Set
}

// DefaultBatch is the production walk under the default policy.
func DefaultBatch() Batch {
	return Batch{Reserve: policy.Default().BatchReserve(), Guards: guard.All()}
}

// BatchFrom is the walk under policy p.
func BatchFrom(p policy.Policy) Batch { return Batch{Reserve: p.BatchReserve(), Guards: guard.All()} }

// groupOf is a record's FIFO message group ("" on a standard queue).
func groupOf(r events.SQSMessage) string { return r.Attributes["MessageGroupId"] }

// walk processes a FIFO batch in order with fn and returns the records to
// report failed. A record that fails is reported, and so is every later
// record of its message group (a later message of the group must not
// overtake it); records of other groups (other collections) go on: one
// collection's failing owner call never uses up another's receives. With
// GroupIsolation off every later record fails (the behaviour the guard
// exists against). When the invocation's remaining time (its context
// deadline, on the wall clock the runtime set it by) drops to Reserve,
// no further record is started: each is reported failed untouched.
func (b Batch) walk(ctx context.Context, ev events.SQSEvent, log *slog.Logger, m *metrics.Recorder, fn func(events.SQSMessage) error) events.SQSEventResponse {
	var resp events.SQSEventResponse
	failedGroups := map[string]bool{}
	all, outOfTime := false, false
	deadline, bounded := ctx.Deadline()
	skipped, deferred := 0, 0
	for _, r := range ev.Records {
		g := groupOf(r)
		fail := all || failedGroups[g] || outOfTime
		if !fail && bounded && time.Until(deadline) <= b.Reserve {
			outOfTime, fail = true, true
			log.Warn("too little invocation time left for another record; the rest return to the queue",
				"remaining_ms", time.Until(deadline).Milliseconds(), "reserve_ms", b.Reserve.Milliseconds())
		}
		if fail {
			skipped++
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			continue
		}
		end := scopeRecord(log, r)
		err := fn(r)
		end()
		if err != nil {
			if errors.Is(err, errDeferred) {
				deferred++ // returned for later by its visibility: no failure
			}
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			if b.Guards.GroupIsolation && g != "" {
				failedGroups[g] = true
			} else {
				all = true
			}
		}
	}
	if n := len(resp.BatchItemFailures) - deferred; n > 0 {
		m.Add("BatchItemFailures", float64(n))
		if outOfTime {
			m.Add("BatchRecordsDeferred", float64(skipped))
		}
		log.Warn("batch items failed; they return to the queue", "failed", n, "records", len(ev.Records), "not_started", skipped)
	}
	return resp
}
