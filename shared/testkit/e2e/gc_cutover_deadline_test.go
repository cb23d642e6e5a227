package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

var withoutCutoverDeadline = mustWithout("cutover_deadline")

// lateCutover writes a rewrite output of a compaction task based on the
// current head and returns the completion the task would report.
func (e *gcEnv) lateCutover(c string, in []contract.ObjectEntry) (contract.Completion, contract.ObjectEntry) {
	e.t.Helper()
	head, err := e.Lineage.Head(e.ctx, c)
	if err != nil {
		e.t.Fatal(err)
	}
	task := contract.NewTask(contract.KindCompaction, c, head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli())
	key := contract.RewriteOutputKey(c, 1, task.TaskID, 0)
	body := []byte("merged output of " + task.TaskID)
	if _, err := e.Bucket.Put(e.ctx, key, body); err != nil {
		e.t.Fatal(err)
	}
	now := e.clk.Now().UnixMilli()
	out := mergedEntry(key, body, in)
	comp := contract.Completion{SchemaVersion: 1, TaskID: task.TaskID, Kind: task.Kind, Collection: c,
		BaseManifestVersion: head.Version, BaseManifestChecksum: head.ManifestChecksum, CCSFactsVersion: 1, Outcome: contract.OutcomeSucceeded,
		StartedAtUnixMs: now, FinishedAtUnixMs: now, Coverage: &contract.Coverage{Removed: in, Added: []contract.ObjectEntry{out}}}
	return comp, out
}

// mergedEntry is the entry of an output that merged inputs in, as the
// handoff's provenance check expects of a merge that dropped nothing: all
// their records, within their key, seq and time ranges.
func mergedEntry(key string, body []byte, in []contract.ObjectEntry) contract.ObjectEntry {
	out := contract.ObjectEntry{Key: key, Size: int64(len(body)), Checksum: contract.Checksum(body), Tier: contract.TierHot, Level: 1}
	for i, o := range in {
		out.DocCount += o.DocCount
		out.DeleteCount += o.DeleteCount
		if i == 0 {
			out.MinTsUnixMs, out.MaxTsUnixMs, out.MinSeq, out.MaxSeq, out.MinRecordKey, out.MaxRecordKey = o.MinTsUnixMs, o.MaxTsUnixMs, o.MinSeq, o.MaxSeq, o.MinRecordKey, o.MaxRecordKey
			continue
		}
		out.MinTsUnixMs, out.MaxTsUnixMs = min(out.MinTsUnixMs, o.MinTsUnixMs), max(out.MaxTsUnixMs, o.MaxTsUnixMs)
		out.MinSeq, out.MaxSeq = min(out.MinSeq, o.MinSeq), max(out.MaxSeq, o.MaxSeq)
		out.MinRecordKey, out.MaxRecordKey = min(out.MinRecordKey, o.MinRecordKey), max(out.MaxRecordKey, o.MaxRecordKey)
	}
	return out
}

func (e *gcEnv) handoff() *handoff.Handoff {
	uc, _ := app.HandoffUseCase(e.Config, e.FunctionClients(resources.FnHandoff), app.Runtime{Now: e.clk.Now, Out: e.Metrics, Log: e.Log}, app.HandoffOptions{})
	return uc
}

// Issue 10 item 4: a publisher that queues a cutover and applies it late
// (here 20 minutes after the task started: later than the task lifetime
// plus skew, before the request's not_after). GC sweeps while the request
// waits; it must not reclaim the outputs as never-committed, or the head
// the publisher then commits references deleted objects.
func TestGCWaitsPastCutoverDeadline(t *testing.T) {
	embeddedOnly(t, s3ClockMoves) // the output's LastModified on moto is its wall clock's, not the test's
	bothWays(t, withoutCutoverDeadline, func(t *testing.T, g guard.Set) []string {
		e := startGC(t, nil) // max task lifetime 15m, cutover deadline 30m, skew 2m
		e.create("c1", contract.Lifecycle{})
		in := e.add("c1", 2, 0, 0)
		comp, out := e.lateCutover("c1", in)
		swept := false
		e.Publisher.SetQueue(func(ctx context.Context, req contract.CutoverRequest) {
			if req.NotAfterUnixMs != comp.StartedAtUnixMs+e.Config.Policy.CutoverDeadline.Ms() {
				t.Errorf("not_after %d is not the task start + the cutover deadline", req.NotAfterUnixMs)
			}
			e.clk.Advance(20 * time.Minute)
			e.watermark(e.clk.Now())
			ex, _ := e.executor(g, nil)
			if _, err := ex.Run(ctx, contract.Task{TaskID: "sweep", Kind: contract.KindGC, Collection: "c1"}); err != nil {
				t.Error(err)
			}
			swept = true
		})
		res, err := e.handoff().Process(e.ctx, comp)
		if err != nil || !swept {
			t.Fatalf("handoff: %+v %v (swept %v)", res, err, swept)
		}
		if res.Outcome != handoff.OutcomeAccepted {
			t.Fatalf("the late publisher applies the cutover before its not_after: %+v", res)
		}
		var v []string
		if !e.exists(out.Key) {
			v = append(v, "output reclaimed as never-committed while its cutover could still be applied: "+out.Key)
		}
		if missing := e.missingRetained("c1"); len(missing) > 0 {
			v = append(v, "the committed head references deleted objects")
		}
		return v
	})
}

// The publisher refuses a cutover past its not_after (nothing becomes
// visible), and GC reclaims the outputs once the deadline plus skew has
// passed.
func TestPublisherRefusesCutoverPastNotAfter(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0)
	before, _ := e.Lineage.Head(e.ctx, "c1")
	comp, out := e.lateCutover("c1", in)
	e.Publisher.SetQueue(func(context.Context, contract.CutoverRequest) { e.clk.Advance(31 * time.Minute) })
	res, err := e.handoff().Process(e.ctx, comp)
	if err != nil || res.Outcome != handoff.OutcomeExpired {
		t.Fatalf("a cutover applied past its not_after must come back expired: %+v %v", res, err)
	}
	after, _ := e.Lineage.Head(e.ctx, "c1")
	if after.Version != before.Version || after.ManifestChecksum != before.ManifestChecksum {
		t.Fatalf("the publisher moved the head past not_after: v%d -> v%d", before.Version, after.Version)
	}
	e.clk.Advance(4 * time.Minute) // 35m after the task started: deadline + 2 x skew has passed
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
	if err != nil || e.exists(out.Key) || rep.OrphansDeleted != 1 {
		t.Fatalf("the output no publisher can commit any more must be reclaimed: %+v %v", rep, err)
	}
}
