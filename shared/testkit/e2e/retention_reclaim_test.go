package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// metricDim sums an EMF metric over the lines whose dimension dim is value.
func metricDim(env *localenv.Env, name, dim, value string) float64 {
	var sum float64
	for _, line := range strings.Split(env.Metrics.String(), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil || m[dim] != value {
			continue
		}
		if v, ok := m[name].(float64); ok {
			sum += v
		}
	}
	return sum
}

// Issue 16 item 2: a lifecycle retention window is a task class of its
// own. Objects a cutover dereferenced, past the token lifetime and behind
// the watermark by the retention window, but younger (by their maximum
// timestamp) than the lifecycle retention_ms, are held by lifecycle
// retention alone: the GC sweep defers them and records when the window
// becomes due. Reconciliation enqueues nothing for them until then (the
// periodic sweep is a day away), and once due a retention_reclaim task,
// run by the GC executor under the very gates of a GC sweep, deletes them.
func TestRetentionReclaimDeletesAWindowOnlyOnceDue(t *testing.T) {
	clock := newCxClock()
	p := cxPolicy(4)
	p.GC.TokenLifetime, p.GC.RetentionWindow = policy.Duration(time.Minute), policy.Duration(time.Minute)
	p.GC.SweepInterval = policy.Duration(24 * time.Hour)
	env := cxStart(t, localenv.Options{Now: clock.Now, Policy: p})
	ctx := context.Background()
	const retention = 3 * time.Hour
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{RetentionMs: retention.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 4) // merge factor 4: compacted into one object
	cxSettle(t, env)
	roots := cxLineage(t, env, "c1")
	if len(cxCutovers(roots)) != 1 {
		t.Fatalf("want one compaction cutover, lineage has %d roots", len(roots))
	}
	var old []string // what the cutover dereferenced
	for _, r := range roots {
		if r.Origin.Kind == contract.OriginCutover {
			for _, o := range r.Change.Removed {
				old = append(old, o.Key)
			}
		}
	}
	if len(old) != 4 {
		t.Fatalf("the cutover removed %d objects, want 4", len(old))
	}
	exist := func() int {
		n := 0
		for _, k := range old {
			if _, err := env.Bucket.Get(ctx, k); err == nil {
				n++
			}
		}
		return n
	}
	pass := func(after time.Duration) {
		t.Helper()
		clock.Advance(after)
		if err := env.Watermark.Publish(ctx, clock.Now(), clock.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		cxSettle(t, env)
	}
	reclaims := func() float64 { return metricDim(env, "GCTasksRun", "Kind", string(contract.KindRetentionReclaim)) }

	// Past the token lifetime and the retention window (and the grace of
	// any never-committed output a racing sweep may have seen, which can
	// be the debt's recorded due time): the GC sweep runs and defers all
	// four by lifecycle retention alone.
	pass(40 * time.Minute)
	if n := exist(); n != 4 {
		t.Fatalf("%d of 4 objects under lifecycle retention deleted by the GC sweep", 4-n)
	}
	if got := metricDim(env, "GCDeferred", "Reason", gc.ReasonLifecycle); got != 4 {
		t.Fatalf("GCDeferred lifecycle_retention = %v, want 4 (GCDeferred %v, gc tasks %v, deferred for a class slot %v)", got,
			cxMetric(env, "GCDeferred"), cxMetric(env, "GCTasksRun"), cxMetric(env, "TasksDeferred"))
	}
	// Not yet due (2h10m of 3h): no retention_reclaim task, nothing deleted.
	pass(90 * time.Minute)
	if n, r := exist(), reclaims(); n != 4 || r != 0 {
		t.Fatalf("before the window is due: %d of 4 objects left, %v retention_reclaim tasks run; want 4 and 0", n, r)
	}
	if early := cxMetric(env, "RetentionReclaimEarly"); early != 0 {
		t.Fatalf("%v retention_reclaim tasks delivered before their due time", early)
	}
	// A retention_reclaim task that claims the window is due (an operator's
	// enqueue, a clock running ahead) deletes nothing: the executor judges
	// lifecycle retention itself, at execution time (SYSTEM rule 3).
	_, early := headTask(t, env, "c1", func(k contract.TaskKind, c string, v uint64, sum string, fv uint64, now int64) contract.Task {
		return contract.NewRetentionReclaimTask(c, v, sum, fv, now, now)
	}, contract.KindRetentionReclaim)
	if failed, _ := cxInvoke(t, env, resources.FnGC, early); len(failed) > 0 {
		t.Fatal("gc function failed the early retention_reclaim task")
	}
	if n, r := exist(), reclaims(); n != 4 || r != 1 {
		t.Fatalf("early retention_reclaim task: %d of 4 objects left after %v runs; want 4 left", n, r)
	}
	// Due: reconciliation schedules the window's retention_reclaim task.
	pass(time.Hour)
	if r := reclaims(); r < 2 {
		t.Fatalf("retention due and reconciled: %v retention_reclaim tasks run", r)
	}
	if n := exist(); n != 0 {
		t.Fatalf("after the retention_reclaim task: %d of 4 objects left", n)
	}
	if got := metricDim(env, "ObjectsReclaimed", "Kind", string(contract.KindRetentionReclaim)); got != 4 {
		t.Fatalf("ObjectsReclaimed by retention_reclaim = %v, want 4", got)
	}
	// The window was reclaimed by its own class, not by a GC sweep.
	if g := metricDim(env, "ObjectsReclaimed", "Kind", string(contract.KindGC)); g != 0 {
		t.Fatalf("gc tasks deleted %v objects, want 0 (the window is retention_reclaim's)", g)
	}
	cxVerify(t, env, "c1")
}
