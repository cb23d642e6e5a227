package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Rule 16: a lifecycle transition's sweep time is its sender's word. A
// task dated ten days ahead (a forged message; the compaction queue
// admits the observer's and compaction's own roles) moves nothing: the
// executor refuses a sweep time after its clock plus the skew allowance
// (guard sweep_clock; off, objects appended seconds ago go cold).
func TestFutureSweepTimeMovesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    guard.Set
		cold bool
	}{{"guarded", guard.All(), false}, {"sweep_clock_off", without(t, "sweep_clock"), true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newCxClock()
			env := cxStart(t, localenv.Options{NoDelivery: true, Now: clock.Now, Policy: cxPolicy(100)})
			ctx := context.Background()
			if err := env.Workload.Create(ctx, "c1", toCold); err != nil {
				t.Fatal(err)
			}
			cxAppend(t, env, "c1", 4)
			cxSettle(t, env)
			head, err := env.Lineage.Head(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			f, err := env.CCS.Facts(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			tk := contract.NewSweepTask(contract.KindLifecycleTransition, "c1", head.Version, head.ManifestChecksum, f.FactsVersion, clock.Now().Add(10*24*time.Hour).UnixMilli())
			body, err := contract.Encode(tk)
			if err != nil {
				t.Fatal(err)
			}
			g := tc.g
			cxRegisterCompaction(env, app.CompactionOptions{Guards: &g})
			cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
			if failed, _ := cxInvoke(t, env, resources.FnCompaction, string(body)); len(failed) != 0 {
				t.Fatal("compaction failed")
			}
			cxHandoff(t, env)
			if _, objs := headObjects(t, env, "c1"); (tiers(objs)[contract.TierCold] > 0) != tc.cold {
				t.Fatalf("a task dated 10 days ahead: tiers %v, want cold %v", tiers(objs), tc.cold)
			}
		})
	}
}
