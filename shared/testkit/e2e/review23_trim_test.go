package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
)

// Review 23 D3: the order "objects before the manifests that index them"
// is the gate's (judgeManifest holds a root or part while objects it
// alone indexes are not confirmed gone; proveManifests tells it how many,
// guard.ManifestBeforeObjects). One object's delete is never confirmed
// (the bucket refuses that key on every attempt): the trim must keep every
// root from the one indexing it on, so a fresh worker with no memory still
// rediscovers the object from the head. With the guard off (or the gate's
// clause removed) the trim deletes the root and the object leaks.
func TestTrimKeepsTheRootOfAnUnconfirmedObjectDelete(t *testing.T) {
	bothWays(t, withoutTrimOrd, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		var removed []contract.ObjectEntry
		for range 4 {
			objs := e.add("c1", 2, 0, 0)
			e.clk.Advance(time.Minute)
			e.commit("c1", objs, nil)
			removed = append(removed, objs...)
		}
		live := e.add("c1", 1, 0, 0)
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		stuck := removed[0].Key // evicted by the oldest commit
		ex, _ := e.executor(g, func(d gc.Deleter) gc.Deleter {
			return deleterFunc(func(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
				var rest []string
				for _, k := range b.Keys() {
					if k != stuck {
						rest = append(rest, k)
					}
				}
				if len(rest) == b.Len() {
					return d.DeleteProven(ctx, b)
				}
				res := gc.DeleteResult{Failed: map[string]string{stuck: "AccessDenied (injected)"}}
				if len(rest) > 0 {
					r, err := d.DeleteProven(ctx, b.Only(rest))
					if err != nil {
						return r, err
					}
					res.Deleted = r.Deleted
					for k, v := range r.Failed {
						res.Failed[k] = v
					}
				}
				return res, nil
			})
		})
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil && !errors.Is(err, gc.ErrUnconfirmed) {
			t.Fatal(err)
		}
		if !e.exists(stuck) {
			t.Fatalf("the stuck object %s was deleted: %+v", stuck, rep)
		}
		if g.ManifestBeforeObjects && (rep.ObjectsDeleted != len(removed)-1 || rep.Unconfirmed[stuck] == "") {
			t.Fatalf("want every other object deleted and %s unconfirmed: %+v", stuck, rep)
		}
		for _, o := range live {
			if !e.exists(o.Key) {
				t.Fatalf("live object %s deleted", o.Key)
			}
		}
		ex2, _ := e.executor(g, nil)
		plan, err := ex2.Plan(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		for _, cd := range plan.Delete {
			if cd.Entry.Key == stuck {
				return nil
			}
		}
		return []string{fmt.Sprintf("the object %s whose delete was never confirmed is not rediscoverable from the head (trim stopped at v%d, %d roots deleted): it leaked", stuck, rep.TrimStoppedAt, rep.ManifestsDeleted)}
	})
}
