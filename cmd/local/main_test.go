package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// metricSums adds up every EMF value of the named metrics written so far,
// per metric and Kind ("" without one).
func metricSums(e *localenv.Env, names ...string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(e.Metrics.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["_aws"] == nil {
			continue
		}
		kind, _ := m["Kind"].(string)
		for _, n := range names {
			if v, ok := m[n].(float64); ok {
				out[n+"/"+kind] += v
				out[n] += v
			}
		}
	}
	return out
}

// Under make local (its flags: the time scale; here 600 so the test takes
// seconds), the scheduled reconciliation runs by itself: a collection
// written to gets a GC sweep that deletes what became garbage, and a
// dropped one its tombstone cleanup and release intent, with no operator
// action (no bcc apply, no Reconcile call) — only writes and a drop, as a
// user's workload makes them.
func TestMakeLocalSweepsAndCleansUpWithNoOperatorAction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	var banner bytes.Buffer
	env, err := start(ctx, []string{"-addr", "127.0.0.1:0", "-time-scale", "600", "-dashboard", ""}, &banner, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	for _, want := range []string{"600 times faster", "reconciliation every 0.5s (deployed 5m0s)", "AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION="} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}
	for _, c := range []string{"live", "gone"} {
		if err := env.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			if _, err := env.Workload.Append(ctx, c, env.Workload.Random()); err != nil {
				t.Fatal(err)
			}
			// Each write is handled (its compaction cut over) before the
			// next, as a collection written at a human pace is: a
			// compaction whose base moved under a delete-bearing write is
			// rejected, and its never-committed output then holds a later
			// drop's cleanup until the task's lifetime ends (unscaled:
			// tied to the function timeouts), far past this test.
			if err := env.Settle(ctx, 30*time.Second); err != nil {
				t.Logf("write to %s not settled: %v", c, err)
			}
		}
	}
	// The drop comes once the writes' compactions are done, as an
	// operator drops a collection its users stopped writing to: a rewrite
	// still running at the drop leaves an output that may still be
	// committed until the task's lifetime ends (unscaled, tied to the
	// function timeouts), and the cleanup rightly waits that long for it.
	if err := env.Settle(ctx, time.Minute); err != nil {
		t.Logf("not settled before the drop: %v", err)
	}
	if _, err := env.CCS.Drop(ctx, "gone", 0); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	// Sweep and cleanup task identities carry the wall-clock minute (two
	// reconciliations within one minute collapse into one task), so a
	// collection is swept or cleaned at most once a minute whatever the
	// time scale; the cleanup takes up to three runs (pinned lineage held,
	// head retired and outputs listed, release): up to four minutes.
	deadline := began.Add(5 * time.Minute)
	first := map[string]time.Duration{}
	seen := func(what string, ok bool) bool {
		if _, done := first[what]; ok && !done {
			first[what] = time.Since(began).Round(100 * time.Millisecond)
		}
		return ok
	}
	for {
		m := metricSums(env, "ObjectsReclaimed", "GCTasksRun", "TombstonesCompleted")
		intents, err := env.CCS.Intents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		released := false
		for _, in := range intents {
			released = released || in.Collection == "gone"
		}
		left, err := env.Bucket.List(ctx, contract.CollectionsPrefix+"gone/")
		if err != nil {
			t.Fatal(err)
		}
		sweep, tomb, rel, gone := seen("gc sweep reclaimed", m["ObjectsReclaimed/gc"] > 0), seen("tombstone completed", m["TombstonesCompleted"] > 0),
			seen("release intent", released), seen("keys gone", len(left) == 0)
		if sweep && tomb && rel && gone {
			t.Logf("first seen after: %v; metrics %v", first, m)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sweep or cleanup by the local schedule: metrics %v, release intent %v, %d keys of the dropped collection left (seen %v)", m, released, len(left), first)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The live collection still reads back whole.
	if _, err := env.Lineage.Head(ctx, "live"); err != nil {
		t.Fatalf("live head: %v", err)
	}
}
