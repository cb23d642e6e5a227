package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// dependency is the named dependency of deps (nil: none).
func dependency(deps []contract.Dependency, name string) *contract.Dependency {
	for i := range deps {
		if deps[i].Name == name {
			return &deps[i]
		}
	}
	return nil
}

// dataKeys lists the data objects under c.
func (e *incEnv) dataKeys(c string) []string {
	e.t.Helper()
	var out []string
	for _, k := range e.keysUnder(contract.DataPrefix(c)) {
		if contract.IsDataKey(c, k) {
			out = append(out, k)
		}
	}
	return out
}

// Issue 23 item 1: a drop does not waive lifecycle retention (seed §3
// item 7: retention_ms is part of the delete rule for all physical
// deletion). A dropped collection whose lifecycle keeps its objects six
// hours keeps every one of them, past the token lifetime and the retention
// window, until its retention passes; its release waits with it; then the
// cleanup deletes them and the name is released, once.
func TestDroppedCollectionKeepsLifecycleRetention(t *testing.T) {
	e := startInc(t)
	const c = "c1"
	retention := 6 * time.Hour
	if err := e.Workload.Create(e.ctx, c, contract.Lifecycle{RetentionMs: retention.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, e.Env, c, 6)
	cxSettle(t, e.Env)
	kept := e.dataKeys(c)
	if len(kept) == 0 {
		t.Fatal("no data objects to keep")
	}
	dropped := e.clk.Now()
	if _, err := e.CCS.Drop(e.ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	// Past the token lifetime and the retention window, inside the
	// lifecycle retention: nothing may go.
	for range 3 {
		e.clk.Advance(time.Hour)
		if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
			t.Fatal(err)
		}
		e.reconcile()
		for _, k := range kept {
			if !e.exists(k) {
				t.Fatalf("%s of the dropped collection deleted %s after the drop, inside its lifecycle retention of %s", k, e.clk.Now().Sub(dropped), retention)
			}
		}
		if n := len(e.intents()); n != 0 {
			t.Fatalf("%d release intents while the lifecycle retention holds the objects", n)
		}
	}
	// The wait is visible: the release dependency is pending in the
	// cleanup's cursor (the status snapshot). The head was retired first
	// (guard retire_first), so `bcc gc-plan`, which plans from a head,
	// answers that there is none; the cursor is the plan of the cleanup.
	if d := dependency(e.runs(c, 1).Dependencies, contract.DepLifecycleRetention); d == nil || d.State != contract.DependencyPending {
		t.Fatalf("cleanup cursor's lifecycle_retention dependency: %+v (cursor %+v)", d, e.runs(c, 1))
	}
	if h := e.runs(c, 1).Holding; h == nil || h.Reason != gc.ReasonLifecycle {
		t.Fatalf("cleanup cursor's hold: %+v", h)
	}
	// Past the retention: cleaned up and released, once.
	e.clk.Advance(retention)
	if err := e.Watermark.Publish(e.ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	e.clk.Advance(10 * time.Minute)
	e.reconcile()
	if left := e.keysUnder(contract.CollectionPrefix(c)); len(left) > 0 {
		t.Fatalf("after the retention %d keys of the dropped collection remain: %v", len(left), left[:min(len(left), 5)])
	}
	in := e.intents()
	if len(in) != 1 {
		t.Fatalf("want one release intent after the retention, got %+v", in)
	}
	if !strings.Contains(strings.Join(in[0].Dependencies, "\n"), "lifecycle_retention: confirmed") {
		t.Fatalf("the release intent does not confirm lifecycle retention: %v", in[0].Dependencies)
	}
}

// lowRateExecutor wires GC as the function does, with the S3 per-prefix
// write budget at rate writes per second on the test's clock: waiting for
// its tokens advances the clock and runs during (once, at the first wait).
func (e *gcEnv) lowRateExecutor(t *testing.T, rate float64, during func()) *gc.Executor {
	t.Helper()
	once := during
	sleep := func(ctx context.Context, d time.Duration) error {
		e.clk.Advance(d)
		if once != nil && d > 0 {
			f := once
			once = nil
			f()
		}
		return ctx.Err()
	}
	pb := awsio.NewPrefixBudget(e.Clients.Dynamo, e.Config.Table, "gc-test", 0, rate, e.clk.Now, sleep)
	ex, _ := e.executorWithPorts(guardsOn, func(p *gc.Ports) { p.PrefixBudget = pb }, nil)
	return ex
}

// Issue 23 item 2: no wait between the proof and the call. With the lowest
// legal budgets.s3_writes_per_sec_per_prefix (50) a batch of 1,000 keys
// waits 19 s for its tokens; during that wait the name is dropped,
// released and re-created, and the new lifetime commits an object under
// a key the old lifetime's batch holds (a re-imported snapshot writes the
// same keys). The batch must rest on a proof taken after the wait: the
// head it re-reads is another lifetime's, and nothing of the batch goes.
// A proof taken before the wait deletes the new lifetime's object.
func TestLowPrefixRateRaceKeepsNewLifetime(t *testing.T) {
	const n = 1000
	e := startGC(t, func(p *policy.Policy) { p.Budgets.S3WritesPerSecPerPrefix = policy.MinS3WritesPerSecPerPrefix })
	e.create("c1", contract.Lifecycle{})
	old := e.add("c1", n, 0, 0)
	e.add("c1", 1, 0, 0)
	e.commit("c1", old, nil)
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindGC, "c1", head.Version, head.ManifestChecksum, 0, e.clk.Now().UnixMilli())
	reused := old[n/2]
	body := []byte("segment of the re-created lifetime")
	var recreated bool
	ex := e.lowRateExecutor(t, policy.MinS3WritesPerSecPerPrefix, func() {
		if _, err := e.CCS.Drop(e.ctx, "c1", 0); err != nil {
			t.Fatal(err)
		}
		e.retireAndRecreate(t)
		if _, err := e.Bucket.Put(e.ctx, reused.Key, body); err != nil {
			t.Fatal(err)
		}
		entry := reused
		entry.Size, entry.Checksum = int64(len(body)), contract.Checksum(body)
		e.commit("c1", nil, []contract.ObjectEntry{entry})
		recreated = true
	})
	rep, err := ex.Run(e.ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if !recreated {
		t.Fatalf("the batch never waited for its tokens: %+v", rep)
	}
	got, err := e.Bucket.Get(e.ctx, reused.Key)
	if err != nil || string(got) != string(body) {
		t.Fatalf("the re-created lifetime's object %s was deleted by the old lifetime's batch (read %q, %v); the run deleted %d, refused %q", reused.Key, got, err, rep.ObjectsDeleted, rep.Refused)
	}
	if h, err := e.Lineage.Head(e.ctx, "c1"); err != nil || h.Inc() != 2 {
		t.Fatalf("head after the race: %+v %v", h, err)
	}
}

// Issue 25 item 2 (rule 16): no timestamp another owner asserts opens a
// gate on its own. A forged CCS answer "tombstoned at 1970" (and a
// reservation horizon of 1970) about a live collection whose head was
// committed two days ago must not make GC wipe it at once: the tombstone
// counts from when the coordinator first saw it (recorded in its table,
// the first sighting kept), so its objects are pinned a token lifetime
// (and the retention window) from that moment; neither the cleanup nor a
// sweep deletes them, and a wiped coordinator table only makes that
// moment later. A tombstone is CCS's to declare: once a token lifetime
// past the sighting the cleanup does run. With guard tombstone_sighting
// off (CCS's time and the head's commit alone) the first run wipes the
// live collection.
func TestForgedAncientTombstoneWipesNothingAtOnce(t *testing.T) {
	for _, g := range []guard.Set{guardsOn, mustWithout("tombstone_sighting")} {
		t.Run(map[bool]string{true: "guarded", false: "tombstone_sighting off"}[g.TombstoneSighting], func(t *testing.T) {
			e := startGC(t, nil)
			e.create("c1", contract.Lifecycle{})
			live := e.add("c1", 3, 0, 0)
			e.clk.Advance(48 * time.Hour) // an old collection: its head was committed two days ago
			f, err := e.CCS.Facts(e.ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			f.Tombstoned, f.TombstonedAtUnixMs, f.ReservationHorizonUnixMs = true, 1, 1
			if f, err = e.CCS.PutFacts(e.ctx, f); err != nil {
				t.Fatal(err)
			}
			wiped := e.forgedRuns(g, f, live)
			if !g.TombstoneSighting {
				if wiped == "" {
					t.Fatal("with tombstone_sighting off the forged tombstone wiped nothing: the test proves nothing")
				}
				t.Logf("tombstone_sighting off: %s", wiped)
				return
			}
			if wiped != "" {
				t.Fatal(wiped)
			}
			first := e.clk.Now().UnixMilli()
			sightings := awsio.NewProgressTable(e.Clients.Dynamo, e.Config.Table)
			if at, ok, err := sightings.FirstSighting(e.ctx, "c1", f.Inc(), f.EvictedAtUnixMs(), f.FactsVersion); err != nil || !ok || at != first {
				t.Fatalf("first sighting recorded %d (%v, %v), want the first run's clock %d", at, ok, err, first)
			}
			// The table is lost: the tombstone is seen again later.
			e.wipeTable()
			e.clk.Advance(10 * time.Minute)
			if wiped := e.forgedRuns(g, f, live); wiped != "" {
				t.Fatalf("after the table was wiped: %s", wiped)
			}
			if at, ok, err := sightings.FirstSighting(e.ctx, "c1", f.Inc(), f.EvictedAtUnixMs(), f.FactsVersion); err != nil || !ok || at != e.clk.Now().UnixMilli() {
				t.Fatalf("sighting after the wipe %d (%v, %v), want the later run's clock %d", at, ok, err, e.clk.Now().UnixMilli())
			}
			// A token lifetime, the retention window and the skew past
			// the sighting, the cleanup runs.
			e.clk.Advance(time.Hour)
			e.watermark(e.clk.Now())
			head, _ := e.Lineage.Head(e.ctx, "c1")
			ex, _ := e.executor(g, nil)
			task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, f.FactsVersion, e.clk.Now().UnixMilli())
			if rep := e.runTombstone(ex, task, 10); rep.Outcome != gc.TombCompleted {
				t.Fatalf("the cleanup an hour past the sighting: %+v", rep)
			}
			for _, o := range live {
				if e.exists(o.Key) {
					t.Fatalf("%s left after the cleanup", o.Key)
				}
			}
		})
	}
}

// forgedRuns runs a tombstone cleanup and a sweep of c1 now under tombstone
// facts f; it says what they deleted of live ("": nothing, the head stays).
func (e *gcEnv) forgedRuns(g guard.Set, f contract.CollectionFacts, live []contract.ObjectEntry) string {
	e.t.Helper()
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	ex, _ := e.executor(g, nil)
	for _, kind := range []contract.TaskKind{contract.KindTombstoneCleanup, contract.KindGC} {
		task := contract.NewTask(kind, "c1", head.Version, head.ManifestChecksum, f.FactsVersion, e.clk.Now().UnixMilli())
		if _, err := ex.Run(e.ctx, task); err != nil {
			e.t.Fatalf("%s: %v", kind, err)
		}
		for _, o := range live {
			if !e.exists(o.Key) {
				return fmt.Sprintf("a %s run deleted %s of the live collection on a tombstone CCS dates 1970", kind, o.Key)
			}
		}
		if !e.exists(contract.HeadKey("c1")) {
			return fmt.Sprintf("a %s run retired the live collection's head on a tombstone CCS dates 1970", kind)
		}
	}
	return ""
}

// dropSeen drops c in CCS and has the coordinator see the tombstone at
// once, as a reconciliation right after the drop does (its first cleanup
// run records the sighting): the tombstone then counts from the drop, not
// from the test's first cleanup run, later (rule 16).
func dropSeen(t testing.TB, env *localenv.Env, ctx context.Context, c string, reserve time.Duration, artifacts ...string) (contract.CollectionFacts, error) {
	t.Helper()
	f, err := env.CCS.Drop(ctx, c, reserve, artifacts...)
	if err != nil {
		return f, err
	}
	seen(t, env, ctx, f)
	return f, nil
}

// seen records the coordinator's first sighting of f's tombstone now.
func seen(t testing.TB, env *localenv.Env, ctx context.Context, f contract.CollectionFacts) {
	t.Helper()
	if _, err := awsio.NewProgressTable(env.Clients.Dynamo, env.Config.Table).RecordSighting(ctx, f.Collection, f.Inc(), f.EvictedAtUnixMs(), f.FactsVersion, env.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

// Issue 23: the SDK's own retries of DeleteObjects cannot outlive the
// proof. The first DeleteObjects answers 500 (not applied) after taking
// longer than gc.proof_max_age_ms; the SDK would send it again after its
// backoff, on the old proof. The adapter checks the proof on every attempt
// (a check at the end of the SDK's finalize step, after its backoff, right
// before the request is sent) and refuses the retry; the gate proves the
// batch again and sends it once more: two requests reach S3, each on a
// proof younger than the bound, and the objects are gone.
func TestSDKRetryOfDeleteObjectsCannotOutliveTheProof(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	old := e.add("c1", 3, 0, 0)
	e.add("c1", 1, 0, 0)
	e.commit("c1", old, nil)
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindGC, "c1", head.Version, head.ManifestChecksum, 0, e.clk.Now().UnixMilli())
	bound := e.Config.Policy.GC.ProofMaxAge.D()
	data := func(_ *http.Request, body []byte) bool {
		if !strings.Contains(string(body), "/data/") {
			return false
		}
		e.clk.Advance(bound + time.Second) // the attempt and the SDK's backoff take longer than the bound
		return true
	}
	fault := e.Stack.InjectFault(localaws.Fault{Service: "s3", Operation: "DeleteObjects", Mode: localaws.FailBeforeApply, Match: data})
	before := e.Stack.Counter().Snapshot()
	ex, m := e.executor(guardsOn, nil)
	rep, err := ex.Run(e.ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if fault.Hits() != 1 {
		t.Fatalf("the fault struck %d times, want 1", fault.Hits())
	}
	for _, o := range old {
		if e.exists(o.Key) {
			t.Fatalf("%s not deleted after the retry: %+v", o.Key, rep)
		}
	}
	if rep.StaleProofs != 1 || m.Counts()["GCStaleProofs"] != 1 {
		t.Fatalf("the SDK's retry on the stale proof was not refused: stale proofs %d (metric %v), proofs %d", rep.StaleProofs, m.Counts()["GCStaleProofs"], rep.Proofs)
	}
	if n := e.Stack.Counter().Since(before)["s3:DeleteObjects"]; n < 2 {
		t.Fatalf("%d DeleteObjects requests, want the failed one and the one proven again", n)
	}
}

// Issue 23: the adapter refuses a stale proof at the moment it sends. A
// delete port that waits before it hands the batch on (a wait put back
// between the proof and the call: here longer than gc.proof_max_age_ms)
// sends nothing: the adapter (awsio.Bucket.DeleteProven, wired as the
// function wires it) finds the proof older than its bound and answers
// gc.ErrStaleProof; no DeleteObjects request reaches S3, and the gate
// proves the batch again and sends it then. A batch kept past its bound
// and handed to the adapter later, and a batch without a proof (the zero
// ProvenBatch, the only one code outside the gate can make), are refused
// the same way and delete nothing.
func TestDeletePortRefusesAStaleProofWhenItSends(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	old := e.add("c1", 3, 0, 0)
	e.add("c1", 1, 0, 0)
	e.commit("c1", old, nil)
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindGC, "c1", head.Version, head.ManifestChecksum, 0, e.clk.Now().UnixMilli())
	bound := e.Config.Policy.GC.ProofMaxAge.D()
	var kept gc.ProvenBatch
	sentWhileStale := -1
	ex, m := e.executor(guardsOn, func(d gc.Deleter) gc.Deleter {
		return deleterFunc(func(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
			if kept.Len() > 0 {
				return d.DeleteProven(ctx, b)
			}
			kept = b
			e.clk.Advance(bound + time.Second) // the port waits past the bound
			before := e.Stack.Counter().Snapshot()
			res, err := d.DeleteProven(ctx, b)
			sentWhileStale = e.Stack.Counter().Since(before)["s3:DeleteObjects"]
			if !errors.Is(err, gc.ErrStaleProof) {
				t.Errorf("the adapter sent a batch whose proof is %s old (bound %s): %+v %v", b.Age(), bound, res, err)
			}
			return res, err
		})
	})
	rep, err := ex.Run(e.ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if kept.Len() == 0 || sentWhileStale != 0 {
		t.Fatalf("batch %d keys; %d DeleteObjects requests sent on the stale proof, want 0", kept.Len(), sentWhileStale)
	}
	if rep.StaleProofs != 1 || m.Counts()["GCStaleProofs"] != 1 {
		t.Fatalf("stale proofs %d (metric %v), want 1: %+v", rep.StaleProofs, m.Counts()["GCStaleProofs"], rep)
	}
	for _, o := range old {
		if e.exists(o.Key) {
			t.Fatalf("%s not deleted after the batch was proven again: %+v", o.Key, rep)
		}
	}
	// The kept batch, handed to the adapter later, and a batch with no
	// proof: refused, nothing sent, the key written again meanwhile stays.
	key := kept.Keys()[0]
	e.put(key, []byte("written again after the batch was proven"))
	port := app.GCPorts(e.Config, e.FunctionClients(resources.FnGC)).Deleter
	for name, b := range map[string]gc.ProvenBatch{"kept past its bound": kept, "without a proof": {}} {
		before := e.Stack.Counter().Snapshot()
		if _, err := port.DeleteProven(e.ctx, b); !errors.Is(err, gc.ErrStaleProof) {
			t.Fatalf("a batch %s: %v, want %v", name, err, gc.ErrStaleProof)
		}
		if n := e.Stack.Counter().Since(before)["s3:DeleteObjects"]; n != 0 || !e.exists(key) {
			t.Fatalf("a batch %s: %d DeleteObjects requests, %s exists %v", name, n, key, e.exists(key))
		}
	}
}
