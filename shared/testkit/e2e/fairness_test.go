package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// drain delivers class's queue to fn one message at a time (one consumer:
// the tightest concurrency) until it is empty; at most limit deliveries.
func drain(t *testing.T, env *localenv.Env, class, fn string, limit int) int {
	t.Helper()
	n := 0
	for ; n < limit; n++ {
		_, ok, err := env.Stack.DeliverBatch(context.Background(), env.Prov.QueueURLs[class], fn, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return n
		}
		cxSettle(t, env)
	}
	t.Fatalf("%s queue not empty after %d deliveries", class, limit)
	return n
}

// Issue 16 item 2 (fairness across collections): one collection with a
// GC backlog many times one sweep's bound, four with a small one, one
// gc consumer. A sweep is one bounded slice (gc.max_sweep_candidates);
// the rest continues as a fresh task at the tail of the queue. So each
// small collection is swept within the first five gc tasks (at most one
// slice of the big one ahead of it: the documented bound, one slice per
// collection ahead), and the big backlog is still swept to the end in
// the same reconcile interval (the queue otherwise idle), not one slice
// per reconciliation.
func TestHugeGCBacklogDoesNotStarveOtherCollections(t *testing.T) {
	clock := newCxClock()
	p := cxPolicy(4)
	p.GC.TokenLifetime, p.GC.RetentionWindow = policy.Duration(time.Minute), policy.Duration(time.Minute)
	p.GC.SweepInterval = policy.Duration(24 * time.Hour)
	p.GC.MaxSweepCandidates = 8 // two compactions' removals
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: p})
	ctx := context.Background()
	settle := func() {
		for drain(t, env, resources.QueueCompaction, resources.FnCompaction, 100)+drain(t, env, resources.QueueHandoff, resources.FnHandoff, 100) > 0 {
		}
	}
	small := []string{"s1", "s2", "s3", "s4"}
	for _, c := range append([]string{"big"}, small...) {
		if err := env.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 12 { // 12 compactions of 4 appends (and 3 of level 1): ~60 objects dereferenced
		cxAppend(t, env, "big", 4)
		cxSettle(t, env)
		settle()
	}
	for _, c := range small {
		cxAppend(t, env, c, 4)
		cxSettle(t, env)
		settle()
	}
	removed := func(c string) []string {
		var keys []string
		for _, r := range cxLineage(t, env, c) {
			for _, o := range r.Change.Removed {
				keys = append(keys, o.Key)
			}
		}
		return keys
	}
	left := func(c string) int {
		n := 0
		for _, k := range removed(c) {
			if _, err := env.Bucket.Get(ctx, k); err == nil {
				n++
			}
		}
		return n
	}
	// Sweeps the observer enqueued while the collections were written find
	// nothing eligible yet (inside the token lifetime): run them first.
	drain(t, env, resources.QueueGC, resources.FnGC, 100)
	backlog := left("big")
	if backlog < 4*p.GC.MaxSweepCandidates {
		t.Fatalf("big backlog %d objects, want at least 4 sweeps' worth (%d)", backlog, 4*p.GC.MaxSweepCandidates)
	}
	for _, c := range small {
		if n := left(c); n != 4 {
			t.Fatalf("%s: %d dereferenced objects, want 4", c, n)
		}
	}

	// Record the order in which the gc function runs the collections' tasks.
	var mu sync.Mutex
	var order []string
	gcH := app.GCHandler(env.Config, env.FunctionClients(resources.FnGC), cxRuntime(env))
	env.Stack.RegisterFunction(resources.FnGC, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for _, r := range ev.Records {
			if tk, err := contract.DecodeTask(r.MessageId, []byte(r.Body)); err == nil {
				mu.Lock()
				order = append(order, tk.Collection)
				mu.Unlock()
			}
		}
		return gcH.Handle(ctx, ev)
	}, 5*time.Minute)

	clock.Advance(10 * time.Minute) // past token lifetime and retention window
	if err := env.Watermark.Publish(ctx, clock.Now(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Reconcile(ctx); err != nil { // one pass: one sweep per collection
		t.Fatal(err)
	}
	runs := drain(t, env, resources.QueueGC, resources.FnGC, 200)
	t.Logf("gc tasks in order: %v", order)
	for _, c := range small {
		i := slices.Index(order, c)
		if i < 0 || i >= 1+len(small) {
			t.Errorf("%s first swept as gc task #%d, want within the first %d (one slice per collection ahead)", c, i+1, 1+len(small))
		}
		if n := left(c); n != 0 {
			t.Errorf("%s: %d dereferenced objects left", c, n)
		}
	}
	bigRuns := 0
	for _, c := range order {
		if c == "big" {
			bigRuns++
		}
	}
	if n := left("big"); n != 0 {
		t.Errorf("big: %d of %d dereferenced objects left after one reconcile pass and %d gc tasks", n, backlog, runs)
	}
	if cont := metricDim(env, "SweepsContinued", "Kind", string(contract.KindGC)); cont < 3 || int(cont) != bigRuns-1 {
		t.Errorf("SweepsContinued %v, want big's runs - 1 = %d (at least 3)", cont, bigRuns-1)
	}
	// No two of big's slices back to back while a small one waited.
	for i := 1; i < len(order); i++ {
		if order[i] == "big" && order[i-1] == "big" && slices.ContainsFunc(order[i+1:], func(c string) bool { return c != "big" }) {
			t.Errorf("big ran twice in a row at #%d while another collection waited: %v", i+1, order)
		}
	}
}

// Issue 16 item 2 (priority across the rewrite classes): a collection
// whose lifecycle transition is due and whose compaction is due too. The
// transition goes first (both rewrite the same base) until compaction has
// been due without a cutover for compaction.max_wait_behind_transition_ms;
// then compaction gets its turn, and after a turn of that length the
// transition again. Nothing runs here (no consumer): each reconciliation's
// rewrite is read off the compaction queue.
func TestDueCompactionGetsItsTurnBehindTransitions(t *testing.T) {
	clock := newCxClock()
	p := cxPolicy(4)
	p.Compaction.MaxWaitBehindTransition = policy.Duration(90 * time.Minute)
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: p})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", toCold); err != nil { // cold after 1 h
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 4) // compaction due from now on
	cxSettle(t, env)
	cxReceive(t, env, resources.QueueCompaction) // the observer's compaction task: never run
	rewrite := func(after time.Duration) contract.TaskKind {
		t.Helper()
		clock.Advance(after)
		if _, err := env.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		var kinds []contract.TaskKind
		for _, b := range cxReceive(t, env, resources.QueueCompaction) {
			tk, err := contract.DecodeTask("q", []byte(b))
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, tk.Kind)
		}
		if len(kinds) != 1 {
			t.Fatalf("reconciliation enqueued rewrites %v, want exactly one", kinds)
		}
		return kinds[0]
	}
	for _, step := range []struct {
		after time.Duration
		want  contract.TaskKind
	}{
		{70 * time.Minute, contract.KindLifecycleTransition}, // transition due 10 min, compaction 70 min: the transition first
		{30 * time.Minute, contract.KindCompaction},          // compaction due 100 min: its turn
		{70 * time.Minute, contract.KindCompaction},          // 170 min: still its turn (90..180)
		{20 * time.Minute, contract.KindLifecycleTransition}, // 190 min: the transition's turn (180..270)
	} {
		if got := rewrite(step.after); got != step.want {
			t.Fatalf("after +%v: %s enqueued, want %s", step.after, got, step.want)
		}
	}
	// The age of the waiting classes is on the signals meanwhile.
	if metricDim(env, "DueWork", "Kind", string(contract.KindCompaction)) != 4 || metricDim(env, "DueWork", "Kind", string(contract.KindLifecycleTransition)) != 4 {
		t.Fatalf("DueWork compaction %v, transition %v; want 4 passes each", metricDim(env, "DueWork", "Kind", string(contract.KindCompaction)),
			metricDim(env, "DueWork", "Kind", string(contract.KindLifecycleTransition)))
	}
}
