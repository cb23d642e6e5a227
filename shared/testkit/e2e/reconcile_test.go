package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/resources"
)

// createMany creates n collections r000..., each with its first head.
func createMany(t testing.TB, env *localenv.Env, n int) []string {
	t.Helper()
	var cols []string
	for i := range n {
		c := fmt.Sprintf("r%04d", i)
		if err := env.Workload.Create(context.Background(), c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	env.Stack.TakeS3Events()
	return cols
}

// Issue 12 item 5: reconciliation fans out. The scheduled invocation only
// sends chunks (no head is read there); each chunk is split (one batch per
// invocation) down to one request per collection; each collection is reconciled on its own, so a collection
// whose head cannot be read fails alone (its record, nobody else's) and
// every other collection is reconciled in the same pass.
func TestReconcileFansOutOneRequestPerCollection(t *testing.T) {
	// The failed collection's record stays invisible while the loop below
	// drains the queue (20 s, not the local 2 s default, which a loaded
	// machine outlasted), but not so long that a batch received and then
	// lost comes back too late: under load an SDK receive whose answer was
	// lost is retried, and the first receive's messages stay in flight for
	// the visibility timeout (CI saw one batch of 10 go missing that way).
	env := start(t, localenv.Options{HoldS3Events: true, NoDelivery: true, VisibilityTimeout: 20 * time.Second})
	ctx := context.Background()
	n := contract.ReconcileChunkMax + 10 // two chunks
	cols := createMany(t, env, n)
	bad := cols[n/2]
	if _, err := env.Bucket.Put(ctx, contract.HeadKey(bad), []byte(`{"schema_version":1,"collection":`)); err != nil {
		t.Fatal(err)
	}

	before := env.Stack.Counter().Snapshot()
	out, err := env.Stack.Invoke(ctx, resources.FnObserver, []byte(`{"source":"aws.events","detail-type":"Scheduled Event"}`))
	if err != nil {
		t.Fatal(err)
	}
	calls := env.Stack.Counter().Since(before)
	var sched handler.ObserverResponse
	if err := json.Unmarshal(out, &sched); err != nil || sched.Reconcile == nil || sched.Reconcile.Requested != 2 {
		t.Fatalf("the scheduled pass should send 2 chunks: %s (%v)", out, err)
	}
	if len(calls) != 1 || calls["sqs:SendMessageBatch"] != 1 {
		t.Fatalf("the scheduled pass reads nothing and sends one batch: %v", calls)
	}

	// Drain until every collection was reconciled once: the bad one's
	// returns (each one more record and one more failure) are not counted
	// again; an empty receive while messages are still in flight waits
	// for them to come back.
	failed := map[string]int{}
	records, fannedOut := 0, 0
	reconciled := func() int { return records - max(failed[bad]-1, 0) }
	// A bound, not a timing: the loop ends as soon as every collection
	// was reconciled (seconds); a loaded machine with moto_server needed
	// over 2 minutes.
	deadline := time.Now().Add(6 * time.Minute)
	for reconciled() < n && time.Now().Before(deadline) {
		resp, ok, err := env.Stack.DeliverBatch(ctx, env.Prov.QueueURLs[resources.QueueReconcile], resources.FnObserver, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if queueDepth(t, env, resources.QueueReconcile) <= 1 {
				break // only the failed one is left: nothing more will come
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		var r handler.ObserverResponse
		if err := json.Unmarshal(resp, &r); err != nil || r.Reconcile == nil {
			t.Fatalf("batch response %s: %v", resp, err)
		}
		records += r.Reconcile.Collections
		fannedOut += r.Reconcile.Requested
		for c := range r.Reconcile.Failed {
			failed[c]++
		}
		if len(r.BatchItemFailures) != len(r.Reconcile.Failed) {
			t.Fatalf("only the failed collection's record is returned: %s", resp)
		}
	}
	if fannedOut < n || reconciled() != n {
		t.Fatalf("fanned out %d requests and reconciled %d collections (%d records), want every collection once", fannedOut, reconciled(), records)
	}
	if len(failed) != 1 || failed[bad] < 1 {
		t.Fatalf("only %s should fail: %v", bad, failed)
	}
	state := awsio.NewObservedTable(env.Clients.Dynamo, env.Config.Table)
	for _, c := range cols {
		st, err := state.Get(ctx, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		if (st.Version == 1) != (c != bad) {
			t.Fatalf("%s observed at v%d", c, st.Version)
		}
	}
	if !strings.Contains(env.Metrics.String(), `"ReconcileFailures"`) {
		t.Fatal("a reconcile failure must be counted as ReconcileFailures (alarmed apart from ObserveFailures)")
	}
	// The failed record comes back after its visibility timeout: the
	// collection is retried alone, and lands in the reconcile DLQ after
	// maxReceiveCount (not the head-notification failure queue).
	if d := queueDepth(t, env, resources.QueueReconcile); d != 1 {
		t.Fatalf("reconcile queue holds %d messages, want the failed one", d)
	}
}
