package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
)

// spoofedFacts answers GC's facts reads with a tombstone for the one
// collection it spoofs (a forged answer on GC's network path to CCS: the
// owner adapter's https, no-redirect and strict-200 checks are what a
// spoofer who holds that path passes); CCS itself, and so the publisher
// and the handoff, see the collection live.
type spoofedFacts struct {
	gc.FactsSource
	c      string
	forged contract.CollectionFacts
}

func (s spoofedFacts) Facts(ctx context.Context, c string) (contract.CollectionFacts, error) {
	if c == s.c {
		return s.forged, nil
	}
	return s.FactsSource.Facts(ctx, c)
}

// Review 25/26, D3 (issue 25 "a spoofed owner answer cannot ... wipe";
// SYSTEM rules 1, 3, 15; docs/safety.md threat model "A spoofed owner
// answer"). The forged tombstone's own date opens nothing (guard
// tombstone_sighting: it counts from GC's first sighting), but a spoof of
// GC's path to CCS that answers "tombstoned" at the first sighting and
// again a retention window later is all the tombstone cleanup asks: it
// deletes every data object of a live collection, although the publisher
// (which asks CCS itself, guard retire_tombstoned) refuses to retire its
// head. The cleanup deletes objects and manifests first and asks the one
// owner that cross-checks CCS last, so the owner's refusal comes after
// the wipe: the live head now names deleted objects. A spoofed CCS answer
// alone (no role compromised) wiped a live collection.
func TestReview2526_SpoofedTombstoneWipesALiveCollectionThePublisherRefusesToRetire(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	live := e.add("c1", 3, 0, 0)
	e.clk.Advance(48 * time.Hour)
	real, err := e.CCS.Facts(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	forged := real
	forged.Tombstoned, forged.TombstonedAtUnixMs, forged.ReservationHorizonUnixMs = true, e.clk.Now().UnixMilli(), e.clk.Now().UnixMilli()
	forged.FactsVersion = real.FactsVersion + 1
	ex, _ := e.executorWithPorts(guardsOn, func(p *gc.Ports) {
		p.Facts = spoofedFacts{FactsSource: p.Facts, c: "c1", forged: forged}
	}, nil)
	run := func() (gc.TombstoneReport, error) {
		e.watermark(e.clk.Now())
		head, _ := e.Lineage.Head(e.ctx, "c1")
		task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, forged.FactsVersion, e.clk.Now().UnixMilli())
		return ex.RunTombstone(e.ctx, task)
	}
	if _, err := run(); err != nil { // the first sighting
		t.Logf("first run: %v", err)
	}
	for _, o := range live {
		if !e.exists(o.Key) {
			t.Fatalf("the first sighting already deleted %s: the sighting horizon is not what this test probes", o.Key)
		}
	}
	e.clk.Advance(time.Hour)
	var rep gc.TombstoneReport
	var runErr error
	for range 10 {
		if rep, runErr = run(); runErr != nil || rep.Outcome == gc.TombCompleted || rep.Outcome == gc.TombDone {
			break
		}
	}
	gone := 0
	for _, o := range live {
		if !e.exists(o.Key) {
			gone++
		}
	}
	if now, err := e.CCS.Facts(e.ctx, "c1"); err != nil || now.Tombstoned {
		t.Fatalf("CCS itself must see c1 live: %+v %v", now, err)
	}
	if gone > 0 {
		t.Fatalf("a spoofed CCS tombstone on GC's path alone deleted %d of %d data objects of live collection c1 (head present: %v; cleanup %s, %v)",
			gone, len(live), e.exists(contract.HeadKey("c1")), rep.Outcome, runErr)
	}
}
