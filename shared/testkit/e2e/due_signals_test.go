package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// durationsDim returns the observations of an EMF duration metric on the
// lines whose dimension dim is value.
func durationsDim(env *localenv.Env, name, dim, value string) []float64 {
	var out []float64
	for _, line := range strings.Split(env.Metrics.String(), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil || m[dim] != value {
			continue
		}
		vs, _ := m[name].([]any)
		for _, v := range vs {
			if f, ok := v.(float64); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// Issue 16 item 4 (seed §10: queue depth and age of the oldest due item
// per task class): a shared FIFO queue cannot say how many messages of one
// kind it holds, so reconciliation derives both from the durable debt it
// re-reads. Three collections owe compaction (no worker runs here), one a
// lifecycle transition, one is dropped and owes its cleanup: one pass
// emits DueWork 3/1/1 by Kind and each class's oldest due age, measured
// from when the work became due (not from when the pass ran).
func TestReconcileSignalsDepthAndOldestDuePerClass(t *testing.T) {
	clock := newCxClock()
	env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: cxPolicy(4)})
	ctx := context.Background()
	for _, c := range []string{"c1", "c2", "c3"} {
		if err := env.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
		cxAppend(t, env, c, 4) // merge factor 4: compaction due from the fourth head on
		cxSettle(t, env)
		clock.Advance(10 * time.Minute)
	}
	if err := env.Workload.Create(ctx, "t1", toCold); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "t1", 1)
	cxSettle(t, env)
	if err := env.Workload.Create(ctx, "d1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "d1", 1)
	cxSettle(t, env)
	dropped := clock.Now()
	changeFacts(t, env, "d1", func(f *contract.CollectionFacts) {
		f.Tombstoned, f.TombstonedAtUnixMs, f.ReservationHorizonUnixMs = true, dropped.UnixMilli(), dropped.UnixMilli()
	})
	clock.Advance(2 * time.Hour) // t1's objects are an hour past transition_after_ms
	env.Metrics.Reset()
	if _, err := env.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[contract.TaskKind]float64{contract.KindCompaction: 3, contract.KindLifecycleTransition: 1, contract.KindTombstoneCleanup: 1}
	for k, n := range want {
		if got := metricDim(env, "DueWork", "Kind", string(k)); got != n {
			t.Errorf("DueWork{Kind=%s} = %v, want %v", k, got, n)
		}
	}
	oldest := func(k contract.TaskKind) time.Duration {
		var m float64
		for _, v := range durationsDim(env, "OldestDueAgeMs", "Kind", string(k)) {
			m = max(m, v)
		}
		return time.Duration(m) * time.Millisecond
	}
	// c1 became due first: 2h plus the 30 minutes spent on c1..c3.
	if got := oldest(contract.KindCompaction); got < 2*time.Hour+30*time.Minute || got > 2*time.Hour+31*time.Minute {
		t.Errorf("oldest due compaction %v, want c1's 2h30m", got)
	}
	if got := oldest(contract.KindLifecycleTransition); got < 55*time.Minute || got > 61*time.Minute {
		t.Errorf("oldest due transition %v, want about 1h (objects 2h old, transition after 1h)", got)
	}
	// A cleanup is owed once the drop is a token lifetime old and behind
	// the watermark by the retention window (and the horizon passed).
	gates := env.Config.Policy.GC.TokenLifetime.D() + env.Config.Policy.GC.RetentionWindow.D()
	if got := oldest(contract.KindTombstoneCleanup); got < 2*time.Hour-gates || got > 2*time.Hour-gates+time.Minute {
		t.Errorf("oldest due tombstone cleanup %v, want 2h - %v", got, gates)
	}
	// Nothing else is due.
	for _, k := range []contract.TaskKind{contract.KindRetentionReclaim, contract.KindGC} {
		if got := metricDim(env, "DueWork", "Kind", string(k)); got != 0 {
			t.Errorf("DueWork{Kind=%s} = %v, want 0", k, got)
		}
	}
}
