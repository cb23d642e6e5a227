package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
)

// hookDeleter runs before before the first delete call of a sweep.
type hookDeleter struct {
	gc.Deleter
	before func()
}

func (d *hookDeleter) DeleteProven(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
	if d.before != nil {
		f := d.before
		d.before = nil
		f()
	}
	return d.Deleter.DeleteProven(ctx, b)
}

// A collection written steadily commits during every sweep. The sweep's
// record of what it did must still land: it clears the debt it judged
// (deleted, or deferred with its due time) even though the head moved,
// and keeps the debt the newer heads added (counted from their roots, due
// at their commit + token lifetime + retention window). On the old path the
// record applied only while the observed version still equalled the swept
// head: the debt and its oldest due time stayed for good, so every
// reconciliation swept again (a gc slot each time), the oldest-due signal
// grew without bound and no retention window was ever recorded.
func TestSweepRecordLandsWhileTheHeadMoves(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	state := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
	pol := e.Config.Policy.GC
	dueAfter := (pol.TokenLifetime.D() + pol.RetentionWindow.D()).Milliseconds()
	old := e.add("c1", 2, 0, 0)
	e.commit("c1", old, nil) // debt: the two removed objects
	e.reconcile()
	var lastCommitted []contract.ObjectEntry
	for pass := range 3 {
		e.clk.Advance(2 * time.Hour) // the debt so far is due
		e.watermark(e.clk.Now())
		young := e.add("c1", 1, 0, 0)
		var during contract.Head
		ex, _ := e.executor(guard.All(), func(d gc.Deleter) gc.Deleter {
			return &hookDeleter{Deleter: d, before: func() {
				// The writer commits while the sweep deletes: it removes
				// an object the sweep never judged (new debt), and the
				// observer records the new head at once.
				during = e.commit("c1", young, nil)
				e.reconcile()
			}}
		})
		if _, err := ex.Run(e.ctx, contract.Task{TaskID: "sweep", Kind: contract.KindGC, Collection: "c1"}); err != nil {
			t.Fatalf("pass %d: sweep: %v", pass, err)
		}
		if during.Version == 0 {
			t.Fatalf("pass %d: the sweep deleted nothing (no commit during it)", pass)
		}
		st, err := state.Get(e.ctx, "c1", 1)
		if err != nil {
			t.Fatal(err)
		}
		root, err := e.Lineage.Root(e.ctx, during.ManifestKey, during.ManifestChecksum)
		if err != nil {
			t.Fatal(err)
		}
		want := root.CommitTsUnixMs + dueAfter
		if st.Version != during.Version || st.Debt.GCObjects != 1 || st.Debt.GCDueAtUnixMs != want || st.Debt.GCSweptAtUnixMs != e.clk.Now().UnixMilli() {
			t.Fatalf("pass %d: observed v%d debt %d objects due %d, swept at %d; want v%d, the 1 object removed during the sweep due at %d, swept now (%d)",
				pass, st.Version, st.Debt.GCObjects, st.Debt.GCDueAtUnixMs, st.Debt.GCSweptAtUnixMs, during.Version, want, e.clk.Now().UnixMilli())
		}
		for _, o := range append(old, lastCommitted...) {
			if e.exists(o.Key) {
				t.Fatalf("pass %d: %s (due debt) not deleted", pass, o.Key)
			}
		}
		if !e.exists(young[0].Key) {
			t.Fatalf("pass %d: %s, removed during the sweep, deleted early", pass, young[0].Key)
		}
		old, lastCommitted = nil, young
	}
}

// fastWriter commits (removing one object of pool, new debt) and lets the
// observer record the new head before every write of a sweep's record: the
// head moves between every attempt, however many there are.
type fastWriter struct {
	gc.SweepRecorder
	before func()
}

func (f *fastWriter) RecordGCSweep(ctx context.Context, sw gc.SweepRecord) error {
	f.before()
	return f.SweepRecorder.RecordGCSweep(ctx, sw)
}

// Review of issue 24: a sweep's record was carried forward to the observed
// head at most three times (gc's maxRecordAttempts). Under a writer that
// commits between every attempt it never landed: the debt the sweep had
// cleared stayed owed, due since the old debt's due time, so every
// reconciliation swept again and the oldest-due age grew for good. The
// record must land whatever the writer does, clearing what the sweep did
// and keeping exactly the debt of the commits it never judged (due at
// their commit + token lifetime + retention window).
func TestReview24_SweepRecordNeverLandsUnderAFastWriter(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	state := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
	pol := e.Config.Policy.GC
	dueAfter := (pol.TokenLifetime.D() + pol.RetentionWindow.D()).Milliseconds()
	old := e.add("c1", 2, 0, 0)
	pool := e.add("c1", 8, 0, 0) // live objects the writer removes one per commit
	e.commit("c1", old, nil)     // debt: the two removed objects
	e.reconcile()
	e.clk.Advance(2 * time.Hour) // the debt is due
	e.watermark(e.clk.Now())
	var removed []contract.ObjectEntry
	var first contract.Head
	ex, _ := e.executorWithPorts(guard.All(), func(p *gc.Ports) {
		p.Sweeps = &fastWriter{SweepRecorder: p.Sweeps, before: func() {
			if len(pool) == 0 {
				t.Fatal("the writer ran out of objects to remove: the record was attempted more than 8 times")
			}
			o := pool[0]
			pool = pool[1:]
			// A minute per commit: each scheduled reconciliation is of its
			// own sweep minute (one minute's chunk is deduplicated).
			e.clk.Advance(time.Minute)
			h := e.commit("c1", []contract.ObjectEntry{o}, nil)
			removed = append(removed, o)
			if first.Version == 0 {
				first = h
			}
			e.reconcile() // the observer records the new head at once
		}}
	}, nil)
	sweptFrom := e.clk.Now().UnixMilli()
	if _, err := ex.Run(e.ctx, contract.Task{TaskID: "sweep", Kind: contract.KindGC, Collection: "c1"}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if len(removed) == 0 {
		t.Fatal("the sweep wrote no record")
	}
	for _, o := range old {
		if e.exists(o.Key) {
			t.Fatalf("%s (due debt) not deleted", o.Key)
		}
	}
	for _, o := range removed {
		if !e.exists(o.Key) {
			t.Fatalf("%s, removed while the sweep recorded, deleted early", o.Key)
		}
	}
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	root, err := e.Lineage.Root(e.ctx, first.ManifestKey, first.ManifestChecksum)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Get(e.ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := root.CommitTsUnixMs + dueAfter // the earliest of the commits during the sweep
	if now := e.clk.Now().UnixMilli(); st.Version != head.Version || st.Debt.GCObjects != int64(len(removed)) || st.Debt.GCDueAtUnixMs != want ||
		st.Debt.GCSweptAtUnixMs < sweptFrom || st.Debt.GCSweptAtUnixMs > now {
		t.Fatalf("observed v%d debt %d objects due %d, swept at %d; want v%d, the %d objects removed while the sweep recorded, due at %d, swept by this sweep (%d..%d): the record never landed",
			st.Version, st.Debt.GCObjects, st.Debt.GCDueAtUnixMs, st.Debt.GCSweptAtUnixMs, head.Version, len(removed), want, sweptFrom, now)
	}
}

// The carried record lands while the writer commits again: the advance
// that raced it added debt between the read of the totals and the write,
// and the record's write must not leave that debt without its due time.
// Here the head moves first by an append (no debt: the carried record owes
// nothing and clears the due time), then by a commit that removes an
// object while the record is written: its debt is kept, due at its commit
// + token lifetime + retention window (the roots the write met are read
// again and the due lowered), not left undated for the periodic sweep.
func TestSweepRecordRacedByAnAdvanceKeepsItsDue(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	state := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
	pol := e.Config.Policy.GC
	dueAfter := (pol.TokenLifetime.D() + pol.RetentionWindow.D()).Milliseconds()
	old := e.add("c1", 2, 0, 0)
	pool := e.add("c1", 1, 0, 0)
	e.commit("c1", old, nil)
	e.reconcile()
	e.clk.Advance(2 * time.Hour)
	e.watermark(e.clk.Now())
	calls := 0
	var raced contract.Head
	ex, _ := e.executorWithPorts(guard.All(), func(p *gc.Ports) {
		p.Sweeps = &fastWriter{SweepRecorder: p.Sweeps, before: func() {
			calls++
			e.clk.Advance(time.Minute)
			switch calls {
			case 1:
				e.add("c1", 1, 0, 0) // the head moves, no debt
			case 2:
				raced = e.commit("c1", pool, nil) // debt added while the carried record is written
			}
			e.reconcile()
		}}
	}, nil)
	if _, err := ex.Run(e.ctx, contract.Task{TaskID: "sweep", Kind: contract.KindGC, Collection: "c1"}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if calls != 2 {
		t.Fatalf("%d record writes, want 2 (the swept head's, refused; the carried one, landed)", calls)
	}
	root, err := e.Lineage.Root(e.ctx, raced.ManifestKey, raced.ManifestChecksum)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Get(e.ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := root.CommitTsUnixMs + dueAfter; st.Version != raced.Version || st.Debt.GCObjects != 1 || st.Debt.GCDueAtUnixMs != want {
		t.Fatalf("observed v%d debt %d objects due %d; want v%d, the 1 object the raced commit removed, due at %d", st.Version, st.Debt.GCObjects, st.Debt.GCDueAtUnixMs, raced.Version, want)
	}
}
