package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Issue 18: a task is stale when the CCS facts it carried changed. The
// handoff re-reads CCS facts right before every cutover and every release
// intent and compares the facts the task kind depends on
// (contract.FactsDependencies); CCS unreachable means nothing is handed off.

var withoutHandoffFacts = mustWithout("handoff_facts")

const day = 24 * time.Hour

// changeFacts stores c's current CCS facts changed by fn (a new
// facts_version).
func changeFacts(t *testing.T, env *localenv.Env, c string, fn func(*contract.CollectionFacts)) contract.CollectionFacts {
	t.Helper()
	ctx := context.Background()
	f, err := env.CCS.Facts(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	fn(&f)
	if f, err = env.CCS.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	if f.Tombstoned {
		seen(t, env, ctx, f) // the coordinator sees the tombstone at once
	}
	return f
}

// registerHandoffAt wires the handoff function against config cfg (e.g.
// another CCS endpoint) with guards g.
func registerHandoffAt(env *localenv.Env, cfg app.Config, g guard.Set) {
	env.Stack.RegisterFunction(resources.FnHandoff, app.HandoffHandlerWith(cfg, env.FunctionClients(resources.FnHandoff), cxRuntime(env), app.HandoffOptions{Guards: &g}).Handle, time.Minute)
}

// 1. A lifecycle transition planned under "cold after 30 days" reported;
// then, before the cutover, CCS changes the policy (another tier, or
// transitions off). The result is dropped and fresh work follows the
// current policy; with the guard off the three objects land in cold under a
// policy that no longer asks for it.
func TestHandoffDropsTransitionWhenPolicyChanged(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	p1 := contract.Lifecycle{TransitionAfterMs: (30 * day).Milliseconds(), TransitionToTier: contract.TierCold}
	for _, change := range []struct {
		name string
		to   contract.Lifecycle
	}{
		{"other_tier", contract.Lifecycle{TransitionAfterMs: (30 * day).Milliseconds(), TransitionToTier: contract.TierWarm}},
		{"switched_off", contract.Lifecycle{}},
	} {
		t.Run(change.name, func(t *testing.T) {
			bothWays(t, withoutHandoffFacts, func(t *testing.T, g guard.Set) []string {
				clock := newCxClock()
				env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: cxPolicy(100)})
				ctx := context.Background()
				if err := env.Workload.Create(ctx, "c1", p1); err != nil {
					t.Fatal(err)
				}
				cxAppend(t, env, "c1", 3)
				cxSettle(t, env)
				clock.Advance(31 * day)
				_, body := transitionTask(t, env, "c1")
				cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
				cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
				if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
					t.Fatal("transition failed")
				}
				bodies := cxReceive(t, env, resources.QueueHandoff)
				if len(bodies) != 1 {
					t.Fatalf("%d completions reported, want the transition's", len(bodies))
				}
				// CCS changes the policy after the report, before the cutover.
				changeFacts(t, env, "c1", func(f *contract.CollectionFacts) { f.Lifecycle = change.to })
				if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
					t.Fatal("handoff failed")
				}
				var v []string
				if _, objs := headObjects(t, env, "c1"); tiers(objs)[contract.TierCold] > 0 {
					v = append(v, "objects moved to cold under a policy that no longer asks for it")
				}
				if len(v) > 0 {
					return v
				}
				if cxMetric(env, "StaleFactsDropped") != 1 || len(cxCutovers(cxLineage(t, env, "c1"))) != 0 {
					t.Fatalf("StaleFactsDropped %v, %d cutovers", cxMetric(env, "StaleFactsDropped"), len(cxCutovers(cxLineage(t, env, "c1"))))
				}
				// Fresh work derived from the current facts.
				_, body2 := transitionTask(t, env, "c1")
				cxInvoke(t, env, resources.FnCompaction, body2)
				cxHandoff(t, env)
				_, objs := headObjects(t, env, "c1")
				want := map[string]int{contract.TierHot: 3}
				if change.to.TransitionToTier != "" {
					want = map[string]int{change.to.TransitionToTier: 3}
				}
				if got := tiers(objs); len(got) != len(want) || got[change.to.TransitionToTier] != want[change.to.TransitionToTier] || (change.to.TransitionToTier == "" && got[contract.TierHot] != 3) {
					t.Fatalf("after fresh work under the current policy: tiers %v, want %v", got, want)
				}
				cxVerify(t, env, "c1")
				return nil
			})
		})
	}
}

// 2. A compaction result reported; CCS then tombstones the collection. No
// cutover is published on the tombstoned collection; reconciliation
// schedules its tombstone cleanup instead.
func TestHandoffDropsCompactionOfTombstonedCollection(t *testing.T) {
	bothWays(t, withoutHandoffFacts, func(t *testing.T, g guard.Set) []string {
		env := cxStart(t, localenv.Options{NoDelivery: true})
		cxSetup(t, env, "c1", 4)
		_, body := cxTask(t, env, "c1")
		cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
		cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
		if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
			t.Fatal("compaction failed")
		}
		bodies := cxReceive(t, env, resources.QueueHandoff)
		if len(bodies) != 1 {
			t.Fatalf("%d completions reported, want the compaction's", len(bodies))
		}
		changeFacts(t, env, "c1", func(f *contract.CollectionFacts) {
			f.Tombstoned, f.ReservationHorizonUnixMs = true, env.Now().UnixMilli()
		})
		if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
			t.Fatal("handoff failed")
		}
		if cuts := cxCutovers(cxLineage(t, env, "c1")); len(cuts) > 0 {
			return []string{"cutover published on the tombstoned collection"}
		}
		if cxMetric(env, "StaleFactsDropped") != 1 {
			t.Fatalf("StaleFactsDropped %v", cxMetric(env, "StaleFactsDropped"))
		}
		// Cleanup takes over: reconciliation enqueues the tombstone cleanup.
		if _, err := env.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		cleanup := false
		for _, b := range cxReceive(t, env, resources.QueueGC) {
			if tk, err := contract.DecodeTask("gc", []byte(b)); err == nil && tk.Kind == contract.KindTombstoneCleanup && tk.Collection == "c1" {
				cleanup = true
			}
		}
		if !cleanup {
			t.Fatal("reconciliation scheduled no tombstone cleanup of c1")
		}
		return nil
	})
}

// intentCalls counts the release intent requests the stand-in CCS admitted.
type intentCalls struct {
	mu sync.Mutex
	n  int
}

func (c *intentCalls) observe(r *http.Request, _ string) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/release-intents") {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
}

func (c *intentCalls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// 3. A complete tombstone cleanup reported; CCS then un-drops the collection,
// or replaces its tombstone by a newer one. No release intent is requested
// for the tombstone the cleanup did not run under; a new cleanup follows
// the current tombstone.
func TestHandoffNoReleaseWhenTombstoneChanged(t *testing.T) {
	undrop := func(f *contract.CollectionFacts, _ int64) { f.Tombstoned = false }
	redrop := func(f *contract.CollectionFacts, _ int64) { f.Tombstoned = true }
	for _, change := range []struct {
		name  string
		steps []func(f *contract.CollectionFacts, now int64)
	}{
		{"undropped", []func(*contract.CollectionFacts, int64){undrop}},
		// Its horizon already passed (by more than the clock skew the
		// handoff adds, guard release_rederived): only the facts differ.
		{"newer_tombstone", []func(*contract.CollectionFacts, int64){func(f *contract.CollectionFacts, now int64) {
			f.Tombstoned, f.ReservationHorizonUnixMs = true, now-(10*time.Minute).Milliseconds()
		}}},
		// Un-dropped and dropped again, CCS keeping the horizon: only
		// facts_version tells the tombstones apart.
		{"redropped_same_horizon", []func(*contract.CollectionFacts, int64){undrop, redrop}},
	} {
		t.Run(change.name, func(t *testing.T) {
			bothWays(t, withoutHandoffFacts, func(t *testing.T, g guard.Set) []string {
				calls := &intentCalls{}
				e := startGCWith(t, nil, localenv.Options{OnOwnerCall: calls.observe})
				e.create("c1", contract.Lifecycle{})
				e.add("c1", 2, 0, 0)
				e.clk.Advance(time.Hour)
				facts := changeFacts(t, e.Env, "c1", func(f *contract.CollectionFacts) {
					f.Tombstoned, f.ReservationHorizonUnixMs = true, e.clk.Now().UnixMilli()
				})
				e.clk.Advance(3 * time.Hour) // past the token lifetime: everything may go
				e.watermark(e.clk.Now())
				head, _ := e.Lineage.Head(e.ctx, "c1")
				task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
				ex, _ := e.executor(g, nil)
				if rep, err := ex.Run(e.ctx, task); err != nil || !rep.Complete {
					t.Fatalf("cleanup incomplete: %+v %v", rep, err)
				}
				bodies := receiveAll(t, e, resources.QueueHandoff)
				if len(bodies) != 1 {
					t.Fatalf("%d completions, want the cleanup's", len(bodies))
				}
				e.clk.Advance(time.Minute)
				now := e.clk.Now().UnixMilli()
				for _, step := range change.steps {
					changeFacts(t, e.Env, "c1", func(f *contract.CollectionFacts) { step(f, now) })
				}
				cxRegisterHandoff(e.Env, app.HandoffOptions{Guards: &g})
				if failed, _ := cxInvoke(t, e.Env, resources.FnHandoff, bodies...); len(failed) > 0 {
					t.Fatal("handoff failed")
				}
				var v []string
				if n := calls.count(); n > 0 {
					v = append(v, "release intent requested for a tombstone the cleanup did not run under")
				}
				intents, err := e.CCS.Intents(e.ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, in := range intents {
					v = append(v, "intent recorded at facts v"+strconv.FormatUint(in.FactsVersion, 10))
				}
				if len(v) == 0 && cxMetric(e.Env, "StaleFactsDropped") != 1 {
					t.Fatalf("StaleFactsDropped %v", cxMetric(e.Env, "StaleFactsDropped"))
				}
				return v
			})
		})
	}
}

// 4. CCS unreachable at the moment of the handoff: no cutover (fail
// closed), the message is reported failed (retried after its visibility
// timeout) and the reason is said; once CCS answers again the retry cuts
// over. With the guard off the cutover is published without asking CCS.
func TestHandoffFailsClosedWhenCCSUnreachable(t *testing.T) {
	bothWays(t, withoutHandoffFacts, func(t *testing.T, g guard.Set) []string {
		env := cxStart(t, localenv.Options{NoDelivery: true})
		cxSetup(t, env, "c1", 4)
		_, body := cxTask(t, env, "c1")
		cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
		if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
			t.Fatal("compaction failed")
		}
		bodies := cxReceive(t, env, resources.QueueHandoff)
		if len(bodies) != 1 {
			t.Fatalf("%d completions reported, want the compaction's", len(bodies))
		}
		// CCS down: its endpoint refuses connections.
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		cfg := env.Config
		cfg.CCSEndpoint = down.URL
		registerHandoffAt(env, cfg, g)
		failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...)
		if cuts := cxCutovers(cxLineage(t, env, "c1")); len(cuts) > 0 {
			return []string{"cutover published while CCS was unreachable"}
		}
		if len(failed) != 1 || cxMetric(env, "HandoffFactsUnavailable") < 1 {
			t.Fatalf("want the completion reported failed (retried later) and HandoffFactsUnavailable: failed %v, metric %v", failed, cxMetric(env, "HandoffFactsUnavailable"))
		}
		// CCS is back: the redelivered completion cuts over.
		cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
		if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
			t.Fatal("retry failed")
		}
		if cuts := cxCutovers(cxLineage(t, env, "c1")); len(cuts) != 1 {
			t.Fatalf("%d cutovers after CCS came back, want 1", len(cuts))
		}
		cxVerify(t, env, "c1")
		return nil
	})
}

// Facts a kind does not depend on waste no work: a retention change while
// a compaction merges, and a transition policy change between its report
// and the handoff, still end in its cutover.
func TestUnrelatedFactsChangesWasteNoWork(t *testing.T) {
	env := cxStart(t, localenv.Options{NoDelivery: true})
	cxSetup(t, env, "c1", 4)
	_, body := cxTask(t, env, "c1")
	g := guard.All()
	cxRegisterCompaction(env, app.CompactionOptions{Guards: &g, Objects: withHook(func() {
		changeFacts(t, env, "c1", func(f *contract.CollectionFacts) { f.Lifecycle.RetentionMs = time.Hour.Milliseconds() })
	})})
	cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
		t.Fatal("compaction failed")
	}
	bodies := cxReceive(t, env, resources.QueueHandoff)
	if len(bodies) != 1 {
		t.Fatalf("%d completions: a retention change during the merge made the compaction stale", len(bodies))
	}
	f := changeFacts(t, env, "c1", func(f *contract.CollectionFacts) {
		f.Lifecycle.TransitionAfterMs, f.Lifecycle.TransitionToTier = (30 * day).Milliseconds(), contract.TierWarm
	})
	if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
		t.Fatal("handoff failed")
	}
	if cuts := cxCutovers(cxLineage(t, env, "c1")); len(cuts) != 1 || cxMetric(env, "StaleFactsDropped") != 0 {
		t.Fatalf("%d cutovers, StaleFactsDropped %v, after unrelated facts changes (now v%d)", len(cuts), cxMetric(env, "StaleFactsDropped"), f.FactsVersion)
	}
	cxVerify(t, env, "c1")
}

// Issue 18 leftover: the task message carries the digest of the CCS facts
// its kind depends on (ccs_facts_digest, set by the observer from the
// facts it read), so the executor drops early only work whose facts
// changed: a retention change between the enqueue and the start does not
// drop a compaction carrying the digest (one without it, judged by
// facts_version alone, is dropped), and a tombstone does.
func TestTaskCarriesFactsDigestForEarlyDrop(t *testing.T) {
	env := cxStart(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 4)
	if _, err := env.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	var task contract.Task
	for _, b := range cxReceive(t, env, resources.QueueCompaction) {
		if tk, err := contract.DecodeTask("compaction", []byte(b)); err == nil && tk.Kind == contract.KindCompaction {
			task = tk
		}
	}
	f, err := env.CCS.Facts(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if task.TaskID == "" || task.CCSFactsDigest != contract.FactsDigest(contract.KindCompaction, f) || task.CCSFactsVersion != f.FactsVersion {
		t.Fatalf("the observer's compaction task must carry the digest of facts v%d: %+v", f.FactsVersion, task)
	}
	g := guard.All()
	cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
	run := func(tk contract.Task) int {
		b, err := contract.Encode(tk)
		if err != nil {
			t.Fatal(err)
		}
		if failed, _ := cxInvoke(t, env, resources.FnCompaction, string(b)); len(failed) > 0 {
			t.Fatal("compaction failed")
		}
		return len(cxReceive(t, env, resources.QueueHandoff))
	}
	// An unrelated change (retention) before the start.
	changeFacts(t, env, "c1", func(f *contract.CollectionFacts) { f.Lifecycle.RetentionMs = time.Hour.Milliseconds() })
	// (another identity: a task's lease is taken once)
	noDigest := contract.NewSweepTask(contract.KindCompaction, "c1", task.BaseManifestVersion, task.BaseManifestChecksum, task.CCSFactsVersion, env.Now().UnixMilli())
	if n := run(noDigest); n != 0 {
		t.Fatalf("a task without a digest is judged by facts_version: %d completions", n)
	}
	if n := run(task); n != 1 {
		t.Fatalf("the task carrying its digest was dropped by an unrelated facts change: %d completions", n)
	}
	// A change of what compaction depends on drops it before any work.
	changeFacts(t, env, "c1", func(f *contract.CollectionFacts) {
		f.Tombstoned, f.ReservationHorizonUnixMs = true, env.Now().UnixMilli()
	})
	again := contract.NewSweepTask(contract.KindCompaction, "c1", task.BaseManifestVersion, task.BaseManifestChecksum, task.CCSFactsVersion, env.Now().UnixMilli()+time.Hour.Milliseconds())
	again.CCSFactsDigest = task.CCSFactsDigest
	if n := run(again); n != 0 || cxMetric(env, "StaleTasksSkipped") != 2 {
		t.Fatalf("a tombstone before the start must drop the task as stale: %d completions; metrics %s", n, env.Metrics.String())
	}
}
