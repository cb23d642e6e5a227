package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/store"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Rule 13 and issue 12 items 1-2, through the real SDK retryer: the
// embedded stack applies a request and then answers 500 (or drops the
// connection), the SDK sends the identical request again, and the product
// must still run the task exactly once.

// bodyHas matches requests whose body contains s.
func bodyHas(s string) func(*http.Request, []byte) bool {
	return func(_ *http.Request, b []byte) bool { return bytes.Contains(b, []byte(s)) }
}

// The lease acquire's first attempt is applied, its answer lost; the retry
// fails its condition on our own lease. Recognised as ours, the task runs
// once; without the own_write guard it is taken for another holder's and
// the task never runs.
func TestLeaseAcquireAppliedAnswerLostRunsTaskOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		g       guard.Set
		mode    localaws.FaultMode
		reports int
	}{
		{"guarded/500", guard.All(), localaws.ApplyThenFail, 1},
		{"guarded/reset", guard.All(), localaws.ApplyThenReset, 1},
		{"own_write_off", without(t, "own_write"), localaws.ApplyThenFail, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := cxStart(t, localenv.Options{NoDelivery: true})
			cxSetup(t, env, "c1", 4)
			_, body := cxTask(t, env, "c1")
			rep := &countingReporter{inner: handoffQueue(env)}
			g := tc.g
			cxRegisterCompaction(env, app.CompactionOptions{Guards: &g, Reporter: rep})
			f := env.Stack.InjectFault(localaws.Fault{Service: "dynamodb", Operation: "UpdateItem", Mode: tc.mode,
				Match: bodyHas("attribute_not_exists(#pk)")}) // the acquire
			before := env.Stack.Counter().Snapshot()
			failed, _ := cxInvoke(t, env, resources.FnCompaction, body)
			calls := env.Stack.Counter().Since(before)
			if f.Hits() != 1 {
				t.Fatalf("fault struck %d times, want 1", f.Hits())
			}
			if len(failed) != 0 {
				t.Fatalf("batch failures %v", failed)
			}
			if rep.count() != tc.reports {
				t.Fatalf("completions reported %d, want %d (calls %v)", rep.count(), tc.reports, calls)
			}
			cxHandoff(t, env)
			if cuts := cxCutovers(cxLineage(t, env, "c1")); len(cuts) != tc.reports {
				t.Fatalf("%d cutovers, want %d", len(cuts), tc.reports)
			}
			// A redelivery finds the task done: still exactly once.
			cxInvoke(t, env, resources.FnCompaction, body)
			if rep.count() != tc.reports {
				t.Fatalf("redelivery reported again: %d", rep.count())
			}
		})
	}
}

// Complete and the completion report are applied, their answers lost: the
// retries succeed on their own writes (their conditions still hold, FIFO
// deduplication drops the second report) and the task runs once.
func TestCompleteAndReportAppliedAnswerLostRunOnce(t *testing.T) {
	env := cxStart(t, localenv.Options{NoDelivery: true})
	cxSetup(t, env, "c1", 4)
	_, body := cxTask(t, env, "c1")
	fc := env.Stack.InjectFault(localaws.Fault{Service: "dynamodb", Operation: "UpdateItem", Match: bodyHas("SET #d = :true")})
	fr := env.Stack.InjectFault(localaws.Fault{Service: "sqs", Operation: "SendMessageBatch", Match: bodyHas(env.Prov.QueueURLs[resources.QueueHandoff])})
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) != 0 {
		t.Fatalf("batch failures %v", failed)
	}
	if fc.Hits() != 1 || fr.Hits() != 1 {
		t.Fatalf("faults struck complete %d, report %d; want 1 each", fc.Hits(), fr.Hits())
	}
	if n := cxHandoff(t, env); n != 1 {
		t.Fatalf("%d completions queued, want 1", n)
	}
	if cuts := cxCutovers(cxLineage(t, env, "c1")); len(cuts) != 1 {
		t.Fatalf("%d cutovers, want 1", len(cuts))
	}
}

func registerObserver(env *localenv.Env, g guard.Set) {
	env.Stack.RegisterFunction(resources.FnObserver, app.ObserverHandlerWith(env.Config, env.FunctionClients(resources.FnObserver), cxRuntime(env), g).Handle, 30*time.Second)
}

// The observed-state advance is applied and its answer lost; the retry's
// old image is our own write. Recognised (or, failing that, re-derived as
// a duplicate), the head's task is enqueued; with both guards off the
// observation reports a duplicate and enqueues nothing.
func TestObservedAdvanceAppliedAnswerLostEnqueues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     guard.Set
		depth int
	}{
		{"guarded", guard.All(), 1},
		{"own_write_off", without(t, "own_write"), 1}, // the duplicate re-derives it
		{"own_write_and_duplicate_rederive_off", without(t, "own_write", "duplicate_rederive"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newHeldEnv(t)
			registerObserver(env, tc.g)
			evs := commitHeld(t, env, "c1", 3)
			f := env.Stack.InjectFault(localaws.Fault{Service: "dynamodb", Operation: "UpdateItem", Match: bodyHas("#v < :v")})
			if _, err := deliver(t, env, evs[len(evs)-1]); err != nil {
				t.Fatal(err)
			}
			if f.Hits() != 1 {
				t.Fatalf("fault struck %d times", f.Hits())
			}
			if d := queueDepth(t, env, resources.QueueCompaction); d != tc.depth {
				t.Fatalf("compaction queue depth %d, want %d", d, tc.depth)
			}
		})
	}
}

// Item 2: the advance succeeds, the enqueue and its revert both fail
// (every SDK attempt), the event is retried: the duplicate observation
// re-derives and re-enqueues the head's task. Without duplicate_rederive
// the task is lost until reconciliation.
func TestLostEnqueueIsReenqueuedByTheRetriedEvent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     guard.Set
		depth int
	}{{"guarded", guard.All(), 1}, {"duplicate_rederive_off", without(t, "duplicate_rederive"), 0}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newHeldEnv(t)
			registerObserver(env, tc.g)
			evs := commitHeld(t, env, "c1", 3)
			fs := env.Stack.InjectFault(localaws.Fault{Service: "sqs", Operation: "SendMessageBatch", Mode: localaws.FailBeforeApply, Times: 10})
			fr := env.Stack.InjectFault(localaws.Fault{Service: "dynamodb", Operation: "PutItem", Mode: localaws.FailBeforeApply, Times: 10})
			fd := env.Stack.InjectFault(localaws.Fault{Service: "dynamodb", Operation: "DeleteItem", Mode: localaws.FailBeforeApply, Times: 10})
			if _, err := deliver(t, env, evs[len(evs)-1]); err == nil {
				t.Fatal("first delivery: want the enqueue failure reported")
			}
			if fs.Hits() == 0 || fr.Hits()+fd.Hits() == 0 {
				t.Fatalf("faults struck send %d, revert %d/%d", fs.Hits(), fr.Hits(), fd.Hits())
			}
			fs.Remove()
			fr.Remove()
			fd.Remove()
			if queueDepth(t, env, resources.QueueCompaction) != 0 {
				t.Fatal("a task was enqueued despite the failure")
			}
			if _, err := deliver(t, env, evs[len(evs)-1]); err != nil { // Lambda's retry of the event
				t.Fatal(err)
			}
			if d := queueDepth(t, env, resources.QueueCompaction); d != tc.depth {
				t.Fatalf("compaction queue depth %d after the retried event, want %d", d, tc.depth)
			}
		})
	}
}

// An operator's lease release is applied and its answer lost; the SDK's
// retry fails its condition (the epoch moved) on our own release, which
// is recognised: the release reports success, not "the lease moved".
func TestLeaseReleaseAppliedAnswerLostSucceeds(t *testing.T) {
	env := start(t, localenv.Options{NoDelivery: true})
	ctx := context.Background()
	tbl := awsio.NewLeaseTable(env.Clients.Dynamo, env.Config.Table)
	now := time.Now()
	tk := contract.NewTask(contract.KindCompaction, "c1", 3, "sha256:"+strings.Repeat("0", 64), 1, now.UnixMilli())
	l, err := lease.New(tbl, guard.All()).Acquire(ctx, tk, "worker-A", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := env.Stack.InjectFault(localaws.Fault{Service: "dynamodb", Operation: "UpdateItem", Match: bodyHas("#ep + :one")})
	got, err := tbl.Release(ctx, l, "recovered-by:op", now.Add(time.Second).UnixMilli())
	if err != nil || f.Hits() != 1 || got.Lease.LeaseEpoch != l.LeaseEpoch+1 || got.Lease.Holder != "recovered-by:op" {
		t.Fatalf("release: %+v %v (fault hits %d), want success at epoch %d", got, err, f.Hits(), l.LeaseEpoch+1)
	}
	// A release planned on a lease that moved since is still refused.
	if _, err := tbl.Release(ctx, l, "recovered-by:op", now.Add(2*time.Second).UnixMilli()); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("stale release: %v, want refused", err)
	}
}

// The observer's compensation (revert the advance when the enqueue failed)
// is applied and its answer lost; the retry is refused by our own revert,
// which is recognised as done.
func TestObservedRevertAppliedAnswerLostSucceeds(t *testing.T) {
	env := start(t, localenv.Options{NoDelivery: true})
	ctx := context.Background()
	tbl := awsio.NewObservedTable(env.Clients.Dynamo, env.Config.Table)
	sum := "sha256:" + strings.Repeat("1", 64)
	prev := observe.Observed{Collection: "c1", Version: 2, Checksum: sum, ObservedAtUnixMs: 1}
	st := observe.Observed{Collection: "c1", Version: 3, Checksum: sum, ObservedAtUnixMs: 2}
	for _, tc := range []struct {
		name string
		prev observe.Observed
		op   string
	}{{"back_to_prev", prev, "PutItem"}, {"back_to_nothing", observe.Observed{Collection: "c1"}, "DeleteItem"}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prev.Version > 0 {
				if _, err := tbl.Advance(ctx, tc.prev); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tbl.Advance(ctx, st); err != nil {
				t.Fatal(err)
			}
			f := env.Stack.InjectFault(localaws.Fault{Service: "dynamodb", Operation: tc.op})
			if err := tbl.Revert(ctx, st, tc.prev); err != nil || f.Hits() != 1 {
				t.Fatalf("revert: %v (fault hits %d), want success", err, f.Hits())
			}
			if cur, _ := tbl.Get(ctx, "c1", 1); cur.Version != tc.prev.Version {
				t.Fatalf("state v%d after the revert, want v%d", cur.Version, tc.prev.Version)
			}
		})
	}
}

// Issue 16 item 7: under a frozen clock (the demo's) a head event
// delivered twice within the same millisecond is a duplicate event, not
// our own write retried: the second observation's advance is refused by
// the first one's state, which has the same version, checksum and
// observation time but another observation id.
func TestDuplicateEventSameMillisecondIsNotOwnWrite(t *testing.T) {
	frozen := time.Now()
	env := start(t, localenv.Options{HoldS3Events: true, NoDelivery: true, Policy: mergePolicy(3), Now: func() time.Time { return frozen }})
	if err := env.Workload.Create(context.Background(), "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	env.Stack.TakeS3Events()
	evs := commitHeld(t, env, "c1", 3)
	for range 2 {
		if _, err := deliver(t, env, evs[len(evs)-1]); err != nil {
			t.Fatal(err)
		}
	}
	if own, dup := cxMetric(env, "OwnWritesRecognised"), cxMetric(env, "DuplicateEventsAbsorbed"); own != 0 || dup != 1 {
		t.Fatalf("OwnWritesRecognised %v, DuplicateEventsAbsorbed %v; want 0 and 1", own, dup)
	}
}
