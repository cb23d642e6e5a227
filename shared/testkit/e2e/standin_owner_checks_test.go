package e2e

import (
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// The publisher's coverage check (review2526 D7; the owners' contract in
// docs/safety.md): a holder of the handoff role alone submits, with its
// own signed client, a cutover of the live head that removes every object
// and adds nothing. The publisher refuses it at the moment of effect
// (rejected) and GC deletes nothing. With the stand-in's Unconserved (the
// check off: mutation proof) it is applied and GC, doing its job, deletes
// every object two days later: the loss the check prevents.
func TestPublisherRefusesARemovalOnlyCutover(t *testing.T) {
	for _, unconserved := range []bool{false, true} {
		t.Run(map[bool]string{false: "checked", true: "Unconserved"}[unconserved], func(t *testing.T) {
			e := startGCWith(t, nil, localenv.Options{Publisher: publisher.Options{Unconserved: unconserved}})
			e.create("c1", contract.Lifecycle{})
			live := e.add("c1", 3, 0, 0)
			head, err := e.Lineage.Head(e.ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			pub := app.PublisherClient(e.Config, e.FunctionClients(resources.FnHandoff))
			cov := contract.Coverage{Removed: live, Added: []contract.ObjectEntry{}}
			ans, err := pub.Cutover(e.ctx, contract.CutoverRequest{SchemaVersion: contract.SchemaVersion, RequestID: contract.CutoverRequestID("forged", cov),
				Collection: "c1", BaseVersion: head.Version, BaseChecksum: head.ManifestChecksum, NotAfterUnixMs: e.clk.Now().Add(time.Hour).UnixMilli(),
				Removed: live, Added: []contract.ObjectEntry{}})
			if err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(48 * time.Hour)
			e.watermark(e.clk.Now())
			now, _ := e.Lineage.Head(e.ctx, "c1")
			ex, _ := e.executor(guardsOn, nil)
			for range 3 {
				if _, err := ex.Run(e.ctx, contract.NewTask(contract.KindGC, "c1", now.Version, now.ManifestChecksum, 0, e.clk.Now().UnixMilli())); err != nil {
					t.Fatal(err)
				}
			}
			gone := 0
			for _, o := range live {
				if !e.exists(o.Key) {
					gone++
				}
			}
			switch {
			case !unconserved && (ans.Status != contract.CutoverRejected || gone > 0):
				t.Fatalf("the removal-only cutover: %s %q; %d of %d objects deleted", ans.Status, ans.Reason, gone, len(live))
			case unconserved && gone == 0:
				t.Fatalf("with Unconserved nothing was lost (answer %s): the test proves nothing", ans.Status)
			case unconserved:
				t.Logf("Unconserved: applied (%s), GC then deleted %d of %d objects", ans.Status, gone, len(live))
			default:
				t.Logf("refused: %s", ans.Reason)
			}
		})
	}
}

// CCS's release check (review2526 D6; the owners' contract in
// docs/safety.md): the handoff role alone asks for the release of a
// dropped collection before any cleanup; CCS sees the head and the data of
// the lifetime in the bucket and rejects it. With the stand-in's
// SkipRemainsCheck (mutation proof) it records the release, and the
// lifetime's head and objects are left for good.
func TestCCSRefusesAReleaseWhileTheLifetimeIsLeft(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(map[bool]string{false: "checked", true: "SkipRemainsCheck"}[skip], func(t *testing.T) {
			e := startGC(t, nil)
			e.CCS.SkipRemainsCheck = skip
			e.create("c1", contract.Lifecycle{})
			e.add("c1", 3, 0, 0)
			facts, err := dropSeen(t, e.Env, e.ctx, "c1", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(2 * time.Hour)
			ccs := e.Config.CCS(e.FunctionClients(resources.FnHandoff))
			ans, err := ccs.RecordReleaseIntent(e.ctx, contract.ReleaseIntentRequest{SchemaVersion: contract.SchemaVersion,
				IntentID: contract.ReleaseIntentID(contract.CollectionReleaseIntent, "c1", facts.Inc()), IntentKind: contract.CollectionReleaseIntent,
				Collection: "c1", Incarnation: facts.Incarnation, FactsVersion: facts.FactsVersion, Dependencies: []string{"objects: confirmed (trust me)"}})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !skip && ans.Status != contract.IntentRejected:
				t.Fatalf("CCS answered %s %q to a release of c1 whose head and data are in the bucket", ans.Status, ans.Reason)
			case skip && ans.Status != contract.IntentRecorded:
				t.Fatalf("with SkipRemainsCheck the release was not recorded (%s %q): the test proves nothing", ans.Status, ans.Reason)
			default:
				t.Logf("%s: %s %q", map[bool]string{false: "checked", true: "SkipRemainsCheck"}[skip], ans.Status, ans.Reason)
			}
		})
	}
}
