package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

var toCold = contract.Lifecycle{TransitionAfterMs: time.Hour.Milliseconds(), TransitionToTier: contract.TierCold}

// headObjects returns every object of c's committed head.
func headObjects(t *testing.T, env *localenv.Env, c string) (contract.Head, []contract.ObjectEntry) {
	t.Helper()
	ctx := context.Background()
	head, root, err := env.Lineage.HeadRoot(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var out []contract.ObjectEntry
	if err := env.Lineage.Each(ctx, &root, nil, func(o contract.ObjectEntry) error { out = append(out, o); return nil }); err != nil {
		t.Fatal(err)
	}
	return head, out
}

func tiers(objs []contract.ObjectEntry) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.Tier]++
	}
	return n
}

// Appends, then the clock passes transition_after_ms: the observer sees
// the transition due from the next head's part references, enqueues a
// lifecycle_transition, the executor copies the objects into the target
// tier, the handoff cuts over through the publisher, and the head's old
// objects are all cold while every key still reads its latest value.
func TestLifecycleTransitionEndToEnd(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	clock := newCxClock()
	env := cxStart(t, localenv.Options{Now: clock.Now, Policy: cxPolicy(100)})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", toCold); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 4)
	cxSettle(t, env)
	if _, objs := headObjects(t, env, "c1"); tiers(objs)[contract.TierCold] != 0 || cxMetric(env, "LifecycleTransitions") != 0 {
		t.Fatalf("young objects moved: tiers %v, LifecycleTransitions %v", tiers(objs), cxMetric(env, "LifecycleTransitions"))
	}
	before := cxVerify(t, env, "c1")
	clock.Advance(2 * time.Hour)
	// The next head (one young append) is observed with the four old
	// objects due. (Reconciliation enqueues a transition that became due
	// without a new head: TestReconcileEnqueuesTransitionThatBecameDue; it
	// also schedules GC, whose orphan reclaim would judge fresh outputs by
	// the emulator's wall-clock LastModified against this advanced clock.)
	cxAppend(t, env, "c1", 1)
	cxSettle(t, env)
	head, objs := headObjects(t, env, "c1")
	if head.Version <= before.Version+1 || tiers(objs)[contract.TierCold] != 4 || tiers(objs)[contract.TierHot] != 1 {
		t.Fatalf("head v%d (was v%d): tiers %v, want 4 cold + the young append hot", head.Version, before.Version, tiers(objs))
	}
	for _, o := range objs {
		if o.Tier == contract.TierCold && !strings.Contains(o.Key, "/data/l0/lifecycletransition-") {
			t.Fatalf("%s is not a transition output at its input's level", o.Key)
		}
	}
	roots := cxLineage(t, env, "c1")
	if roots[0].Origin.Kind != contract.OriginCutover {
		t.Fatalf("head v%d origin %+v, want the transition's cutover", roots[0].Version, roots[0].Origin)
	}
	cxVerify(t, env, "c1")
	if cxMetric(env, "LifecycleObjectsMoved") != 4 || cxMetric(env, "CutoversAccepted") < 1 {
		t.Fatalf("LifecycleObjectsMoved %v CutoversAccepted %v", cxMetric(env, "LifecycleObjectsMoved"), cxMetric(env, "CutoversAccepted"))
	}
}

// transitionHook runs a hook before the first write of a transition output.
type transitionHook struct {
	*awsio.Bucket
	once sync.Once
	hook func()
}

func (h *transitionHook) Put(ctx context.Context, key string, body []byte) (string, error) {
	if strings.Contains(key, "/lifecycletransition-") {
		h.once.Do(h.hook)
	}
	return h.Bucket.Put(ctx, key, body)
}

func (h *transitionHook) Create(ctx context.Context, key string) (store.Upload, error) {
	if strings.Contains(key, "/lifecycletransition-") {
		h.once.Do(h.hook)
	}
	return h.Bucket.Create(ctx, key)
}

func (h *transitionHook) PutIfAbsent(ctx context.Context, key string, body []byte) (string, error) {
	if strings.Contains(key, "/lifecycletransition-") {
		h.once.Do(h.hook)
	}
	return h.Bucket.PutIfAbsent(ctx, key, body)
}

func (h *transitionHook) CreateIfAbsent(ctx context.Context, key string) (store.Upload, error) {
	if strings.Contains(key, "/lifecycletransition-") {
		h.once.Do(h.hook)
	}
	return h.Bucket.CreateIfAbsent(ctx, key)
}

// An append committed while a transition copies: the result is not
// published (base revalidation before reporting), the next cycle moves the
// objects from the new head, and no write is lost. With base revalidation
// off the permissive publisher rebases the stale result onto the new head.
func TestLifecycleTransitionStaleAfterConcurrentAppend(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	for _, tc := range []struct {
		name          string
		g             guard.Set
		wantViolation bool
	}{{"guarded", guard.All(), false}, {"base_revalidation_off", without(t, "base_revalidation"), true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newCxClock()
			pol := cxPolicy(100)
			pol.PublisherConflictCheck = false // the coordinator's own drop, against a permissive publisher
			env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: pol, Publisher: publisher.Options{AcceptRebase: true}})
			ctx := context.Background()
			if err := env.Workload.Create(ctx, "c1", toCold); err != nil {
				t.Fatal(err)
			}
			cxAppend(t, env, "c1", 3)
			cxSettle(t, env)
			clock.Advance(2 * time.Hour)
			task, body := transitionTask(t, env, "c1")
			rep := &countingReporter{inner: handoffQueue(env)}
			g := tc.g
			cxRegisterCompaction(env, app.CompactionOptions{Guards: &g, Reporter: rep, Objects: func(b *awsio.Bucket) compact.Objects {
				return &transitionHook{Bucket: b, hook: func() {
					var puts []workload.Write
					for _, w := range env.Workload.Random() {
						if !w.Delete {
							puts = append(puts, w)
						}
					}
					if _, err := env.Workload.Append(ctx, "c1", puts); err != nil {
						t.Error(err)
					}
				}}
			}})
			cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
			if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
				t.Fatal("transition failed")
			}
			reqBase := map[string]uint64{}
			bodies := cxReceive(t, env, resources.QueueHandoff)
			for _, b := range bodies {
				c, err := contract.DecodeCompletion("test", []byte(b))
				if err != nil {
					t.Fatal(err)
				}
				reqBase[contract.CutoverRequestID(c.TaskID, *c.Coverage)] = c.BaseManifestVersion
			}
			if len(bodies) > 0 {
				cxInvoke(t, env, resources.FnHandoff, bodies...)
			}
			rebased := rebasedCutovers(t, env, "c1", reqBase)
			if got := len(rebased) > 0; got != tc.wantViolation {
				t.Fatalf("stale transition of v%d rebased onto the new head = %v %v (reported %d), want %v", task.BaseManifestVersion, got, rebased, rep.count(), tc.wantViolation)
			}
			if !tc.wantViolation {
				if rep.count() != 0 || cxMetric(env, "StaleResultsDropped") < 1 {
					t.Fatalf("stale result reported %d times, StaleResultsDropped %v", rep.count(), cxMetric(env, "StaleResultsDropped"))
				}
				if _, objs := headObjects(t, env, "c1"); tiers(objs)[contract.TierCold] != 0 {
					t.Fatalf("stale transition became visible: tiers %v", tiers(objs))
				}
				// The next cycle moves the old objects from the new head;
				// the concurrent append is young and stays hot.
				cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
				_, body2 := transitionTask(t, env, "c1")
				cxInvoke(t, env, resources.FnCompaction, body2)
				if n := cxHandoff(t, env); n != 1 {
					t.Fatalf("next cycle reported %d completions", n)
				}
				if _, objs := headObjects(t, env, "c1"); tiers(objs)[contract.TierCold] != 3 || tiers(objs)[contract.TierHot] != 1 {
					t.Fatalf("after the next cycle: tiers %v, want 3 cold + 1 hot", tiers(objs))
				}
			}
			cxVerify(t, env, "c1")
		})
	}
}

// transitionTask is the lifecycle transition task of c's current head, as
// the observer would enqueue it.
func transitionTask(t *testing.T, env *localenv.Env, c string) (contract.Task, string) {
	return headTask(t, env, c, contract.NewSweepTask, contract.KindLifecycleTransition)
}
