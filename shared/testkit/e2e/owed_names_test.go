package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
)

// One name CCS lists that the contract rejects (here "Bad Name!", written
// into the stand-in's table behind its back) fails only itself: the
// scheduled pass validates every name before it chunks the catalog, counts
// and skips the bad one (InvalidCatalogNames, alarmed), and reconciles the
// rest of its chunk. On the old path the chunk naming it was refused as a
// whole on every pass, until it dead-lettered: none of its collections was
// reconciled.
func TestBadCatalogNameFailsOnlyItself(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	// Head notifications are held (never delivered): only reconciliation
	// observes the heads.
	e := &incEnv{Env: cxStart(t, localenv.Options{Now: clk.Now, HoldS3Events: true}), t: t, clk: clk, ctx: context.Background()}
	names := []string{"alpha", "beta", "gamma"}
	for _, c := range names {
		f, err := e.CCS.Create(e.ctx, c, "", contract.Lifecycle{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Publisher.CreateIncarnation(e.ctx, c, f.Inc()); err != nil {
			t.Fatal(err)
		}
	}
	item := map[string]ddb.AttributeValue{
		"pk": &ddb.AttributeValueMemberS{Value: "FACTS#Bad Name!"}, "sk": &ddb.AttributeValueMemberS{Value: "FACTS"},
		"doc": &ddb.AttributeValueMemberS{Value: `{"schema_version":1,"collection":"Bad Name!","facts_version":1,"tombstoned":false}`},
	}
	if _, err := e.Clients.Dynamo.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Prov.Def.CCSTable.Name), Item: item}); err != nil {
		t.Fatal(err)
	}
	cols, err := e.CCS.Collections(e.ctx)
	if err != nil || len(cols) != 4 {
		t.Fatalf("catalog %v %v: want the bad name listed with the three others", cols, err)
	}
	e.reconcile()
	e.reconcile()
	state := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
	for _, c := range names {
		st, err := state.Get(e.ctx, c, 1)
		if err != nil || st.Version != 1 {
			t.Errorf("%s: observed %+v %v after two passes, want v1 reconciled", c, st, err)
		}
	}
	if n := cxMetric(e.Env, "InvalidCatalogNames"); n != 2 {
		t.Errorf("InvalidCatalogNames %v, want 2 (one bad name, two passes)", n)
	}
	if n := cxMetric(e.Env, "ReconcileRequestsRejected"); n != 0 {
		t.Errorf("ReconcileRequestsRejected %v: a chunk naming the bad name was sent", n)
	}
	if n := dlqDepth(t, e.Env, resources.QueueReconcile) + queueDepth(t, e.Env, resources.QueueReconcile); n != 0 {
		t.Errorf("%d reconcile messages left (queue + DLQ), want 0", n)
	}
}
