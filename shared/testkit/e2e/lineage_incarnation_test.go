package e2e

import (
	"context"
	"time"

	"testing"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/testkit/naive"
)

// confirmer records an operator's lineage confirmation (bcc
// confirm-lineage's write).
type confirmer interface {
	ConfirmLineage(ctx context.Context, c contract.LineageConfirmation) error
}

// An operator's lineage confirmation belongs to one lifetime of a name
// (guard.LineageIncarnation). Lifetime 1 of c1 is restored and confirmed,
// dropped, released and re-created; lifetime 2 is restored in its turn:
//   - lifetime 1's confirmation does not answer lifetime 2's regression
//     (GC refuses and shows no confirmation);
//   - confirming lifetime 2 forgets lifetime 2's observed state above the
//     restored head (so the observer schedules the restored lineage);
//   - a late confirmation of lifetime 1 (an operator's command planned
//     before the drop, recorded after the re-creation) changes nothing for
//     lifetime 2.
//
// With the guard off the confirmation is kept per name, as before
// incarnations (naive.NameKeyedConfirmations), and applied to any head.
func TestLineageConfirmationNeverCrossesLifetimes(t *testing.T) {
	bothWays(t, mustWithout("lineage_incarnation"), func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		var store confirmer = awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
		if !g.LineageIncarnation {
			store = naive.NewNameKeyedConfirmations(e.Clients.Dynamo, e.Config.Table)
		}
		observed := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
		plan := func() (gc.Plan, error) {
			ex, _ := e.executor(g, nil)
			return ex.Plan(e.ctx, "c1")
		}
		confirm := func(p gc.Plan) contract.LineageConfirmation {
			conf, ok := gc.ConfirmationFor(p, "test", "restored", e.clk.Now())
			if !ok {
				t.Fatalf("nothing to confirm in %+v", p)
			}
			if err := store.ConfirmLineage(e.ctx, conf); err != nil {
				t.Fatal(err)
			}
			return conf
		}
		restore := func(v uint64) {
			if _, err := e.Publisher.Restore(e.ctx, "c1", v); err != nil {
				t.Fatal(err)
			}
		}

		// Lifetime 1: v3 observed, restored to v2, confirmed.
		e.create("c1", contract.Lifecycle{})
		e.add("c1", 1, 0, 0)
		e.add("c1", 1, 0, 0)
		e.reconcile()
		restore(2)
		p1, err := plan()
		if err == nil || p1.Incarnation != 1 {
			t.Fatalf("lifetime 1's regression must refuse GC: %+v %v", p1, err)
		}
		conf1 := confirm(p1)
		if conf1.Inc() != 1 || conf1.Incarnation != 0 {
			t.Fatalf("lifetime 1's confirmation: %+v", conf1)
		}
		if p, err := plan(); err != nil || p.Confirmation == nil {
			t.Fatalf("lifetime 1 confirmed: %+v %v", p, err)
		}

		// Dropped, released, re-created as lifetime 2: v3 observed,
		// restored to v2.
		if _, err := dropSeen(t, e.Env, e.ctx, "c1", 0); err != nil {
			t.Fatal(err)
		}
		if err := e.Bucket.Delete(e.ctx, contract.HeadKey("c1")); err != nil {
			t.Fatal(err)
		}
		f, _ := e.CCS.Facts(e.ctx, "c1")
		f.ReleaseIntentRecorded = true
		if _, err := e.CCS.PutFacts(e.ctx, f); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Hour)
		e.create("c1", contract.Lifecycle{})
		e.add("c1", 1, 0, 0)
		e.add("c1", 1, 0, 0)
		e.reconcile()
		if st, err := observed.Get(e.ctx, "c1", 2); err != nil || st.Version != 3 {
			t.Fatalf("lifetime 2 observed at v3: %+v %v", st, err)
		}
		restore(2)

		var v []string
		p2, err := plan()
		if p2.Incarnation != 2 {
			t.Fatalf("plan of lifetime 2: %+v %v", p2, err)
		}
		if p2.Confirmation != nil || p2.LineageConfirmed {
			v = append(v, "lifetime 1's confirmation is shown as lifetime 2's")
		}
		if err == nil {
			v = append(v, "lifetime 2's regression was answered by lifetime 1's confirmation")
		}

		// The operator confirms lifetime 2.
		conf2 := confirm(p2)
		if conf2.Inc() != 2 {
			t.Fatalf("lifetime 2's confirmation names incarnation %d", conf2.Inc())
		}
		if st, err := observed.Get(e.ctx, "c1", 2); err != nil {
			t.Fatal(err)
		} else if st.Version > 2 {
			v = append(v, "confirming lifetime 2 left its observed state at v3 above the restored head v2: the observer never schedules the restored lineage")
		}
		if p, err := plan(); err != nil || p.Confirmation == nil || p.Confirmation.Inc() != 2 {
			t.Fatalf("lifetime 2 confirmed: GC resumes under its own confirmation: %+v %v", p.Confirmation, err)
		}

		// A late confirmation of lifetime 1 changes nothing for lifetime 2.
		if err := store.ConfirmLineage(e.ctx, conf1); err != nil {
			t.Fatal(err)
		}
		p3, err := plan()
		switch {
		case err != nil:
			v = append(v, "a late confirmation of lifetime 1 made GC refuse lifetime 2 again: "+err.Error())
		case p3.Confirmation == nil || p3.Confirmation.Inc() != 2:
			v = append(v, "a late confirmation of lifetime 1 replaced lifetime 2's")
		}
		return v
	})
}
