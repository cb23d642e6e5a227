package e2e

import (
	"context"
	"encoding/json"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/resources"
)

// incEnv is a delivering environment on a test clock: head events reach
// the observer, tasks their functions, completions the handoff.
type incEnv struct {
	*localenv.Env
	t   *testing.T
	clk *fakeClock
	ctx context.Context

	mu      sync.Mutex
	writers map[string]int // access key -> CCS write requests (POST) it signed
}

func startInc(t *testing.T) *incEnv {
	t.Helper()
	clk := &fakeClock{t: time.Now()}
	e := &incEnv{t: t, clk: clk, ctx: context.Background(), writers: map[string]int{}}
	e.Env = cxStart(t, localenv.Options{Now: clk.Now, OnOwnerCall: func(r *http.Request, key string) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/release-intents") {
			e.mu.Lock()
			e.writers[key]++
			e.mu.Unlock()
		}
	}})
	return e
}

// releasesSignedByHandoff fails the test unless every release intent
// request CCS admitted was signed by the handoff function's identity (the
// one role whose grants include CCS's write route), and at least one was.
func (e *incEnv) releasesSignedByHandoff() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.writers) == 0 {
		e.t.Fatal("no release intent request reached CCS")
	}
	if !functionIdentities() {
		e.t.Log("functions share one identity on this upstream: who signed is not checked")
		return
	}
	for key, n := range e.writers {
		if fn, ok := e.FunctionOf(key); !ok || fn != resources.FnHandoff {
			e.t.Errorf("%d release intent requests signed by %q (function %q): only the handoff records release intents", n, key, fn)
		}
	}
}

// reconcile runs one scheduled reconciliation (through the reconcile
// queue) and waits for every task it caused to finish.
func (e *incEnv) reconcile() {
	e.t.Helper()
	if _, err := e.Env.Reconcile(e.ctx); err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	cxSettle(e.t, e.Env)
}

// runs is how many cleanup runs the incarnation's cursor records.
func (e *incEnv) runs(c string, inc uint64) gc.TombstoneProgress {
	e.t.Helper()
	p, err := awsio.NewProgressTable(e.Clients.Dynamo, e.Config.Table).LoadProgress(e.ctx, c, inc)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// keysUnder lists every key under prefix.
func (e *incEnv) keysUnder(prefix string) []string {
	e.t.Helper()
	ls, err := e.Bucket.List(e.ctx, prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.Key)
	}
	return out
}

func (e *incEnv) intents() []contract.ReleaseIntentRequest {
	e.t.Helper()
	in, err := e.CCS.Intents(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

// Drop -> cleanup -> release -> re-create under the same name -> new
// commits: the new incarnation is observed from v1 and compacted; the old
// one's late tasks delete nothing of it; exactly one release intent for the
// old incarnation, requested only after its reservation horizon; nothing is
// scheduled for it after completion and none of its objects remain.
func TestDropReleaseRecreate(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	e := startInc(t)
	const c = "c1"
	if err := e.Workload.Create(e.ctx, c, contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, e.Env, c, 12)
	cxSettle(t, e.Env)
	old := cxVerify(t, e.Env, c)
	if cuts := cxCutovers(cxLineage(t, e.Env, c)); len(cuts) == 0 {
		t.Fatal("the first incarnation was never compacted")
	}
	oldTask := contract.NewTask(contract.KindCompaction, c, old.Version, old.ManifestChecksum, 1, e.clk.Now().UnixMilli())
	artifact := "collections/c1/control/schema.json"
	if _, err := e.Bucket.Put(e.ctx, artifact, []byte(`{"fields":[]}`)); err != nil {
		t.Fatal(err)
	}

	// Drop, reserving the name for two days.
	facts, err := dropSeen(t, e.Env, e.ctx, c, 48*time.Hour, artifact)
	if err != nil {
		t.Fatal(err)
	}
	oldTomb := contract.NewSweepTask(contract.KindTombstoneCleanup, c, old.Version, old.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	e.reconcile() // inside the token lifetime: nothing may go yet
	if p := e.runs(c, 1); p.Runs != 1 || p.ObjectsDeleted != 0 {
		t.Fatalf("the first reconciliation of the drop: cleanup progress %+v, want one run that deleted nothing", p)
	}
	if !e.exists(old.ManifestKey) {
		t.Fatal("the dropped head's root was deleted inside the token lifetime")
	}
	e.clk.Advance(time.Hour)
	if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if left := e.keysUnder(contract.CollectionPrefix(c)); len(left) > 0 {
		t.Fatalf("after the cleanup %d keys of the dropped incarnation remain: %v", len(left), left[:min(len(left), 5)])
	}
	if n := len(e.intents()); n != 0 {
		t.Fatalf("%d release intents before the reservation horizon", n)
	}
	if _, err := e.CCS.Create(e.ctx, c, "", contract.Lifecycle{}); err == nil {
		t.Fatal("CCS re-created a name whose release intent is not recorded")
	}

	// Past the horizon: the release is requested, once.
	e.clk.Advance(48 * time.Hour)
	if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	in := e.intents()
	if len(in) != 1 || in[0].IntentID != contract.ReleaseIntentID(contract.CollectionReleaseIntent, c, 1) || contract.Lifetime(in[0].Incarnation) != 1 {
		t.Fatalf("want exactly the release intent of incarnation 1, got %+v", in)
	}
	for _, d := range []string{contract.DepObjects, contract.DepManifests, contract.DepControlArtifacts, contract.DepReservationHorizon, contract.DepCCSPreconditions} {
		if !strings.Contains(strings.Join(in[0].Dependencies, "\n"), d+": confirmed") {
			t.Fatalf("intent does not confirm %s: %v", d, in[0].Dependencies)
		}
	}
	// Nothing is scheduled for the released incarnation any more.
	before := e.runs(c, 1)
	if before.Phase != gc.PhaseDone {
		t.Fatalf("cleanup progress after the release: %+v", before)
	}
	for range 2 {
		e.clk.Advance(10 * time.Minute)
		e.reconcile()
	}
	if after := e.runs(c, 1); after.Runs != before.Runs || cxMetric(e.Env, "TombstoneTasksAfterDone") != 0 {
		t.Fatalf("cleanup ran %d more times after completion", after.Runs-before.Runs)
	}

	// Re-create under the same name: incarnation 2, observed from v1 and
	// compacted.
	if err := e.Workload.Create(e.ctx, c, contract.Lifecycle{}); err != nil {
		t.Fatalf("re-create: %v", err)
	}
	cxAppend(t, e.Env, c, 12)
	cxSettle(t, e.Env)
	// A merge dropped as stale (its base moved while it ran, likelier on a
	// loaded machine) is redone by the next reconciliation, as deployed.
	// Bounded: five reconciliations, each redoing what the last dropped.
	head := cxVerify(t, e.Env, c)
	roots := cxLineage(t, e.Env, c)
	for round := 0; round == 0 || round < 5 && (len(cxCutovers(roots)) == 0 || level0(roots[0]) >= 4); round++ {
		e.clk.Advance(10 * time.Minute)
		e.reconcile()
		cxSettle(t, e.Env)
		head = cxVerify(t, e.Env, c)
		roots = cxLineage(t, e.Env, c)
	}
	if head.Inc() != 2 || len(cxCutovers(roots)) == 0 || level0(roots[0]) >= 4 {
		t.Fatalf("new incarnation: head v%d incarnation %d, %d cutovers, %d level-0 objects", head.Version, head.Inc(), len(cxCutovers(roots)), level0(roots[0]))
	}
	st, err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).Get(e.ctx, c, 2)
	if err != nil || st.Version != head.Version {
		t.Fatalf("observed state of incarnation 2: %+v %v (head v%d)", st, err, head.Version)
	}

	// Late deliveries of the old incarnation's tasks delete nothing of the
	// new one and hand nothing off.
	for _, task := range []contract.Task{oldTomb, oldTask} {
		body, _ := contract.Encode(task)
		fn := resources.FnGC
		if task.Kind == contract.KindCompaction {
			fn = resources.FnCompaction
		}
		ev, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "late-" + task.TaskID, Body: string(body),
			Attributes: map[string]string{"MessageGroupId": c, "ApproximateReceiveCount": "1"}, EventSource: "aws:sqs"}}})
		if _, err := e.Stack.Invoke(e.ctx, fn, ev); err != nil {
			t.Fatalf("late %s: %v", task.Kind, err)
		}
	}
	cxSettle(t, e.Env)
	if got := cxVerify(t, e.Env, c); got.Inc() != 2 {
		t.Fatalf("head after late tasks: %+v", got)
	}
	if n := len(e.intents()); n != 1 {
		t.Fatalf("%d release intents after late tasks, want 1", n)
	}
}

func (e *incEnv) exists(key string) bool {
	e.t.Helper()
	_, err := e.Bucket.Size(e.ctx, key)
	return err == nil
}

// The head pointer is the one key every lifetime of a name shares. A
// tombstone cleanup whose head delete is delayed across a re-creation (its
// re-read raced) must not delete the new incarnation's head: it re-reads
// the head right before the delete and deletes it only while it names the
// dropped incarnation (guard.IncarnationFence). Without the guard the new
// head is gone.
func TestTombstoneHeadDeleteNeverHitsNewIncarnation(t *testing.T) {
	bothWays(t, mustWithout("incarnation_fence"), func(t *testing.T, g guard.Set) []string {
		// The publisher's own check (guard retire_tombstoned: CCS dropped
		// the head's incarnation) is a second fence behind the
		// coordinator's: off with the mutation, so what is proven is the
		// coordinator's half.
		e := startGCWith(t, nil, localenv.Options{Publisher: publisher.Options{RetireLive: !g.IncarnationFence}})
		e.create("c1", contract.Lifecycle{})
		e.add("c1", 3, 0, 0)
		facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
		if err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		head, _ := e.Lineage.Head(e.ctx, "c1")
		task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
		ex, _ := e.executor(g, nil)
		// A cleanup of the first incarnation runs to its head phase, then
		// stalls; meanwhile an earlier run finished (deleted the head), the
		// name was released and re-created: the stalled delete comes late.
		ex.SetBeforeHeadDelete(func() {
			ex.SetBeforeHeadDelete(nil)
			if err := e.Bucket.Delete(e.ctx, contract.HeadKey("c1")); err != nil {
				t.Fatal(err)
			}
			f, _ := e.CCS.Facts(e.ctx, "c1")
			f.ReleaseIntentRecorded = true
			if _, err := e.CCS.PutFacts(e.ctx, f); err != nil {
				t.Fatal(err)
			}
			e.create("c1", contract.Lifecycle{})
		})
		rep, err := ex.RunTombstone(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		var v []string
		if !e.exists(contract.HeadKey("c1")) {
			v = append(v, "the new incarnation's head was deleted by the old incarnation's cleanup")
		} else if h, err := e.Lineage.Head(e.ctx, "c1"); err != nil || h.Inc() != 2 {
			t.Fatalf("head after the race: %+v %v", h, err)
		}
		t.Logf("run: %s phase %s", rep.Outcome, rep.Phase)
		return v
	})
}

// A dropped collection's control artifacts (the keys CCS names with the
// tombstone) are deleted by its cleanup, through the pipeline and under the
// GC function's deployed policy, before its release is requested; the
// intent confirms them. Unlike TestDropReleaseRecreate this test writes no
// segment and advances the clock past the token lifetime only, so it holds
// on an upstream whose S3 dates objects by its own wall clock (make
// e2e-moto): an object it stamped looks older to the test's clock, never
// younger.
func TestDroppedCollectionsControlArtifactsAreDeleted(t *testing.T) {
	e := startInc(t)
	const c = "c1"
	if err := e.Workload.Create(e.ctx, c, contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	artifacts := []string{"collections/c1/control/schema.json", "collections/c1/control/aliases.json"}
	for _, a := range artifacts {
		if _, err := e.Bucket.Put(e.ctx, a, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dropSeen(t, e.Env, e.ctx, c, 0, artifacts...); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	e.reconcile()
	for _, a := range artifacts {
		if e.exists(a) {
			t.Fatalf("control artifact %s of the dropped collection remains after its cleanup", a)
		}
	}
	if left := e.keysUnder(contract.CollectionPrefix(c)); len(left) > 0 {
		t.Fatalf("after the cleanup %d keys of the dropped incarnation remain: %v", len(left), left[:min(len(left), 5)])
	}
	in := e.intents()
	if len(in) != 1 || in[0].IntentID != contract.ReleaseIntentID(contract.CollectionReleaseIntent, c, 1) {
		t.Fatalf("want exactly the release intent of incarnation 1, got %+v", in)
	}
	if deps := strings.Join(in[0].Dependencies, "\n"); !strings.Contains(deps, contract.DepControlArtifacts+": confirmed") {
		t.Fatalf("intent does not confirm %s: %v", contract.DepControlArtifacts, in[0].Dependencies)
	}
	e.releasesSignedByHandoff()
}

// Release waits for the reservation horizon (guard.ReleaseHorizon): an
// empty dropped collection is cleaned at once, but its completion (and so
// its release intent) waits until CCS's horizon has passed. Without the
// guard the completion is reported a day early.
func TestReleaseWaitsForReservationHorizon(t *testing.T) {
	bothWays(t, mustWithout("release_horizon"), func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		facts, err := dropSeen(t, e.Env, e.ctx, "c1", 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		head, _ := e.Lineage.Head(e.ctx, "c1")
		task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
		ex, _ := e.executor(g, nil)
		rep, err := ex.RunTombstone(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		var v []string
		if e.exists(contract.HeadKey("c1")) {
			t.Fatalf("the empty dropped collection was not cleaned: %+v", rep)
		}
		if msgs := receiveAll(t, &gcEnv{Env: e.Env, t: t, clk: e.clk, ctx: e.ctx}, resources.QueueHandoff); len(msgs) > 0 {
			v = append(v, "completion reported 23 hours before the reservation horizon")
		} else if rep.Outcome != gc.TombWaiting {
			t.Fatalf("want waiting, got %+v", rep)
		}
		if len(v) > 0 {
			return v
		}
		// Past the horizon the same cleanup completes, once.
		e.clk.Advance(24 * time.Hour)
		rep, err = ex.RunTombstone(e.ctx, task)
		if err != nil || rep.Outcome != gc.TombCompleted {
			t.Fatalf("after the horizon: %+v %v", rep, err)
		}
		if rep, _ = ex.RunTombstone(e.ctx, task); rep.Outcome != gc.TombDone {
			t.Fatalf("a run after completion: %+v", rep)
		}
		if msgs := receiveAll(t, &gcEnv{Env: e.Env, t: t, clk: e.clk, ctx: e.ctx}, resources.QueueHandoff); len(msgs) != 1 {
			t.Fatalf("%d completions, want 1", len(msgs))
		}
		return nil
	})
}

// Namespace release (seed §8.3): three collections of a namespace and the
// namespace are dropped; the namespace's release intent comes only after
// all three collection intents (the last child's release, 2 days later,
// triggers it), once.
func TestNamespaceReleaseAfterEveryChild(t *testing.T) {
	e := startInc(t)
	if _, err := e.CCS.CreateNamespace(e.ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	children := []string{"carts", "orders", "returns"}
	for _, c := range children {
		f, err := e.CCS.Create(e.ctx, c, "shop", contract.Lifecycle{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Publisher.CreateIncarnation(e.ctx, c, f.Inc()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CCS.DropNamespace(e.ctx, "shop"); err == nil {
		t.Fatal("CCS dropped a namespace whose children are live")
	}
	for i, c := range children {
		reserve := time.Duration(0)
		if i == len(children)-1 {
			reserve = 48 * time.Hour
		}
		if _, err := dropSeen(t, e.Env, e.ctx, c, reserve); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CCS.DropNamespace(e.ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	nsIntent := contract.ReleaseIntentID(contract.NamespaceReleaseIntent, "shop", 1)
	kinds := func() (cols, ns int) {
		for _, in := range e.intents() {
			switch {
			case in.IntentID == nsIntent:
				ns++
			case in.IntentKind == contract.CollectionReleaseIntent:
				cols++
			}
		}
		return cols, ns
	}
	e.clk.Advance(time.Hour)
	if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if cols, ns := kinds(); cols != 2 || ns != 0 {
		t.Fatalf("two children released, one waiting for its horizon: %d collection intents, %d namespace intents (want 2, 0)", cols, ns)
	}
	e.clk.Advance(48 * time.Hour)
	if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	e.reconcile()
	if cols, ns := kinds(); cols != 3 || ns != 1 {
		t.Fatalf("every child released: %d collection intents, %d namespace intents (want 3, 1)", cols, ns)
	}
	if nf, err := e.CCS.NamespaceFacts(e.ctx, "shop"); err != nil || !nf.ReleaseIntentRecorded {
		t.Fatalf("namespace facts after release: %+v %v", nf, err)
	}
}
