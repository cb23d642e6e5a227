package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// memoryHook runs before before every read of the coordinator's memory of
// a collection's lineage (the highest observed head).
type memoryHook struct {
	gc.Memory
	before func()
}

func (m memoryHook) HighestObserved(ctx context.Context, c string, inc uint64) (uint64, string, error) {
	m.before()
	return m.Memory.HighestObserved(ctx, c, inc)
}

// listerHook runs before before every listing under the manifests prefix
// (the roots above the head).
type listerHook struct {
	gc.Lister
	before func()
}

func (l listerHook) List(ctx context.Context, prefix string, page func([]gc.Listed) error) error {
	// The roots' listing: the manifests prefix, or the collection's whole
	// prefix when it fits one page (one listing serves the sweep).
	if strings.Contains(prefix, "/manifests/") || strings.HasPrefix(contract.ManifestsPrefix("c1"), prefix) {
		l.before()
	}
	return l.Lister.List(ctx, prefix, page)
}

// A sweep reads the head (its walk) before the coordinator's memory and
// the roots above the head; in normal operation the head moves forward in
// between (a commit the observer records at once, two commits whose roots
// the listing finds). That is no head regression: GC must not refuse
// (GCRefused head_regression pages an operator) — it judges the head it
// finds when it reads again. A regression whose head also moves during the
// sweep is still refused, and a head that moves under every read fails
// the task (retried) without deleting or refusing.
func TestGCHeadMovedDuringItsReadsIsNoRegression(t *testing.T) {
	// setup: c1 with two objects a cutover removed two days ago (deletable
	// debt), the coordinator has observed the head.
	setup := func(t *testing.T) (*gcEnv, []contract.ObjectEntry) {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		in := e.add("c1", 2, 0, 0)
		e.commit("c1", in, nil)
		e.reconcile()
		e.clk.Advance(48 * time.Hour)
		e.watermark(e.clk.Now())
		return e, in
	}
	run := func(t *testing.T, e *gcEnv, tune func(*gc.Ports)) (gc.Report, map[string]float64, error) {
		ex, m := e.executorWithPorts(guard.All(), tune, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		return rep, m.Counts(), err
	}
	gone := func(e *gcEnv, in []contract.ObjectEntry) int {
		n := 0
		for _, o := range in {
			if !e.exists(o.Key) {
				n++
			}
		}
		return n
	}

	t.Run("observed advanced after the head read", func(t *testing.T) {
		e, in := setup(t)
		var want contract.Head
		n := 0
		rep, counts, err := run(t, e, func(p *gc.Ports) {
			p.Memory = memoryHook{Memory: p.Memory, before: func() {
				if n++; n == 1 { // the sweep has read the head: a commit, observed at once
					e.add("c1", 1, 0, 0)
					e.reconcile()
					want = headOf(t, e, "c1")
				}
			}}
		})
		if err != nil || rep.Refused != "" || counts["GCRefused|Reason=head_regression"] != 0 {
			t.Fatalf("a head that moved forward after the sweep read it is no regression: %+v %v %v", rep, counts, err)
		}
		if rep.HeadVersion != want.Version || gone(e, in) != 2 {
			t.Fatalf("the sweep judges the fresh head v%d and deletes the due debt: judged v%d, %d of 2 deleted", want.Version, rep.HeadVersion, gone(e, in))
		}
	})

	t.Run("two commits leave roots above the head read", func(t *testing.T) {
		e, in := setup(t)
		var want contract.Head
		n := 0
		rep, counts, err := run(t, e, func(p *gc.Ports) {
			p.Lister = listerHook{Lister: p.Lister, before: func() {
				if n++; n == 1 { // roots v+1 (the head's child) and v+2 (not): the observer has not seen them yet
					e.add("c1", 1, 0, 0)
					e.add("c1", 1, 0, 0)
					want = headOf(t, e, "c1")
				}
			}}
		})
		if err != nil || rep.Refused != "" || counts["GCRefused|Reason=head_regression"] != 0 {
			t.Fatalf("roots committed after the sweep read the head are no regression: %+v %v %v", rep, counts, err)
		}
		if rep.HeadVersion != want.Version || gone(e, in) != 2 {
			t.Fatalf("the sweep judges the fresh head v%d and deletes the due debt: judged v%d, %d of 2 deleted", want.Version, rep.HeadVersion, gone(e, in))
		}
	})

	t.Run("a regression is refused though the head moved during the sweep", func(t *testing.T) {
		e, _ := setup(t)
		e.add("c1", 1, 0, 0)
		e.reconcile() // the coordinator has observed the newest head
		newest := headOf(t, e, "c1")
		if _, err := e.Publisher.Restore(e.ctx, "c1", newest.Version-2); err != nil {
			t.Fatal(err)
		}
		n := 0
		rep, counts, err := run(t, e, func(p *gc.Ports) {
			p.Memory = memoryHook{Memory: p.Memory, before: func() {
				if n++; n == 1 { // the restored lineage commits again (still below the observed head)
					e.add("c1", 1, 0, 0)
				}
			}}
		})
		if err != nil || rep.Refused != gc.RefusedRegression || counts["GCRefused|Reason=head_regression"] != 1 {
			t.Fatalf("want a head_regression refusal: %+v %v %v", rep, counts, err)
		}
		if n < 2 {
			t.Fatalf("the sweep must judge the head it read again (memory read %d times)", n)
		}
	})

	t.Run("a head moving under every read fails the task", func(t *testing.T) {
		e, in := setup(t)
		rep, counts, err := run(t, e, func(p *gc.Ports) {
			p.Memory = memoryHook{Memory: p.Memory, before: func() {
				e.add("c1", 1, 0, 0)
				e.clk.Advance(6 * time.Minute) // past the reconcile queue's deduplication window
				e.reconcile()
			}}
		})
		if !errors.Is(err, gc.ErrHeadMoving) || rep.Refused != "" || counts["GCRefused|Reason=head_regression"] != 0 {
			t.Fatalf("want ErrHeadMoving (the task is retried), no refusal: %+v %v %v", rep, counts, err)
		}
		if g := gone(e, in); g != 0 {
			t.Fatalf("a sweep that never judged a head deleted %d objects", g)
		}
	})
}

func headOf(t *testing.T, e *gcEnv, c string) contract.Head {
	t.Helper()
	h, err := e.Lineage.Head(e.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// advanceHook runs before before the observer's first advance of its
// observed state.
type advanceHook struct {
	observe.StateStore
	before func()
	n      *int
}

func (a advanceHook) Advance(ctx context.Context, st observe.Observed) (observe.Observed, error) {
	if *a.n++; *a.n == 1 {
		a.before()
	}
	return a.StateStore.Advance(ctx, st)
}

// Two head notifications race: one observation reads the head, another
// records a newer head before the first records its own. The first finds
// the observed state above the head it read; reading the head again shows
// the head moved forward, not back: no HeadBelowObserved and no GC sweep
// (the sweep it used to enqueue walked the lineage for nothing, and raced
// the compaction of the newer head). A head really put back still counts
// and still enqueues the sweep that refuses it promptly.
func TestObserverRaceIsNotAHeadBelowObserved(t *testing.T) {
	observer := func(e *gcEnv, state observe.StateStore) (*observe.Observer, *metrics.Recorder) {
		m := metrics.New(resources.FnObserver)
		cfg := observe.ConfigFrom(e.Config.Policy, compact.PolicyFrom(e.Config.Policy.Compaction).Due)
		cl := e.FunctionClients(resources.FnObserver)
		return observe.New(e.Bucket, state, awsio.NewFIFOQueues(cl.SQS, e.Config.QueueURLs), e.CCS, e.clk.Now, cfg, m, e.Log), m
	}
	gcTasks := func(res observe.Result) int {
		n := 0
		for _, tk := range res.Tasks {
			if tk.Kind == contract.KindGC {
				n++
			}
		}
		return n
	}
	t.Run("a newer observation recorded meanwhile", func(t *testing.T) {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		e.add("c1", 1, 0, 0)
		e.reconcile()
		table := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
		other, _ := observer(e, table)
		n := 0
		o, m := observer(e, advanceHook{StateStore: table, n: &n, before: func() {
			e.add("c1", 1, 0, 0) // the head moves and the other observation records it first
			if _, err := other.Observe(e.ctx, "c1"); err != nil {
				t.Fatal(err)
			}
		}})
		res, err := o.Observe(e.ctx, "c1")
		if err != nil || res.Outcome != observe.OutcomeStale || n != 1 {
			t.Fatalf("want the raced observation stale: %+v %v (advances %d)", res, err, n)
		}
		if c := m.Counts(); c["HeadBelowObserved"] != 0 || c["HeadObservationsRaced"] != 1 || gcTasks(res) != 0 {
			t.Fatalf("a head that moved forward is not below what was observed: %v, %d gc tasks", c, gcTasks(res))
		}
	})
	t.Run("a head put back", func(t *testing.T) {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		e.add("c1", 1, 0, 0)
		e.add("c1", 1, 0, 0)
		e.reconcile()
		newest := headOf(t, e, "c1")
		if _, err := e.Publisher.Restore(e.ctx, "c1", newest.Version-1); err != nil {
			t.Fatal(err)
		}
		o, m := observer(e, awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table))
		res, err := o.Observe(e.ctx, "c1")
		if err != nil || res.Outcome != observe.OutcomeStale {
			t.Fatalf("want the restored head stale against what was observed: %+v %v", res, err)
		}
		if c := m.Counts(); c["HeadBelowObserved"] != 1 || c["HeadObservationsRaced"] != 0 || gcTasks(res) != 1 {
			t.Fatalf("a head put back counts and enqueues the sweep that refuses it: %v, %d gc tasks", c, gcTasks(res))
		}
	})
}
