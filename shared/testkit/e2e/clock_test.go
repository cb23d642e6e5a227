package e2e

// Rule 16 (time comes from the system's clock) on the delete paths: a
// time another party writes (a publisher's committed_at, CCS's tombstone,
// an operator's confirmation, a completion's start, the query plane's
// watermark) never advances a delete horizon on its own. Each test also
// runs with its guard off and shows the loss there.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// guardVariants runs lost (what the scenario deleted that it must keep,
// "" for nothing) guarded and with the named guard off.
func guardVariants(t *testing.T, name string, lost func(t *testing.T, g guard.Set) string) {
	for _, g := range []guard.Set{guardsOn, mustWithout(name)} {
		on := g == guardsOn
		t.Run(map[bool]string{true: "guarded", false: name + " off"}[on], func(t *testing.T) {
			what := lost(t, g)
			switch {
			case on && what != "":
				t.Fatal(what)
			case !on && what == "":
				t.Fatalf("with %s off nothing was lost: the test proves nothing", name)
			case !on:
				t.Logf("%s off: %s", name, what)
			}
		})
	}
}

// A late commit of a dropped incarnation seen at the start of a run: the
// tombstone counts from the later of CCS's time, the first sighting and
// the head's commit, and a commit is dated by the later of the committed_at
// the publisher wrote and the LastModified S3 gave its root, as the sweep
// dates every commit. A publisher whose clock runs an hour behind commits
// after the drop: its head says it committed at the drop, its root was
// written now; the cleanup defers. Guard tombstone_root_written off (the
// head's committed_at alone): the cleanup deletes at once what a token
// opened on that head a moment ago may read.
func TestLateCommitOnASlowPublisherClockDefersTombstoneCleanup(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	guardVariants(t, "tombstone_root_written", func(t *testing.T, g guard.Set) string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		objs := e.add("c1", 5, 0, 0)
		facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
		if err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		slow := publisher.New(e.Bucket, func() time.Time { return e.clk.Now().Add(-time.Hour) }, publisher.Options{}, e.Log)
		late, err := slow.Commit(e.ctx, "c1", func(ctx context.Context, base publisher.Snapshot) (publisher.Change, error) {
			key := contract.AppendSegmentKey("c1", base.Head.Inc(), base.Head.Version+1, 0)
			body := []byte("late segment")
			if _, err := e.Bucket.Put(ctx, key, body); err != nil {
				return publisher.Change{}, err
			}
			now := e.clk.Now().UnixMilli()
			return publisher.Change{Added: []contract.ObjectEntry{{Key: key, Size: int64(len(body)), Checksum: contract.Checksum(body), Tier: contract.TierHot,
				DocCount: 1, MinTsUnixMs: now, MaxTsUnixMs: now, MinSeq: 1, MaxSeq: 1, MinRecordKey: "a", MaxRecordKey: "z"}},
				Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		task := contract.NewTask(contract.KindTombstoneCleanup, "c1", late.Version, late.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
		ex, _ := e.executor(g, nil)
		rep, err := ex.RunTombstone(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if !e.exists(o.Key) {
				return fmt.Sprintf("%s, referenced by head v%d whose root S3 wrote just now (committed_at %s on the publisher's clock, an hour behind), deleted by the cleanup (outcome %s, reason %q)",
					o.Key, late.Version, e.clk.Now().Sub(time.UnixMilli(late.CommittedAtUnixMs)), rep.Outcome, rep.Reason)
			}
		}
		return ""
	})
}

// A replayed forged tombstone. A forged CCS answer "tombstoned at 1970"
// about a live collection is survived the first time: the tombstone counts
// from the coordinator's first sighting (TestForgedAncientTombstoneWipesNothingAtOnce).
// The real answer comes back (live, served, its head opened by queries). A
// day later the same forged answer is sent again: it counts from its own
// first sighting, the sighting of that facts document, so nothing goes a
// token lifetime from now. Guard sighting_per_facts off (one sighting per
// CCS tombstone time): the sighting recorded a day ago is reused and the
// first cleanup run wipes the live collection, though a token opened on
// its head a minute ago is valid for a token lifetime.
func TestReplayedForgedTombstoneWipesNothingAtOnce(t *testing.T) {
	guardVariants(t, "sighting_per_facts", func(t *testing.T, g guard.Set) string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		live := e.add("c1", 3, 0, 0)
		e.watermark(e.clk.Now())
		ex, _ := e.executor(g, nil)
		forge := func(tombstoned bool) contract.CollectionFacts {
			f, err := e.CCS.Facts(e.ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			f.Tombstoned, f.TombstonedAtUnixMs, f.ReservationHorizonUnixMs = tombstoned, 0, 0
			if tombstoned {
				f.TombstonedAtUnixMs, f.ReservationHorizonUnixMs = 1, 1
			}
			if f, err = e.CCS.PutFacts(e.ctx, f); err != nil {
				t.Fatal(err)
			}
			return f
		}
		runBoth := func(f contract.CollectionFacts, when string) string {
			head, _ := e.Lineage.Head(e.ctx, "c1")
			for _, kind := range []contract.TaskKind{contract.KindTombstoneCleanup, contract.KindGC} {
				task := contract.NewTask(kind, "c1", head.Version, head.ManifestChecksum, f.FactsVersion, e.clk.Now().UnixMilli())
				if _, err := ex.Run(e.ctx, task); err != nil {
					t.Fatalf("%s %s: %v", when, kind, err)
				}
				for _, o := range live {
					if !e.exists(o.Key) {
						return fmt.Sprintf("%s: a %s run deleted %s of the live collection on a forged tombstone CCS dates 1970", when, kind, o.Key)
					}
				}
			}
			return ""
		}
		if lost := runBoth(forge(true), "first forged answer"); lost != "" {
			return lost
		}
		forge(false) // the real answer: live
		e.clk.Advance(24 * time.Hour)
		e.watermark(e.clk.Now())
		return runBoth(forge(true), "the same forged answer a day later")
	})
}

// The watermark: global_safe_ts is the query plane's assertion about its
// own readers, and gate (b) (evict_commit_ts < global_safe_ts -
// retention_window) counts it no later than the system's clock: no
// reader's safe point is ahead of now. A watermark two hours ahead (a
// query plane whose clock runs ahead, a forged or corrupt watermark
// object) with a retention window of an hour keeps objects evicted 30
// minutes ago. Guard watermark_clock_cap off: they are deleted inside the
// window.
func TestWatermarkAheadOfTheClockOpensNoRetentionWindow(t *testing.T) {
	guardVariants(t, "watermark_clock_cap", func(t *testing.T, g guard.Set) string {
		e := startGC(t, func(p *policy.Policy) { p.GC.RetentionWindow = policy.Duration(time.Hour) })
		e.create("c1", contract.Lifecycle{})
		old := e.add("c1", 3, 0, 0)
		e.add("c1", 1, 0, 0)
		e.commit("c1", old, nil)
		e.clk.Advance(30 * time.Minute) // past the token lifetime (+ skew), inside the retention window
		if err := e.Watermark.Publish(e.ctx, e.clk.Now().Add(2*time.Hour), e.clk.Now()); err != nil {
			t.Fatal(err)
		}
		ex, _ := e.executor(g, nil)
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range old {
			if !e.exists(o.Key) {
				return fmt.Sprintf("%s, evicted 30 min ago by the system's clock, deleted inside the 1 h retention window on a watermark 2 h ahead of the clock (deleted %d, deferred %v)",
					o.Key, rep.ObjectsDeleted, rep.DeferredByReason)
			}
		}
		if rep.DeferredByReason[gc.ReasonRetentionWindow] != len(old) {
			return fmt.Sprintf("want %d deferred by the retention window: %v", len(old), rep.DeferredByReason)
		}
		return ""
	})
}

// A head regression's confirmation: the abandoned roots' references stay
// protected for a token lifetime after the confirmation, counted from the
// later of the time the operator's machine wrote into the record and when
// GC first saw it (recorded, keep-first). An operator whose clock runs an
// hour behind confirms a restore a moment after it happened: the abandoned
// versions' output stays, since a token opened on the abandoned head just
// before the restore may read it for a token lifetime. Guard
// confirmation_sighting off (the operator's time alone): the protection
// ended before it began and the output is reclaimed as never-committed at
// once.
func TestBackdatedLineageConfirmationKeepsAbandonedOutputs(t *testing.T) {
	guardVariants(t, "confirmation_sighting", func(t *testing.T, g guard.Set) string {
		e := startGC(t, nil)
		e.create("c1", contract.Lifecycle{})
		in := e.add("c1", 2, 0, 0) // v2
		comp, out := e.lateCutover("c1", in)
		if res, err := e.handoff().Process(e.ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
			t.Fatalf("compaction cutover: %+v %v", res, err) // v3 holds the output
		}
		e.add("c1", 1, 0, 0) // v4 (still references the output)
		e.reconcile()
		e.clk.Advance(time.Hour) // every grace has passed since the output was written
		e.watermark(e.clk.Now())
		// The head is put back now; tokens opened on v4 until now stay
		// valid for a token lifetime.
		if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
			t.Fatal(err)
		}
		ex, _ := e.executor(g, nil)
		plan, _ := ex.Plan(e.ctx, "c1")
		operatorClock := e.clk.Now().Add(-time.Hour)
		conf, ok := gc.ConfirmationFor(plan, "test", "restored v2", operatorClock)
		if !ok || len(conf.AbandonedRoots) != 2 {
			t.Fatalf("the plan must show the two abandoned roots: %+v", plan)
		}
		if err := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table).ConfirmLineage(e.ctx, conf); err != nil {
			t.Fatal(err)
		}
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if !e.exists(out.Key) {
			return fmt.Sprintf("the abandoned v3/v4's output %s was reclaimed as never-committed right after the restore (orphans deleted %d): "+
				"the confirmation's time (%s, the operator's clock) ended its token-lifetime protection before it began", out.Key, rep.OrphansDeleted,
				time.UnixMilli(conf.ConfirmedAtUnixMs).UTC().Format(time.RFC3339))
		}
		return ""
	})
}

// A completion's start against the orphan grace (rules 4, 16). GC reclaims
// a rewrite's output at its write time (S3's LastModified) + cutover
// deadline + 2 x skew, because a cutover's not_after is the task's start +
// the cutover deadline. The start is the completion message's: one that
// lies an hour in the future (a worker clock ahead, a corrupt or forged
// message) counts from the handoff's clock, so the cutover's not_after is
// at most now + the cutover deadline and a publisher applying it 40
// minutes later is refused; the output GC reclaimed meanwhile is named by
// no head. With the handoff's guard cutover_deadline off (GC's kept on)
// its cutover gets a not_after 90 minutes away and is applied after GC
// reclaimed the output as never-committed: the committed head references
// a deleted object.
func TestCompletionStartInTheFutureCannotOutliveTheOrphanGrace(t *testing.T) {
	guardVariants(t, "cutover_deadline", func(t *testing.T, g guard.Set) string {
		e := startGC(t, nil) // max task lifetime 15m, cutover deadline 30m, skew 2m
		e.create("c1", contract.Lifecycle{})
		in := e.add("c1", 2, 0, 0)
		comp, out := e.lateCutover("c1", in)
		comp.StartedAtUnixMs = e.clk.Now().Add(time.Hour).UnixMilli()
		var notAfter int64
		e.Publisher.SetQueue(func(ctx context.Context, req contract.CutoverRequest) {
			notAfter = req.NotAfterUnixMs
			e.clk.Advance(40 * time.Minute) // past the output's reclaim grace (34 m after it was written)
			e.watermark(e.clk.Now())
			ex, _ := e.executor(guardsOn, nil)
			if _, err := ex.Run(ctx, contract.Task{TaskID: "sweep", Kind: contract.KindGC, Collection: "c1"}); err != nil {
				t.Error(err)
			}
		})
		res, err := e.handoffWith(g).Process(e.ctx, comp)
		if err != nil {
			t.Fatal(err)
		}
		if g.CutoverDeadline && notAfter > e.clk.Now().Add(-40*time.Minute).Add(30*time.Minute).UnixMilli() {
			return fmt.Sprintf("the cutover's not_after is %s after the handoff's clock, over the 30 min cutover deadline", time.Duration(notAfter-e.clk.Now().Add(-40*time.Minute).UnixMilli())*time.Millisecond)
		}
		if res.Outcome == handoff.OutcomeAccepted && !e.exists(out.Key) {
			return fmt.Sprintf("the cutover (not_after %s after the output was written) was applied after GC reclaimed its output %s: the committed head references a deleted object (%v)",
				time.Duration(notAfter-e.clk.Now().Add(-40*time.Minute).UnixMilli())*time.Millisecond, out.Key, e.missingRetained("c1"))
		}
		return ""
	})
}

// handoffWith is the shipped handoff with guards g.
func (e *gcEnv) handoffWith(g guard.Set) *handoff.Handoff {
	uc, _ := app.HandoffUseCase(e.Config, e.FunctionClients(resources.FnHandoff), app.Runtime{Now: e.clk.Now, Out: e.Metrics, Log: e.Log}, app.HandoffOptions{Guards: &g})
	return uc
}
