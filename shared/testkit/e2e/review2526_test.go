package e2e

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Review 25/26, D1 (issue 25 "no single role can release"; SYSTEM rules 8
// and 17). A holder of the GC role alone, once CCS's reservation horizon of a
// dropped collection has passed, gets a release intent recorded while every
// committed data object of the lifetime is still in the bucket: it retires
// the head (CCS dropped it, so the publisher accepts), deletes the
// lifetime's manifests (its role may delete data and manifests) but none of
// the data, and hands the handoff a cleanup completion that claims every
// dependency confirmed. The handoff's re-derivation (guard release_rederived,
// remains.go ofLifetime) counts manifest keys and rewrite outputs only, not
// the lifetime's append segments (AppendSegmentKey embeds the incarnation),
// so with the manifests gone nothing it reads says objects remain: the
// release is recorded and the objects are leaked for good (after the
// release no lifetime's cleanup ever names them again). Rule 8 asks for a
// release only after every cleanup dependency (objects included) is
// confirmed; rule 17 derives it again from what is left in the bucket.
// docs/safety.md "What is left" names this as known; it still breaks the
// issue's acceptance (one role, no owner spoofed, gets a release while its
// dependencies are unmet).
func TestReview2526_GCRoleAloneReleasesWithCommittedDataLeft(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	data := e.add("c1", 3, 0, 0)
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	gcClients := e.FunctionClients(resources.FnGC)
	ports := app.GCPorts(e.Config, gcClients)
	if ans, err := ports.Heads.Retire(e.ctx, contract.NewRetireRequest(head)); err != nil || ans.Status != contract.RetireAccepted {
		t.Fatalf("retire as GC: %+v %v", ans, err)
	}
	// The GC role deletes the manifests first (roots and parts), not the data.
	var manifests []string
	if err := e.Bucket.Keys(e.ctx, contract.ManifestsPrefix("c1"), func(keys []string) error {
		manifests = append(manifests, keys...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range manifests {
		if _, err := gcClients.S3.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Config.Bucket), Key: aws.String(k)}); err != nil {
			t.Fatalf("delete %s as GC: %v", k, err)
		}
	}
	// The reservation horizon passes (by every clock).
	e.clk.Advance(2 * time.Hour)
	e.watermark(e.clk.Now())

	deps := []contract.Dependency{}
	for _, n := range []string{contract.DepObjects, contract.DepManifests, contract.DepControlArtifacts, contract.DepLifecycleRetention,
		contract.DepReservationHorizon, contract.DepCCSPreconditions} {
		deps = append(deps, contract.Dependency{Name: n, State: contract.DependencyConfirmed, Evidence: "trust me"})
	}
	task := contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
	forged := contract.Completion{SchemaVersion: contract.SchemaVersion, TaskID: task.TaskID, Kind: contract.KindTombstoneCleanup, Collection: "c1",
		Incarnation: facts.Incarnation, BaseManifestVersion: head.Version, BaseManifestChecksum: head.ManifestChecksum,
		CCSFactsVersion: facts.FactsVersion, CCSFactsDigest: contract.FactsDigest(contract.KindTombstoneCleanup, facts),
		SweepUnixMs: task.SweepUnixMs, Outcome: contract.OutcomeSucceeded, StartedAtUnixMs: e.clk.Now().UnixMilli(), FinishedAtUnixMs: e.clk.Now().UnixMilli(),
		Cleanup: &contract.Cleanup{Deleted: []string{}, Complete: true, Dependencies: deps}}
	forgeSend(t, e.Env, resources.FnGC, 0, forged)
	forgeDeliver(t, e.Env)

	left := 0
	for _, o := range data {
		if e.exists(o.Key) {
			left++
		}
	}
	in, err := e.CCS.Intents(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 0 && left > 0 {
		t.Fatalf("release intent recorded on the GC role's word alone with %d of %d committed data objects of the lifetime still in the bucket (%d manifests deleted first by the GC role): intents %v",
			left, len(data), len(manifests), in)
	}
}

// Review 25/26, D6 (issue 25 "no single role can release"; SYSTEM rule 8;
// docs/safety.md threat model, handoff row: "record a release intent CCS
// accepts ... what it asks is decided by the owners"). The handoff role is
// the one role that may POST /release-intents, and CCS (the stand-in, the
// reference of events/CCS.md) records any intent for a tombstoned
// incarnation whose horizon passed and whose facts version matches: it
// never asks whether anything was cleaned up. A holder of the handoff role
// alone (its own signed CCS client, no code of ours in between) gets the
// release of a dropped collection whose head, manifests and every data
// object are still in the bucket, no cleanup having run at all. Once
// released, the coordinator's cleanup of that lifetime is no longer owed.
func TestReview2526_HandoffRoleAloneReleasesBeforeAnyCleanup(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	data := e.add("c1", 3, 0, 0)
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(2 * time.Hour) // the reservation horizon passes
	ccs := e.Config.CCS(e.FunctionClients(resources.FnHandoff))
	id := contract.ReleaseIntentID(contract.CollectionReleaseIntent, "c1", facts.Inc())
	ans, err := ccs.RecordReleaseIntent(e.ctx, contract.ReleaseIntentRequest{SchemaVersion: contract.SchemaVersion, IntentID: id,
		IntentKind: contract.CollectionReleaseIntent, Collection: "c1", Incarnation: facts.Incarnation, FactsVersion: facts.FactsVersion,
		Dependencies: []string{"objects: confirmed (trust me)"}})
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, o := range data {
		if e.exists(o.Key) {
			left++
		}
	}
	if ans.Status == contract.IntentRecorded && (left > 0 || e.exists(contract.HeadKey("c1"))) {
		t.Fatalf("CCS recorded the release of c1 incarnation %d on the handoff role's word alone, before any cleanup: head present %v, %d of %d data objects left",
			facts.Inc(), e.exists(contract.HeadKey("c1")), left, len(data))
	}
}

// Review 25/26, D7 (issue 25 "no single role can publish ... or wipe";
// item 1 asks for provenance and conserved coverage; docs/safety.md: "A
// holder of the handoff role itself could publish a cutover that removes
// objects and adds nothing ... bounded by the data bucket's undo window").
// The provenance and conservation checks run only in the handoff's code,
// which a holder of the handoff role does not need: with its own signed
// publisher client it submits a cutover of the live head that removes
// every object and adds nothing; the publisher (the moment of effect)
// accepts it, and GC, doing exactly its job, deletes every object a
// retention window later. One role published the wipe, the shipped GC
// carried it out; the undo window is the only bound (and it expires).
func TestReview2526_HandoffRoleAlonePublishesAWipeGCCarriesOut(t *testing.T) {
	e := startGC(t, nil)
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
	if ans.Status != contract.CutoverAccepted {
		return // refused at the moment of effect: what the issue asks
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
	t.Fatalf("the publisher accepted a cutover from the handoff role that removes all %d objects of c1 and adds nothing (v%d -> v%d); GC then deleted %d of them",
		len(live), head.Version, ans.CommittedVersion, gone)
}
