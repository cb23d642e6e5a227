package dashview

import (
	"context"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
	"github.com/searchfabric/bcc/shared/monitoring"
)

// Recorder publishes the metrics AWS services compute on their own side
// into a store, from what the embedded stack does: AWS/Lambda metrics of
// every invocation and AWS/SQS gauges of every queue. The coordinator's
// own metrics come from its EMF lines (Store.AddEMF).
type Recorder struct {
	store *Store
	names Names
	now   func() time.Time

	mu     sync.Mutex
	recent map[string][]span // function -> recent invocations
}

type span struct{ from, to time.Time }

// NewRecorder returns a recorder that stamps datapoints with now (the
// functions' clock, as their EMF lines are).
func NewRecorder(store *Store, names Names, now func() time.Time) *Recorder {
	return &Recorder{store: store, names: names, now: now, recent: map[string][]span{}}
}

// Invocation records one finished invocation (localaws.Stack.OnInvoke):
// Invocations, Errors, Duration, Throttles (the embedded stack never
// throttles: 0) and ConcurrentExecutions (invocations of the function that
// overlapped this one).
func (r *Recorder) Invocation(inv localaws.Invocation) {
	name := r.names.Function[inv.Function]
	if name == "" {
		name = inv.Function
	}
	dims := map[string]string{monitoring.DimFunctionName: name}
	t := r.now()
	errs := 0.0
	if inv.Err != nil {
		errs = 1
	}
	wall := time.Now()
	me := span{from: wall.Add(-inv.Duration), to: wall}
	r.mu.Lock()
	keep := r.recent[inv.Function][:0]
	for _, s := range r.recent[inv.Function] {
		if wall.Sub(s.to) <= time.Minute {
			keep = append(keep, s)
		}
	}
	r.recent[inv.Function] = append(keep, me)
	conc := peakOverlap(r.recent[inv.Function], me)
	r.mu.Unlock()
	const ns = monitoring.NamespaceLambda
	r.store.Put(ns, "Invocations", dims, t, 1)
	r.store.Put(ns, "Errors", dims, t, errs)
	r.store.Put(ns, "Throttles", dims, t, 0)
	r.store.Put(ns, "Duration", dims, t, float64(inv.Duration.Microseconds())/1000)
	r.store.Put(ns, "ConcurrentExecutions", dims, t, float64(conc))
}

// Queues records every queue's gauges once.
func (r *Recorder) Queues(stats []sqsd.QueueStats) {
	t := r.now()
	const ns = monitoring.NamespaceSQS
	for _, q := range stats {
		dims := map[string]string{monitoring.DimQueueName: q.Name}
		r.store.Put(ns, "ApproximateNumberOfMessagesVisible", dims, t, float64(q.Visible))
		r.store.Put(ns, "ApproximateNumberOfMessagesNotVisible", dims, t, float64(q.NotVisible))
		r.store.Put(ns, "ApproximateNumberOfMessagesDelayed", dims, t, float64(q.Delayed))
		r.store.Put(ns, "ApproximateAgeOfOldestMessage", dims, t, q.OldestAge.Seconds())
	}
}

// SampleQueues records the stack's queue gauges every interval (wall time)
// until ctx ends, and once more then.
func (r *Recorder) SampleQueues(ctx context.Context, stack *localaws.Stack, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		r.Queues(stack.QueueStats())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// peakOverlap is the most spans running at one instant within me (me
// among them): at some span's start, every span started by then and not
// yet ended.
func peakOverlap(spans []span, me span) int {
	peak := 1
	for _, at := range spans {
		t := at.from
		if t.Before(me.from) {
			t = me.from
		}
		if t.After(me.to) {
			continue
		}
		n := 0
		for _, s := range spans {
			if !s.from.After(t) && s.to.After(t) || s.from.Equal(t) {
				n++
			}
		}
		peak = max(peak, n)
	}
	return peak
}
