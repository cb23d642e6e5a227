package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
)

// Review 23 D7 (beeeb0a, was TestReview23_StraysDeletedWhileWatermarkUnreadable):
// committed roots deleted as "strays" are judged without the
// watermark (rule 3: an unreadable watermark => delete nothing; rule 14:
// every batch re-checks eligibility at its call). In the cleanup of a
// dropped lifetime whose head is gone (as in
// TestReview23_DroppedCleanupWithoutHeadLeaksData, review 23 D6), its committed roots
// and parts are listed and put to the gate as kindStray, whose rule
// (judgeUncommitted) asks only the orphan grace: the watermark, read again
// for the batch's proof and now unreadable, is never consulted. The
// committed manifests are deleted while the query plane's watermark
// cannot be read.
// Suggested fix: judgeUncommitted must fail closed on m.blocked like every
// other kind (or committed roots must never be judged as strays).
func TestStraysHeldWhileWatermarkUnreadable(t *testing.T) {
	e := startGC(t, nil)
	task := retireScene(t, e)
	h, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if ans, err := e.Publisher.Retire(e.ctx, contract.NewRetireRequest(h)); err != nil || ans.Status != contract.RetireAccepted {
		t.Fatalf("out-of-band retirement: %+v %v", ans, err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	manifests := listedKeys(t, e, contract.ManifestsPrefix("c1"))
	unreadable := false
	ex, _ := e.executorWithPorts(guardsOn, func(p *gc.Ports) {
		wm, lister := p.Watermark, p.Lister
		p.Watermark = wmFunc(func(ctx context.Context) (contract.Watermark, error) {
			if unreadable {
				return contract.Watermark{}, errors.New("query plane watermark unreadable")
			}
			return wm.Watermark(ctx)
		})
		p.Lister = listFunc(func(ctx context.Context, prefix string, page func([]gc.Listed) error) error {
			if prefix == contract.ManifestsPrefix("c1") {
				unreadable = true // from the strays' listing on, the watermark cannot be read
			}
			return lister.List(ctx, prefix, page)
		})
	}, nil)
	rep, err := ex.RunTombstone(e.ctx, task)
	t.Logf("run: %s %s (%v)", rep.Outcome, rep.Reason, err)
	if !unreadable {
		t.Fatalf("the cleanup never listed the manifests: %+v", rep)
	}
	left := listedKeys(t, e, contract.ManifestsPrefix("c1"))
	if len(left) < len(manifests) {
		t.Fatalf("%d committed manifest keys of the dropped lifetime were deleted while the watermark was unreadable (before %v, after %v)", len(manifests)-len(left), manifests, left)
	}
}

type wmFunc func(ctx context.Context) (contract.Watermark, error)

func (f wmFunc) Watermark(ctx context.Context) (contract.Watermark, error) { return f(ctx) }

type listFunc func(ctx context.Context, prefix string, page func([]gc.Listed) error) error

func (f listFunc) List(ctx context.Context, prefix string, page func([]gc.Listed) error) error {
	return f(ctx, prefix, page)
}

func listedKeys(t *testing.T, e *gcEnv, prefix string) []string {
	t.Helper()
	ls, err := e.Bucket.List(e.ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.Key)
	}
	return out
}

// Review 23 D7 on the sweep's path: a never-committed output past its
// grace is not deleted by a batch whose proof finds the watermark
// unreadable (rule 3 for every kind of key; rule 14: re-checked at the
// call). The sweep's plan and its recheck at the start of Apply read the
// watermark; from the batch's proof on (after its budget wait) it cannot
// be read. Nothing goes then: not the output, not the roots the trim
// would delete after it.
func TestOrphanHeldWhenTheWatermarkGoesUnreadableBeforeItsCall(t *testing.T) {
	e := startGC(t, nil) // reclaimed after cutover deadline 30m + 2 x clock skew 2m
	e.create("c1", contract.Lifecycle{})
	e.add("c1", 1, 0, 0)
	head, _ := e.Lineage.Head(e.ctx, "c1")
	crashed := contract.NewTask(contract.KindCompaction, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli())
	orphan := contract.RewriteOutputKey("c1", 1, crashed.TaskID, 0)
	if _, err := e.Bucket.Put(e.ctx, orphan, []byte("never committed")); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(35 * time.Minute)
	e.watermark(e.clk.Now())
	listed, reads, calls := false, 0, 0
	ex, _ := e.executorWithPorts(guardsOn, func(p *gc.Ports) {
		wm, lister, d := p.Watermark, p.Lister, p.Deleter
		p.Lister = listFunc(func(ctx context.Context, prefix string, page func([]gc.Listed) error) error {
			if prefix == contract.CollectionPrefix("c1") || prefix == contract.DataPrefix("c1") {
				listed = true // the plan's listing: the plan's read and Apply's recheck follow
			}
			return lister.List(ctx, prefix, page)
		})
		p.Watermark = wmFunc(func(ctx context.Context) (contract.Watermark, error) {
			if listed {
				if reads++; reads > 2 {
					return contract.Watermark{}, errors.New("query plane watermark unreadable")
				}
			}
			return wm.Watermark(ctx)
		})
		p.Deleter = deleterFunc(func(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
			calls++
			return d.DeleteProven(ctx, b)
		})
	}, nil)
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
	t.Logf("run: orphans deleted %d, calls %d, watermark reads after the listing %d (%v)", rep.OrphansDeleted, calls, reads, err)
	if reads < 3 {
		t.Fatalf("the watermark was not read again for the batch's proof (%d reads after the plan's listing, want the plan's, the recheck's and the proof's): %+v", reads, rep)
	}
	if !e.exists(orphan) {
		t.Fatalf("the never-committed output %s was deleted by a batch whose proof found the watermark unreadable: %+v", orphan, rep)
	}
	if len(rep.Deleted) > 0 {
		t.Fatalf("keys deleted while the watermark was unreadable (the trim's roots too): %v", rep.Deleted)
	}
}
