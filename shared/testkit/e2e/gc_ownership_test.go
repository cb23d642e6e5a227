package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
)

var (
	withoutOwnership  = mustWithout("orphan_ownership")
	withoutFreshProof = mustWithout("fresh_proof")
)

// Issue 10 item 1 / rule 11: orphan reclaim deletes only the coordinator's
// own never-committed outputs. Another writer's upload under data/ (an
// ingest segment whose commit has not landed, a snapshot import, a bulk
// load) is never deleted, however old; when its commit lands late, it
// reads.
func TestGCNeverDeletesAnotherWritersUpload(t *testing.T) {
	bothWays(t, withoutOwnership, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		live := e.add("c1", 1, 0, 0)
		head, err := e.Lineage.Head(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		ingest := contract.AppendSegmentKey("c1", 1, head.Version+1, 0) // its commit lands later
		foreign := []string{ingest, contract.DataPrefix("c1") + "l1/import-2026-01-01/0000.seg", contract.DataPrefix("c1") + "l2/bulk-load-7/part-00001.seg"}
		for _, k := range foreign {
			if _, err := e.Bucket.Put(e.ctx, k, []byte("uploaded by another writer: "+k)); err != nil {
				t.Fatal(err)
			}
		}
		crashed := contract.NewTask(contract.KindCompaction, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli())
		own := contract.RewriteOutputKey("c1", 1, crashed.TaskID, 0) // the coordinator's, never committed
		if _, err := e.Bucket.Put(e.ctx, own, []byte("never committed")); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(48 * time.Hour) // far past every grace
		e.watermark(e.clk.Now())
		ex, _ := e.executor(g, nil)
		plan, err := ex.Plan(e.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if g.OrphanOwnership && (plan.ForeignUncommitted != len(foreign) || len(plan.Orphans) != 1 || plan.Orphans[0].Key != own) {
			t.Fatalf("plan must propose only the coordinator's output and count the foreign uploads: %+v", plan)
		}
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if e.exists(own) {
			t.Fatalf("positive control: the coordinator's never-committed output past the grace was kept: %+v", rep)
		}
		var v []string
		for _, k := range foreign {
			if !e.exists(k) {
				v = append(v, "another writer's upload deleted: "+k)
			}
		}
		if !e.exists(live[0].Key) {
			t.Fatal("live object deleted")
		}
		// The ingest's commit lands late: what it committed must read.
		e.commitExisting("c1", ingest)
		if missing := e.missingRetained("c1"); len(missing) > 0 {
			v = append(v, fmt.Sprintf("late commit references deleted objects: %v", missing))
		}
		return v
	})
}

// commitExisting commits an object already in the bucket (another writer's
// upload) as an append.
func (e *gcEnv) commitExisting(c, key string) {
	e.t.Helper()
	size, err := e.Bucket.Size(e.ctx, key)
	if err != nil {
		size = 1 // deleted: commit it anyway, the reader check reports it
	}
	now := e.clk.Now().UnixMilli()
	ent := contract.ObjectEntry{Key: key, Size: size, Checksum: contract.Checksum([]byte(key)), Tier: contract.TierHot,
		DocCount: 1, MinTsUnixMs: now, MaxTsUnixMs: now, MinSeq: 1, MaxSeq: 1, MinRecordKey: "a", MaxRecordKey: "z"}
	if lvl, ok := contract.LevelOfKey(c, key); ok {
		ent.Level = lvl
	}
	if _, err := e.Publisher.Commit(e.ctx, c, func(context.Context, publisher.Snapshot) (publisher.Change, error) {
		return publisher.Change{Added: []contract.ObjectEntry{ent}, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// Issue 10 item 3 / rule 14: a delete retry re-proves eligibility against
// the current head. A transient DeleteObjects failure; during the backoff
// the collection is dropped and re-created under the same name, and the
// new collection commits a segment under the very key the old sweep was
// retrying. The retry must not delete it.
func TestGCDeleteRetryReprovesAfterDropAndRecreate(t *testing.T) {
	bothWays(t, withoutFreshProof, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		old := e.add("c1", 1, 0, 0)
		e.commit("c1", old, nil)
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		var reborn []contract.ObjectEntry
		fd := &flakyDeleter{fail: map[string]int{old[0].Key: 1}}
		ex, _ := e.executorWithSleep(g, func(d gc.Deleter) gc.Deleter { fd.Deleter = d; return fd }, func() {
			if reborn != nil {
				return
			}
			// The owners drop the collection and release the name; the
			// same name is created again and commits a segment.
			if err := e.Bucket.Delete(e.ctx, contract.HeadKey("c1")); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Publisher.Create(e.ctx, "c1"); err != nil {
				t.Fatal(err)
			}
			reborn = e.add("c1", 1, 0, 0)
		})
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if reborn == nil || reborn[0].Key != old[0].Key {
			t.Fatalf("scenario: the re-created collection must reuse the key %s (got %v, %v)", old[0].Key, reborn, err)
		}
		if g.FreshProof && rep.Refused != gc.RefusedLineage {
			t.Fatalf("the retry's proof must see a head that does not descend from the plan: %+v %v", rep, err)
		}
		if !e.exists(reborn[0].Key) {
			return []string{"the re-created collection's live segment was deleted by a retry: " + reborn[0].Key}
		}
		return nil
	})
}

// A lifecycle transition, a fragmentation and a delete-density rewrite keep
// their inputs' level, level 0 included (collections/<c>/data/l0/<task
// id>/<n>.seg). When one crashes before its cutover, those outputs are the
// coordinator's never-committed outputs: reclaim must find them at every
// level, or each crashed rewrite of young data leaks its copies forever.
func TestGCReclaimsNeverCommittedRewriteOutputsAtEveryLevel(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	e.add("c1", 1, 0, 0)
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, crashed := range []contract.Task{
		contract.NewSweepTask(contract.KindLifecycleTransition, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli()),
		contract.NewTask(contract.KindCompaction, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli()),
	} {
		for level := 0; level <= 2; level++ {
			k := contract.RewriteOutputKey("c1", level, crashed.TaskID, level)
			if _, err := e.Bucket.Put(e.ctx, k, []byte("never committed")); err != nil {
				t.Fatal(err)
			}
			own = append(own, k)
		}
	}
	e.clk.Advance(48 * time.Hour)
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	if _, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range own {
		if e.exists(k) {
			t.Errorf("never-committed rewrite output past the grace leaked: %s", k)
		}
	}
}
