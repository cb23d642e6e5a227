package e2e

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/resources"
)

// A restore that leaves about a thousand roots above the head (the
// listing of the manifests prefix crosses S3's 1,000-key page). GC
// refuses, and its refused plan names every one of those roots, so the
// documented procedure (a confirmation built from the plan, as bcc
// confirm-lineage does) names them all and lifts the refusal; the
// confirmation is stored without a TTL (it must outlive the table's
// expiry while the roots it covers exist), and what the abandoned
// versions reference stays protected for a token lifetime after it. On
// the old path GC refused as soon as more than 64 roots were listed,
// before it read any confirmation, and the refused plan named no roots:
// nothing could ever be confirmed.
func TestLargeHeadRegressionCanBeConfirmed(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	in := e.add("c1", 2, 0, 0) // v2
	comp, out := e.lateCutover("c1", in)
	if _, err := e.handoff().Process(e.ctx, comp); err != nil {
		t.Fatal(err) // v3 holds the output
	}
	const above = 1000
	e.commitsWithoutChange("c1", above-1) // v4 .. v1002
	e.reconcile()                         // observed v1002
	e.clk.Advance(time.Hour)
	if _, err := e.Publisher.Restore(e.ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	e.watermark(e.clk.Now())
	ex, m := e.executor(guard.All(), nil)
	sweep := func(id string) gc.Report {
		t.Helper()
		rep, err := ex.Run(e.ctx, contract.Task{TaskID: id, Kind: contract.KindGC, Collection: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := sweep("t1"); rep.Refused != gc.RefusedRegression || !e.exists(out.Key) {
		t.Fatalf("want a head_regression refusal and the output kept: %+v", rep)
	}
	plan, err := ex.Plan(e.ctx, "c1")
	if len(plan.RootsAbove) != above {
		t.Fatalf("the refused plan names %d roots above the head (err %v), want all %d", len(plan.RootsAbove), err, above)
	}
	conf, ok := gc.ConfirmationFor(plan, "test", "restored v2", e.clk.Now())
	if !ok || len(conf.AbandonedRoots) != above || conf.AbandonedHeadVersion != above+2 {
		t.Fatalf("the confirmation names %d roots and head v%d, want %d and v%d", len(conf.AbandonedRoots), conf.AbandonedHeadVersion, above, above+2)
	}
	table := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
	if err := table.ConfirmLineage(e.ctx, conf); err != nil {
		t.Fatal(err)
	}
	item, err := e.Clients.Dynamo.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(e.Config.Table), Key: map[string]ddb.AttributeValue{
		"pk": &ddb.AttributeValueMemberS{Value: resources.OperatorKeyPrefix + "COLL#c1"}, "sk": &ddb.AttributeValueMemberS{Value: "LINEAGE"}}})
	if err != nil || len(item.Item) == 0 {
		t.Fatalf("confirmation item: %v %v", item, err)
	}
	if _, ttl := item.Item["expires_at"]; ttl {
		t.Fatalf("the confirmation carries a TTL (expires_at): it would expire while the roots it covers exist")
	}
	e.reconcile() // the observer records the confirmed head again
	if rep := sweep("t2"); rep.Refused != "" || !e.exists(out.Key) {
		t.Fatalf("after the confirmation GC resumes and keeps the abandoned output for a token lifetime: %+v", rep)
	}
	if n := m.Counts()["GCRefused|Reason=head_regression"]; n != 1 {
		t.Fatalf("GCRefused head_regression %v, want only the first sweep's", n)
	}
	e.clk.Advance(20 * time.Minute)
	e.watermark(e.clk.Now())
	if rep := sweep("t3"); rep.Refused != "" || e.exists(out.Key) {
		t.Fatalf("a token lifetime after the confirmation the abandoned output is reclaimed: %+v", rep)
	}
}

// commitsWithoutChange commits n versions that change nothing above c's
// head, as the publisher writes them (root, then the head by If-Match),
// without its per-commit work: a thousand versions in a fraction of a
// second.
func (e *gcEnv) commitsWithoutChange(c string, n int) {
	e.t.Helper()
	h, m, err := e.Lineage.HeadRoot(e.ctx, c)
	if err != nil {
		e.t.Fatal(err)
	}
	key, sum := h.ManifestKey, h.ManifestChecksum
	for range n {
		m.ParentVersion, m.ParentKey, m.ParentChecksum = m.Version, key, sum
		m.Version++
		m.CommitTsUnixMs = e.clk.Now().UnixMilli()
		m.Origin = contract.Origin{Kind: contract.OriginAppend}
		m.Change = contract.Change{Added: []contract.ObjectEntry{}, Removed: []contract.ObjectEntry{}}
		body, err := contract.Encode(m)
		if err != nil {
			e.t.Fatal(err)
		}
		sum = contract.Checksum(body)
		key = contract.ManifestKey(c, m.Inc(), m.Version, sum)
		e.put(key, body)
	}
	head := contract.Head{SchemaVersion: contract.SchemaVersion, Collection: c, Incarnation: h.Incarnation, Version: m.Version, ManifestKey: key,
		ManifestChecksum: sum, CommittedAtUnixMs: e.clk.Now().UnixMilli()}
	body, err := contract.Encode(head)
	if err != nil {
		e.t.Fatal(err)
	}
	e.put(contract.HeadKey(c), body)
}
