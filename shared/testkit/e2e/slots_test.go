package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Issue 16 item 3: a class's concurrency holds across instances. Ten
// instances (each its own adapter, racing on the one slots item with
// conditional writes on the embedded DynamoDB) take and give back slots of
// a class limited to three; no instance ever holds a slot while three
// others do, and the item never names more than three live holders.
func TestClassSlotsNeverExceedTheLimitAcrossInstances(t *testing.T) {
	// Instances race conditional UpdateItems on the slots item; moto_server
	// lets two updates conditioned on one version both win (CI: a released
	// slot was re-added by a lost race), DynamoDB and the embedded stack do not.
	embeddedOnly(t, conditionalRaces)
	env := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := context.Background()
	const (
		instances = 10
		limit     = 3
		rounds    = 12
	)
	now := time.UnixMilli(1_800_000_000_000)
	var running, maxRunning, taken, refused atomic.Int64
	var released holderSet
	var wg sync.WaitGroup
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots := awsio.NewSlots(env.Clients.Dynamo, env.Config.Table)
			for r := range rounds {
				holder := fmt.Sprintf("instance-%d/task-%d", i, r)
				g, err := slots.Acquire(ctx, "compaction", holder, limit, now, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !g.Taken {
					refused.Add(1)
					continue
				}
				taken.Add(1)
				n := running.Add(1)
				for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
				}
				if h, err := slots.Holders(ctx, "compaction", now); err != nil || len(h) > limit {
					t.Errorf("holders %v (err %v), want at most %d", h, err, limit)
				}
				time.Sleep(5 * time.Millisecond) // hold it a while (the others keep trying)
				running.Add(-1)
				if err := slots.Release(ctx, "compaction", holder, now); err != nil {
					t.Error(err)
				}
				released.Store(holder)
			}
		}()
	}
	wg.Wait()
	if maxRunning.Load() > limit || taken.Load() == 0 {
		t.Fatalf("at most %d ran at once (limit %d), %d slots taken, %d refused", maxRunning.Load(), limit, taken.Load(), refused.Load())
	}
	// Every taken slot was released. A holder may remain only from an
	// acquisition that was answered "not taken" after its write was
	// ambiguous (a request that timed out under load and was applied after
	// the re-read): it holds nothing anyone runs and frees at its lease
	// end, like a crashed holder's.
	slots := awsio.NewSlots(env.Clients.Dynamo, env.Config.Table)
	h, _ := slots.Holders(ctx, "compaction", now)
	for holder := range h {
		if released.Load(holder) {
			t.Fatalf("every taken slot was released, yet the item names %s (of %v)", holder, h)
		}
	}
	if left, _ := slots.Holders(ctx, "compaction", now.Add(time.Minute+time.Millisecond)); len(left) != 0 {
		t.Fatalf("after every lease ended the item still names %v", left)
	}
	if len(h) > 0 {
		t.Logf("holders left by acquisitions answered not taken (freed at their lease end): %v", h)
	}
	t.Logf("%d instances x %d rounds, limit %d: %d taken, %d refused, at most %d at once", instances, rounds, limit, taken.Load(), refused.Load(), maxRunning.Load())
}

// A holder that crashes never releases: its slot frees when its lease
// ends (the consumer's timeout plus clock skew in production), not before.
func TestClassSlotOfACrashedHolderFreesAtItsLeaseEnd(t *testing.T) {
	env := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := context.Background()
	slots := awsio.NewSlots(env.Clients.Dynamo, env.Config.Table)
	t0 := time.UnixMilli(1_800_000_000_000)
	const lease = 30 * time.Second
	for i := range 2 {
		if g, err := slots.Acquire(ctx, "gc", fmt.Sprintf("crashed-%d", i), 2, t0, lease); err != nil || !g.Taken {
			t.Fatalf("fill slot %d: %+v %v", i, g, err)
		}
	}
	g, err := slots.Acquire(ctx, "gc", "waiting", 2, t0.Add(lease-time.Second), lease)
	if err != nil || g.Taken || g.FreeIn != time.Second {
		t.Fatalf("before the crashed holders' lease end: %+v %v, want refused, free in 1s", g, err)
	}
	g, err = slots.Acquire(ctx, "gc", "waiting", 2, t0.Add(lease), lease)
	if err != nil || !g.Taken || g.Holders != 1 {
		t.Fatalf("at the crashed holders' lease end: %+v %v, want taken with the expired holders dropped", g, err)
	}
}

// lossyDynamo applies the first UpdateItem and then answers it with a
// lost answer (an ambiguous timeout), or, with retry set, sends it a
// second time as the SDK does after a lost answer.
type lossyDynamo struct {
	awsio.DynamoAPI
	retry bool
	done  atomic.Bool
}

func (l *lossyDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.DynamoAPI.UpdateItem(ctx, in, opts...)
	if err != nil || l.done.Swap(true) {
		return out, err
	}
	if l.retry {
		return l.DynamoAPI.UpdateItem(ctx, in, opts...) // refused: ver moved, by our own write
	}
	return nil, fmt.Errorf("answer lost: %w", context.DeadlineExceeded)
}

// An applied acquisition whose answer was lost (or whose SDK retry was
// refused by its own write) is the caller's slot: taken once, neither
// leaked nor taken twice, and released by its name.
func TestClassSlotOwnWriteIsRecognised(t *testing.T) {
	env := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	for _, retry := range []bool{false, true} {
		class := fmt.Sprintf("compaction-retry-%v", retry)
		slots := awsio.NewSlots(&lossyDynamo{DynamoAPI: env.Clients.Dynamo, retry: retry}, env.Config.Table)
		g, err := slots.Acquire(ctx, class, "me", 1, now, time.Minute)
		if err != nil || !g.Taken {
			t.Fatalf("retry=%v: %+v %v, want the slot (our own write applied)", retry, g, err)
		}
		clean := awsio.NewSlots(env.Clients.Dynamo, env.Config.Table)
		if h, _ := clean.Holders(ctx, class, now); len(h) != 1 {
			t.Fatalf("retry=%v: holders %v, want exactly me", retry, h)
		}
		if g, _ := clean.Acquire(ctx, class, "other", 1, now, time.Minute); g.Taken {
			t.Fatalf("retry=%v: a second holder took the only slot", retry)
		}
		if err := clean.Release(ctx, class, "me", now); err != nil {
			t.Fatal(err)
		}
		if g, _ := clean.Acquire(ctx, class, "other", 1, now, time.Minute); !g.Taken {
			t.Fatalf("retry=%v: the released slot was not free", retry)
		}
	}
}

// A task that finds every slot of its class taken is deferred: it stays
// in (or returns to) its queue, is never dropped and never reaches the
// DLQ however often it is deferred (past the queue's maxReceiveCount: the
// last receives re-send it fresh to its own queue), and runs once a slot
// frees. Driven through the deployed GC and compaction handlers on the
// embedded stack, so under make e2e-iam each role's DeferTasks statement
// is exercised.
func TestDeferredTaskIsNeverDroppedAndRunsWhenASlotFrees(t *testing.T) {
	for _, tc := range []struct {
		kind  contract.TaskKind
		queue string
		fn    string
		bound func(*policy.Policy)
		ran   func(env *localenv.Env) bool
	}{
		{contract.KindGC, resources.QueueGC, resources.FnGC,
			func(p *policy.Policy) { p.Budgets.ClassConcurrency.GC = 1 },
			func(env *localenv.Env) bool {
				return metricDim(env, "GCTasksRun", "Kind", string(contract.KindGC)) == 1
			}},
		{contract.KindCompaction, resources.QueueCompaction, resources.FnCompaction,
			func(p *policy.Policy) {
				p.Budgets.ClassConcurrency.Compaction = 1
				p.Compaction.StartQuiet = 0 // only the class bound defers here
			},
			// One append leaves nothing to merge: the run ends without a
			// failure and without another deferral (asserted below).
			func(env *localenv.Env) bool { return true }},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			p := policy.Default()
			tc.bound(&p)
			p.Budgets.DeferDelay = policy.Duration(time.Second)
			env := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true, Policy: &p})
			ctx := context.Background()
			if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
				t.Fatal(err)
			}
			head, err := env.Workload.Append(ctx, "c1", []workload.Write{{Key: "k1", Payload: []byte("v1")}})
			if err != nil {
				t.Fatal(err)
			}
			task := contract.NewTask(tc.kind, "c1", head.Version, head.ManifestChecksum, 1, time.Now().UnixMilli())
			if !tc.kind.Rewrites() {
				task = contract.NewSweepTask(tc.kind, "c1", head.Version, head.ManifestChecksum, 1, time.Now().UnixMilli())
			}
			if err := awsio.NewFIFOQueues(env.Clients.SQS, env.Prov.QueueURLs).Enqueue(ctx, []contract.Task{task}); err != nil {
				t.Fatal(err)
			}
			// Another instance runs a task of the class: its only slot is taken.
			slots := awsio.NewSlots(env.Clients.Dynamo, env.Config.Table)
			if g, err := slots.Acquire(ctx, string(tc.kind), "other-instance", 1, time.Now(), time.Hour); err != nil || !g.Taken {
				t.Fatalf("take the slot: %+v %v", g, err)
			}
			q, _ := resources.Default("bcc").Queue(tc.queue)
			deliver := func() (failed int, ok bool) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					resp, ok, err := env.Stack.DeliverBatch(ctx, env.Prov.QueueURLs[tc.queue], tc.fn, 1)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						var r struct{ BatchItemFailures []json.RawMessage }
						if err := json.Unmarshal(resp, &r); err != nil && len(resp) > 0 && string(resp) != "null" {
							t.Fatal(err)
						}
						return len(r.BatchItemFailures), true
					}
					time.Sleep(100 * time.Millisecond)
				}
				return 0, false
			}
			deferrals := q.MaxReceiveCount + 3
			for i := range deferrals {
				if _, ok := deliver(); !ok {
					t.Fatalf("deferral %d: the task is gone from its queue", i)
				}
				if n := dlqDepth(t, env, tc.queue); n != 0 {
					t.Fatalf("after %d deferrals the DLQ holds %d messages", i+1, n)
				}
			}
			if d := metricDim(env, "TasksDeferred", "Kind", string(tc.kind)); d != float64(deferrals) {
				t.Fatalf("TasksDeferred{Kind=%s} = %v, want %d", tc.kind, d, deferrals)
			}
			if err := slots.Release(ctx, string(tc.kind), "other-instance", time.Now()); err != nil {
				t.Fatal(err)
			}
			failed, ok := deliver()
			if !ok || failed != 0 {
				t.Fatalf("once the slot freed the task should run: delivered %v, %d failures", ok, failed)
			}
			if !tc.ran(env) {
				t.Fatalf("the deferred %s task did not run once", tc.kind)
			}
			if d := metricDim(env, "TasksDeferred", "Kind", string(tc.kind)); d != float64(deferrals) {
				t.Fatalf("after the slot freed TasksDeferred{Kind=%s} = %v, want still %d", tc.kind, d, deferrals)
			}
			if n, d := queueDepth(t, env, tc.queue), dlqDepth(t, env, tc.queue); n != 0 || d != 0 {
				t.Fatalf("after the run: queue %d, DLQ %d, want both empty", n, d)
			}
			if h, _ := slots.Holders(ctx, string(tc.kind), time.Now()); len(h) != 0 {
				t.Fatalf("the run gave its slot back, yet holders are %v", h)
			}
		})
	}
}

// holderSet is a set of holder names safe for concurrent use.
type holderSet struct{ m sync.Map }

func (s *holderSet) Store(h string)     { s.m.Store(h, true) }
func (s *holderSet) Load(h string) bool { _, ok := s.m.Load(h); return ok }
