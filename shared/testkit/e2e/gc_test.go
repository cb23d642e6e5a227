package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
	"github.com/searchfabric/bcc/shared/testkit/naive"
)

// fakeClock is the business clock of a test: the publisher's commit
// timestamps, segment timestamps and GC's "now" all come from it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type gcEnv struct {
	*localenv.Env
	t   testing.TB
	clk *fakeClock
	ctx context.Context
}

func startGC(t testing.TB, tune func(*policy.Policy)) *gcEnv {
	return startGCWith(t, tune, localenv.Options{})
}

// startGCWith is startGC with further options of the local environment.
func startGCWith(t testing.TB, tune func(*policy.Policy), opts localenv.Options) *gcEnv {
	t.Helper()
	clk := &fakeClock{t: time.Now()}
	pol := policy.Default()
	if tune != nil {
		tune(&pol)
	}
	ctx := context.Background()
	opts.Now, opts.NoDelivery, opts.Policy = clk.Now, true, &pol
	env, err := launch(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return &gcEnv{Env: env, t: t, clk: clk, ctx: ctx}
}

// executor wires GC exactly as the function does, with guards g and an
// optional wrapper around the delete port.
func (e *gcEnv) executor(g guard.Set, wrap func(gc.Deleter) gc.Deleter) (*gc.Executor, *metrics.Recorder) {
	return e.executorWithSleep(g, wrap, nil)
}

// executorWithSleep is executor with a hook run after every backoff or
// pacing wait (the test's clock has advanced by then).
func (e *gcEnv) executorWithSleep(g guard.Set, wrap func(gc.Deleter) gc.Deleter, onSleep func()) (*gc.Executor, *metrics.Recorder) {
	return e.executorWithPorts(g, func(p *gc.Ports) {
		if wrap != nil {
			p.Deleter = wrap(p.Deleter)
		}
	}, onSleep)
}

// executorWithPorts is executorWithSleep with a hook that may wrap any of
// the function's ports (tune may be nil).
func (e *gcEnv) executorWithPorts(g guard.Set, tune func(*gc.Ports), onSleep func()) (*gc.Executor, *metrics.Recorder) {
	ports := app.GCPorts(e.Config, e.FunctionClients(resources.FnGC))
	if tune != nil {
		tune(&ports)
	}
	if !g.DeleteGates {
		// The mutation proof also reads manifests naively (shipped code
		// never does): unknown fields are silently dropped.
		ports.Lineage = naive.NewLenientLineage(e.Bucket)
	}
	if !g.LineageIncarnation {
		// ... and keeps lineage confirmations per name (shipped code
		// never does): any lifetime's confirmation answers any other.
		ports.Memory = naive.NewNameKeyedConfirmations(e.Clients.Dynamo, e.Config.Table)
	}
	m := metrics.New(resources.FnGC)
	cfg := gc.ConfigFrom(e.Config.Policy, g)
	pol := e.Config.Policy
	// Pacing and retry backoff run on the test's clock: waiting advances it.
	sleep := func(ctx context.Context, d time.Duration) error {
		e.clk.Advance(d)
		if onSleep != nil && d > 0 {
			onSleep()
		}
		return ctx.Err()
	}
	pacer := gc.NewPacer(pol.GC.DeletesPerSec, pol.GC.GlobalDeletesPerSec, cfg.BatchSize, e.clk.Now, sleep)
	if ports.PrefixBudget != nil {
		pacer.WithPrefix(ports.PrefixBudget)
	}
	return gc.New(ports, cfg, pacer, e.clk.Now, sleep, m, e.Log), m
}

func (e *gcEnv) create(c string, lc contract.Lifecycle) {
	e.t.Helper()
	if err := e.Workload.Create(e.ctx, c, lc); err != nil {
		e.t.Fatal(err)
	}
}

// add commits n new objects (written to the bucket) with the given
// timestamps (0: now) and returns their entries.
func (e *gcEnv) add(c string, n int, minTs, maxTs int64) []contract.ObjectEntry {
	e.t.Helper()
	if minTs == 0 {
		minTs, maxTs = e.clk.Now().UnixMilli(), e.clk.Now().UnixMilli()
	}
	var out []contract.ObjectEntry
	_, err := e.Publisher.Commit(e.ctx, c, func(ctx context.Context, base publisher.Snapshot) (publisher.Change, error) {
		out = nil
		for i := range n {
			key := contract.AppendSegmentKey(c, base.Head.Inc(), base.Head.Version+1, i)
			body := []byte("segment " + key)
			if _, err := e.Bucket.Put(ctx, key, body); err != nil {
				return publisher.Change{}, err
			}
			out = append(out, contract.ObjectEntry{Key: key, Size: int64(len(body)), Checksum: contract.Checksum(body), Tier: contract.TierHot,
				DocCount: 1, MinTsUnixMs: minTs, MaxTsUnixMs: maxTs, MinSeq: 1, MaxSeq: 1, MinRecordKey: "a", MaxRecordKey: "z"})
		}
		return publisher.Change{Added: out, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// commit applies a crafted change (removes and/or re-adds).
func (e *gcEnv) commit(c string, removed, added []contract.ObjectEntry) contract.Head {
	e.t.Helper()
	h, err := e.Publisher.Commit(e.ctx, c, func(context.Context, publisher.Snapshot) (publisher.Change, error) {
		return publisher.Change{Removed: removed, Added: added, Origin: contract.Origin{Kind: contract.OriginCutover, RequestID: "test"}}, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *gcEnv) watermark(safe time.Time) {
	e.t.Helper()
	if err := e.Watermark.Publish(e.ctx, safe, e.clk.Now()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *gcEnv) exists(key string) bool {
	e.t.Helper()
	_, err := e.Bucket.Size(e.ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

// missingRetained returns every object referenced by a manifest a token may
// still open (head + roots superseded less than TokenLifetime ago) that no
// longer exists: the violation every gate test looks for.
func (e *gcEnv) missingRetained(c string) []string {
	e.t.Helper()
	w, err := e.Lineage.WalkFrom(e.ctx, c, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	tl := e.Config.Policy.GC.TokenLifetime.Ms()
	now := e.clk.Now().UnixMilli()
	var missing []string
	for i := range w.Roots {
		if i > 0 && w.Roots[i-1].CommitTsUnixMs <= now-tl {
			continue
		}
		err := e.Lineage.Each(e.ctx, &w.Roots[i], nil, func(o contract.ObjectEntry) error {
			if !e.exists(o.Key) {
				missing = append(missing, fmt.Sprintf("v%d:%s", w.Roots[i].Version, o.Key))
			}
			return nil
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return missing
}

func keys(es []contract.ObjectEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

var (
	guardsOn       = guard.All()
	withoutGates   = mustWithout("delete_gates")
	withoutTrimOrd = mustWithout("manifest_before_objects")
)

func mustWithout(name string) guard.Set {
	g, ok := guard.Without(name)
	if !ok {
		panic(name)
	}
	return g
}

// bothWays runs scenario with every guard on (it must report no violation)
// and with one guard off (the violation must appear): the proof that the
// guard is what keeps the data safe.
func bothWays(t *testing.T, off guard.Set, scenario func(t *testing.T, g guard.Set) []string) {
	t.Run("guarded", func(t *testing.T) {
		if v := scenario(t, guardsOn); len(v) > 0 {
			t.Fatalf("violation with every guard on: %v", v)
		}
	})
	t.Run("guard_off", func(t *testing.T) {
		v := scenario(t, off)
		if len(v) == 0 {
			t.Fatal("no violation with the guard off: the test does not prove the guard")
		}
		t.Logf("violation with the guard off (expected): %v", v)
	})
}

func TestGCKeepsObjectPinnedByTokenLifetime(t *testing.T) {
	bothWays(t, withoutGates, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, func(p *policy.Policy) {
			p.GC.TokenLifetime, p.GC.RetentionWindow = policy.Duration(15*time.Minute), policy.Duration(10*time.Second)
		})
		e.create("c1", contract.Lifecycle{})
		old := e.add("c1", 1, 0, 0)
		pinned := e.add("c1", 1, 0, 0)
		e.commit("c1", old, nil) // old evicted now
		e.clk.Advance(20 * time.Minute)
		e.commit("c1", pinned, nil) // pinned evicted 1 minute before the sweep
		e.clk.Advance(time.Minute)
		e.watermark(e.clk.Now())
		ex, _ := e.executor(g, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if e.exists(old[0].Key) {
			t.Fatalf("positive control: %s is past every gate but was kept: %+v", old[0].Key, rep)
		}
		if g.DeleteGates && rep.DeferredByReason[gc.ReasonPinned] != 1 {
			t.Fatalf("want 1 deferred pinned_manifest, got %v", rep.DeferredByReason)
		}
		return e.missingRetained("c1")
	})
}

func TestGCUnreadableWatermarkDeletesNothing(t *testing.T) {
	bothWays(t, withoutGates, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		obj := e.add("c1", 2, 0, 0)
		e.commit("c1", obj, nil)
		e.clk.Advance(2 * time.Hour)
		if _, err := e.Bucket.Put(e.ctx, e.Config.WatermarkKey, []byte(`{"schema_version":1,"global_safe_ts_unix_ms":"soon"}`)); err != nil {
			t.Fatal(err)
		}
		ex, m := e.executor(g, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		var violations []string
		for _, o := range obj {
			if !e.exists(o.Key) {
				violations = append(violations, "deleted with an unreadable watermark: "+o.Key)
			}
		}
		if g.DeleteGates {
			if rep.Blocked == "" || rep.DeferredByReason[gc.ReasonWatermark] != 2 || m.Counts()["GCDeferred|Reason=watermark"] != 2 {
				t.Fatalf("want blocked with 2 deferred by watermark: %+v %v", rep, m.Counts())
			}
			// Positive control: once the watermark is readable the debt goes.
			e.watermark(e.clk.Now())
			if _, err := ex.Run(e.ctx, contract.Task{TaskID: "t2", Kind: contract.KindGC, Collection: "c1"}); err != nil {
				t.Fatal(err)
			}
			for _, o := range obj {
				if e.exists(o.Key) {
					t.Fatalf("positive control: %s kept after the watermark became readable", o.Key)
				}
			}
		}
		return violations
	})
}

func TestGCKeepsObjectInsideRetentionWindow(t *testing.T) {
	bothWays(t, withoutGates, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, func(p *policy.Policy) {
			p.GC.TokenLifetime, p.GC.RetentionWindow = policy.Duration(20*time.Second), policy.Duration(5*time.Minute) // a token lifetime of at least 2 x gc.proof_max_age_ms (policy.Validate)
		})
		e.create("c1", contract.Lifecycle{})
		early := e.add("c1", 1, 0, 0)
		late := e.add("c1", 1, 0, 0)
		e.commit("c1", early, nil)
		e.clk.Advance(30 * time.Minute)
		lateEvict := e.commit("c1", late, nil).CommittedAtUnixMs
		e.clk.Advance(10 * time.Minute)
		// The query plane lags: global_safe_ts is one minute after late's eviction.
		e.watermark(time.UnixMilli(lateEvict).Add(time.Minute))
		ex, _ := e.executor(g, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if e.exists(early[0].Key) {
			t.Fatalf("positive control: %s evicted before global_safe_ts - window was kept: %+v", early[0].Key, rep)
		}
		if !e.exists(late[0].Key) {
			return []string{"deleted inside the retention window: " + late[0].Key}
		}
		if rep.DeferredByReason[gc.ReasonRetentionWindow] != 1 {
			t.Fatalf("want 1 deferred retention_window, got %v", rep.DeferredByReason)
		}
		return nil
	})
}

func TestGCLifecycleRetentionUsesMaxTimestamp(t *testing.T) {
	bothWays(t, withoutGates, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{RetentionMs: (24 * time.Hour).Milliseconds()})
		now := e.clk.Now()
		old := e.add("c1", 1, now.Add(-72*time.Hour).UnixMilli(), now.Add(-48*time.Hour).UnixMilli())
		// min ts far past retention, max ts one hour old: must be kept.
		mixed := e.add("c1", 1, now.Add(-72*time.Hour).UnixMilli(), now.Add(-time.Hour).UnixMilli())
		e.commit("c1", append(old, mixed...), nil)
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		ex, _ := e.executor(g, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if e.exists(old[0].Key) {
			t.Fatalf("positive control: %s past lifecycle retention was kept: %+v", old[0].Key, rep)
		}
		if !e.exists(mixed[0].Key) {
			return []string{"deleted although its max timestamp is inside lifecycle retention: " + mixed[0].Key}
		}
		if rep.DeferredByReason[gc.ReasonLifecycle] != 1 {
			t.Fatalf("want 1 deferred lifecycle_retention, got %v", rep.DeferredByReason)
		}
		return nil
	})
}

func TestGCKeepsObjectRereferencedBetweenPlanAndExecution(t *testing.T) {
	bothWays(t, withoutGates, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		obj := e.add("c1", 2, 0, 0)
		e.commit("c1", obj, nil)
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		ex, _ := e.executor(g, nil)
		plan, err := ex.Plan(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Delete) != 2 {
			t.Fatalf("plan should delete both objects: %+v", plan)
		}
		// The publisher re-references one of them after the plan.
		e.commit("c1", nil, obj[:1])
		rep, err := ex.Apply(e.ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		if e.exists(obj[1].Key) {
			t.Fatalf("positive control: %s should be deleted: %+v", obj[1].Key, rep)
		}
		return e.missingRetained("c1")
	})
}

func TestGCStopsOnUnknownManifestField(t *testing.T) {
	bothWays(t, withoutGates, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		obj := e.add("c1", 1, 0, 0)
		e.commit("c1", obj, nil)
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		// A newer writer commits a root with a field this reader does not
		// understand (here: it would keep obj alive).
		head, err := e.Lineage.Head(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.Bucket.Get(e.ctx, head.ManifestKey)
		if err != nil {
			t.Fatal(err)
		}
		var root map[string]any
		if err := json.Unmarshal(b, &root); err != nil {
			t.Fatal(err)
		}
		root["version"], root["parent_version"], root["parent_key"], root["parent_checksum"] = head.Version+1, head.Version, head.ManifestKey, head.ManifestChecksum
		root["commit_ts_unix_ms"] = e.clk.Now().UnixMilli()
		root["change"] = map[string]any{"added": []any{}, "removed": []any{}}
		root["retained_objects"] = []string{obj[0].Key}
		nb, _ := json.Marshal(root)
		sum := contract.Checksum(nb)
		key := contract.ManifestKey("c1", 1, head.Version+1, sum)
		if _, err := e.Bucket.Put(e.ctx, key, nb); err != nil {
			t.Fatal(err)
		}
		hb, _ := contract.Encode(contract.Head{SchemaVersion: 1, Collection: "c1", Version: head.Version + 1, ManifestKey: key, ManifestChecksum: sum, CommittedAtUnixMs: e.clk.Now().UnixMilli()})
		if _, err := e.Bucket.Put(e.ctx, contract.HeadKey("c1"), hb); err != nil {
			t.Fatal(err)
		}
		ex, m := e.executor(g, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if g.DeleteGates && (rep.Refused != gc.RefusedManifest || m.Counts()["GCRefused|Reason=manifest"] != 1) {
			t.Fatalf("want a manifest refusal: %+v %v", rep, m.Counts())
		}
		if !e.exists(obj[0].Key) {
			return []string{"deleted while a manifest carries an unknown field: " + obj[0].Key}
		}
		return nil
	})
}

// flakyDeleter fails chosen keys the first time they are sent.
type flakyDeleter struct {
	gc.Deleter
	mu     sync.Mutex
	fail   map[string]int // key -> remaining failures (-1: always)
	calls  int
	maxLen int
}

func (f *flakyDeleter) DeleteProven(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
	ks := b.Keys()
	f.mu.Lock()
	f.calls++
	f.maxLen = max(f.maxLen, len(ks))
	var pass []string
	failed := map[string]string{}
	for _, k := range ks {
		if n := f.fail[k]; n != 0 {
			f.fail[k] = n - 1
			failed[k] = "InternalError: injected"
			continue
		}
		pass = append(pass, k)
	}
	f.mu.Unlock()
	res, err := f.Deleter.DeleteProven(ctx, b.Only(pass))
	if err != nil {
		return res, err
	}
	for k, v := range failed {
		res.Failed[k] = v
	}
	return res, nil
}

func TestGCRetriesPartialDeleteFailuresUntilConfirmed(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	obj := e.add("c1", 6, 0, 0)
	e.commit("c1", obj, nil)
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	// Two keys are already gone: S3 answers deleted, they count as done.
	for _, o := range obj[:2] {
		if err := e.Bucket.Delete(e.ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	fd := &flakyDeleter{fail: map[string]int{obj[2].Key: 1, obj[3].Key: 2}}
	ex, m := e.executor(guardsOn, func(d gc.Deleter) gc.Deleter { fd.Deleter = d; return fd })
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range obj {
		if e.exists(o.Key) || i >= 2 && !slices.Contains(rep.Deleted, o.Key) {
			t.Fatalf("%s not confirmed gone: %+v", o.Key, rep)
		}
	}
	if rep.AlreadyGone != 2 {
		t.Fatalf("the two keys the listing no longer shows are already gone, not deleted again: %+v", rep)
	}
	if rep.Retries != 2 || len(rep.Unconfirmed) != 0 || m.Counts()["GCDeleteRetries"] != 2 {
		t.Fatalf("want 2 retries and nothing unconfirmed: %+v", rep)
	}

	// A key that never confirms is reported and fails the task (and its
	// SQS record, so the message is retried); a malformed record fails too.
	e.create("c2", contract.Lifecycle{})
	obj2 := e.add("c2", 2, 0, 0)
	e.commit("c2", obj2, nil)
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	fd2 := &flakyDeleter{fail: map[string]int{obj2[0].Key: -1}}
	ex2, m2 := e.executor(guardsOn, func(d gc.Deleter) gc.Deleter { fd2.Deleter = d; return fd2 })
	rep2, err := ex2.Run(e.ctx, contract.Task{TaskID: "t2", Kind: contract.KindGC, Collection: "c2"})
	if !errors.Is(err, gc.ErrUnconfirmed) || rep2.Unconfirmed[obj2[0].Key] == "" {
		t.Fatalf("want ErrUnconfirmed naming %s: %v %+v", obj2[0].Key, err, rep2)
	}
	if !e.exists(obj2[0].Key) || e.exists(obj2[1].Key) {
		t.Fatal("exactly the failing key must remain")
	}
	h := handler.NewGC(ex2, m2, e.Metrics, e.clk.Now, nil)
	head, _ := e.Lineage.Head(e.ctx, "c2")
	task := contract.NewTask(contract.KindGC, "c2", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli())
	body, _ := contract.Encode(task)
	resp, err := h.Handle(e.ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: `{"schema_version":1,"task_kind":"gc"}`}, {MessageId: "m2", Body: string(body)}}})
	if err != nil || len(resp.BatchItemFailures) != 2 {
		t.Fatalf("malformed record and the record after it must fail: %+v %v", resp, err)
	}
	resp, _ = h.Handle(e.ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m3", Body: string(body)}}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m3" {
		t.Fatalf("unconfirmed deletes must fail the record: %+v", resp)
	}
	if !strings.Contains(e.Metrics.String(), `"GCUnconfirmedDeletes":1`) {
		t.Fatalf("metrics not flushed as EMF: %s", e.Metrics.String())
	}
}

// crashingDeleter deletes the coordinator's table and re-creates it empty on
// its n-th data-object call, then fails every data-object call (the worker
// "crashed" mid-run). Manifest deletes pass.
type crashingDeleter struct {
	gc.Deleter
	e       *gcEnv
	n       int
	calls   int
	crashed bool
}

func (d *crashingDeleter) DeleteProven(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
	ks := b.Keys()
	data := slices.ContainsFunc(ks, func(k string) bool { return strings.Contains(k, "/data/") })
	if data {
		d.calls++
		if d.calls >= d.n && !d.crashed {
			d.crashed = true
			def := d.e.Prov.Def
			if _, err := d.e.Clients.Dynamo.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(def.Table.Name)}); err != nil {
				return gc.DeleteResult{}, err
			}
			if _, err := localaws.Provision(ctx, localaws.Clients{S3: d.e.Clients.S3, Dynamo: d.e.Clients.Dynamo, SQS: d.e.Clients.SQS}, def, localaws.ProvisionOptions{VisibilityTimeout: 2 * time.Second}); err != nil { // as localenv provisions
				return gc.DeleteResult{}, err
			}
		}
		if d.crashed {
			return gc.DeleteResult{}, errors.New("worker crashed")
		}
	}
	return d.Deleter.DeleteProven(ctx, b)
}

func TestGCRecoversAllDebtAfterTableLossMidRun(t *testing.T) {
	bothWays(t, withoutTrimOrd, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, func(p *policy.Policy) {
			p.GC.BatchSize, p.MaxTaskLifetime, p.CutoverDeadline = 4, policy.Duration(48*time.Hour), policy.Duration(48*time.Hour)
		})
		e.create("c1", contract.Lifecycle{})
		var removed []contract.ObjectEntry
		for range 5 {
			objs := e.add("c1", 3, 0, 0)
			e.clk.Advance(time.Minute)
			e.commit("c1", objs, nil)
			removed = append(removed, objs...)
		}
		live := e.add("c1", 2, 0, 0)
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		// The observer has recorded the collection's state in the table.
		if _, err := e.Reconcile(e.ctx); err != nil {
			t.Fatal(err)
		}
		cd := &crashingDeleter{e: e, n: 2}
		ex1, _ := e.executor(g, func(d gc.Deleter) gc.Deleter { cd.Deleter = d; return cd })
		if _, err := ex1.Run(e.ctx, contract.Task{TaskID: "t1", Kind: contract.KindGC, Collection: "c1"}); err == nil {
			t.Fatal("the crashed run should fail")
		}
		var left []string
		for _, o := range removed {
			if e.exists(o.Key) {
				left = append(left, o.Key)
			}
		}
		if len(left) == 0 {
			t.Fatal("the crash should leave debt behind")
		}
		// A fresh worker with no memory and an empty table: the walk from the
		// head must find every remaining piece of debt.
		ex2, _ := e.executor(g, nil)
		plan, err := ex2.Plan(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, c := range plan.Delete {
			found[c.Entry.Key] = true
		}
		var lost []string
		for _, k := range left {
			if !found[k] {
				lost = append(lost, "debt not rediscoverable from the head: "+k)
			}
		}
		rep, err := ex2.Run(e.ctx, contract.Task{TaskID: "t2", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range left {
			if e.exists(k) && found[k] {
				t.Fatalf("rediscovered debt %s not deleted: %+v", k, rep)
			}
		}
		for _, o := range live {
			if !e.exists(o.Key) {
				t.Fatalf("live object %s deleted", o.Key)
			}
		}
		if g.ManifestBeforeObjects {
			w, _ := e.Lineage.WalkFrom(e.ctx, "c1", 1)
			if len(w.Roots) > 2 || rep.ManifestsDeleted == 0 {
				t.Fatalf("all but the retained roots should be trimmed after recovery: %d roots, %+v", len(w.Roots), rep)
			}
		}
		return lost
	})
}

func TestGCNeverCommittedOutputsAfterTaskLifetime(t *testing.T) {
	bothWays(t, withoutGates, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil) // reclaimed after cutover deadline 30m + 2 x clock skew 2m
		e.create("c1", contract.Lifecycle{})
		live := e.add("c1", 1, 0, 0)
		head, _ := e.Lineage.Head(e.ctx, "c1")
		crashed := contract.NewTask(contract.KindCompaction, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli())
		orphan := contract.RewriteOutputKey("c1", 1, crashed.TaskID, 0)
		if _, err := e.Bucket.Put(e.ctx, orphan, []byte("never committed")); err != nil {
			t.Fatal(err)
		}
		e.watermark(e.clk.Now())
		ex, _ := e.executor(g, nil)
		if _, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"}); err != nil {
			t.Fatal(err)
		}
		var v []string
		if !e.exists(orphan) {
			v = append(v, "young never-committed output deleted (a worker may still commit it): "+orphan)
		}
		if g.DeleteGates {
			e.clk.Advance(35 * time.Minute)
			e.watermark(e.clk.Now())
			rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
			if err != nil {
				t.Fatal(err)
			}
			if e.exists(orphan) || rep.OrphansDeleted != 1 {
				t.Fatalf("old never-committed output should be reclaimed: %+v", rep)
			}
		}
		if !e.exists(live[0].Key) {
			v = append(v, "live object deleted by orphan reclaim")
		}
		return v
	})
}

// A dropped collection is cleaned in bounded runs (each at most
// tombstone_max_calls delete calls) that resume from the cursor stored in
// the table, also after a run that crashed mid-way; at the end nothing of
// the incarnation remains (objects, roots, parts, change parts, the head)
// and exactly one completion is handed off; a run after that does nothing.
func TestGCTombstoneCleanupBoundedRunsResume(t *testing.T) {
	e := startGC(t, func(p *policy.Policy) { p.GC.TombstoneMaxCalls, p.GC.BatchSize = 3, 4 })
	e.create("c1", contract.Lifecycle{})
	var all []contract.ObjectEntry
	for range 4 {
		all = append(all, e.add("c1", 10, 0, 0)...)
	}
	e.commit("c1", all[:12], nil) // removals the next sweep has not deleted yet
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	// The run that first deletes manifests dies there (its context ends:
	// the function timed out), saving nothing.
	crashed := false
	var kill context.CancelFunc
	ex, _ := e.executor(guard.All(), func(d gc.Deleter) gc.Deleter {
		return deleterFunc(func(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
			if !crashed && strings.Contains(b.Keys()[0], "/manifests/") {
				crashed = true
				kill()
				return gc.DeleteResult{}, ctx.Err()
			}
			return d.DeleteProven(ctx, b)
		})
	})
	runs, failures := 0, 0
	var rep gc.TombstoneReport
	for ; runs < 100; runs++ {
		var ctx context.Context
		ctx, kill = context.WithCancel(e.ctx)
		rep, err = ex.RunTombstone(ctx, task)
		kill()
		if rep.Calls > 3 {
			t.Fatalf("run %d made %d delete calls, over its budget of 3", runs, rep.Calls)
		}
		if err != nil {
			failures++
			continue
		}
		if rep.Outcome == gc.TombCompleted {
			break
		}
		if rep.Outcome != gc.TombProgressed {
			t.Fatalf("run %d: %+v", runs, rep)
		}
	}
	if rep.Outcome != gc.TombCompleted || !crashed || failures != 1 || runs < 5 {
		t.Fatalf("after %d runs (%d failed, crashed %v): %+v", runs, failures, crashed, rep)
	}
	ls, err := e.Bucket.List(e.ctx, contract.CollectionPrefix("c1"))
	if err != nil || len(ls) > 0 {
		t.Fatalf("%d keys of the dropped incarnation remain: %v", len(ls), err)
	}
	if rep, _ = ex.RunTombstone(e.ctx, task); rep.Outcome != gc.TombDone || rep.Calls != 0 {
		t.Fatalf("a run after completion: %+v", rep)
	}
	msgs := receiveAll(t, e, resources.QueueHandoff)
	if len(msgs) != 1 {
		t.Fatalf("%d completions, want 1", len(msgs))
	}
	c, err := contract.DecodeCompletion("handoff", []byte(msgs[0]))
	if err != nil || c.Cleanup == nil || !c.Cleanup.Complete || len(c.Cleanup.Dependencies) != 6 {
		t.Fatalf("completion %s: %v", msgs[0], err)
	}
	t.Logf("%d runs, %d delete calls, %d objects", runs+1, rep.Progress.DeleteCalls, rep.Progress.ObjectsDeleted)
}

type deleterFunc func(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error)

func (f deleterFunc) DeleteProven(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
	return f(ctx, b)
}

func receiveAll(t *testing.T, e *gcEnv, class string) []string {
	t.Helper()
	var out []string
	for {
		r, err := e.Clients.SQS.ReceiveMessage(e.ctx, receiveRequest(e.Prov.QueueURLs[class]))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			remember(m)
			out = append(out, aws.ToString(m.Body))
			if _, err := e.Clients.SQS.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.Prov.QueueURLs[class]), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// countingDeleter records the size of every delete call carrying data keys.
type countingDeleter struct {
	gc.Deleter
	dataCalls, dataKeys int
}

func (d *countingDeleter) DeleteProven(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
	ks := b.Keys()
	if slices.ContainsFunc(ks, func(k string) bool { return strings.Contains(k, "/data/") }) {
		d.dataCalls++
		d.dataKeys += len(ks)
	}
	return d.Deleter.DeleteProven(ctx, b)
}

// BenchmarkGCDeleteLargeCandidateSet sweeps a collection whose last commit
// removed n objects, on the embedded stack with the production wiring and a
// real-time pacer, and reports keys per DeleteObjects call and the achieved
// delete rate against the configured pace.
func BenchmarkGCDeleteLargeCandidateSet(b *testing.B) {
	const n = 6000
	const pace = 4000.0 // keys/s per collection
	e := startGC(b, func(p *policy.Policy) { p.GC.DeletesPerSec, p.GC.GlobalDeletesPerSec = pace, 2*pace })
	var s3Calls, s3Keys int
	var elapsed time.Duration
	cd := &countingDeleter{}
	deleted := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := fmt.Sprintf("bench-%d", i)
		e.create(c, contract.Lifecycle{})
		objs := e.add(c, n, 0, 0)
		e.commit(c, objs, nil)
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		ports := app.GCPorts(e.Config, e.FunctionClients(resources.FnGC))
		cd.Deleter = ports.Deleter
		ports.Deleter = cd
		cfg := gc.ConfigFrom(e.Config.Policy, guard.All())
		pacer := gc.NewPacer(pace, 2*pace, cfg.BatchSize, time.Now, gc.SleepContext)
		ex := gc.New(ports, cfg, pacer, e.clk.Now, gc.SleepContext, metrics.New(resources.FnGC), nil)
		before := e.Stack.Counter().Snapshot()
		b.StartTimer()
		start := time.Now()
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: c, Kind: contract.KindGC, Collection: c})
		elapsed += time.Since(start)
		b.StopTimer()
		if err != nil || rep.ObjectsDeleted != n {
			b.Fatalf("sweep: %v %+v", err, rep.ObjectsDeleted)
		}
		s3Calls += e.Stack.Counter().Since(before)["s3:DeleteObjects"]
		s3Keys += rep.KeysSent
		deleted += rep.ObjectsDeleted
		b.StartTimer()
	}
	b.ReportMetric(float64(cd.dataKeys)/float64(cd.dataCalls), "data_keys/call")
	b.ReportMetric(float64(s3Keys)/float64(s3Calls), "all_keys/call")
	b.ReportMetric(float64(deleted)/elapsed.Seconds(), "deletes/s")
	b.ReportMetric(pace, "configured/s")
}
