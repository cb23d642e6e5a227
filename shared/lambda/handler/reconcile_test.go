package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
)

func reconcileRecord(t *testing.T, id string, cols ...string) events.SQSMessage {
	t.Helper()
	m, err := contract.ReconcileMessage(contract.NewReconcileRequest(cols, now.UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	return events.SQSMessage{MessageId: id, Body: string(m.Body), EventSource: "aws:sqs", Attributes: map[string]string{"MessageGroupId": m.Group}}
}

// A record that fails returns itself and every later record of its group
// (FIFO order), and nothing of any other group; a malformed body fails its
// record only; a chunk fans out one request per collection.
func TestReconcileBatchFailsOnlyTheFailingGroup(t *testing.T) {
	h, q := observerFixture(t)
	missing1 := reconcileRecord(t, "m1", "missing")
	missing2 := reconcileRecord(t, "m2", "missing")
	orders := reconcileRecord(t, "o1", "orders")
	chunk := reconcileRecord(t, "k1", "a1", "a2", "a3")
	bad := events.SQSMessage{MessageId: "x1", Body: `{"schema_version":1,"collections":["orders"]}`, Attributes: map[string]string{"MessageGroupId": "orders-x"}}
	resp, err := h.HandleReconcile(context.Background(), events.SQSEvent{Records: []events.SQSMessage{missing1, orders, bad, missing2, chunk}})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if len(failed) != 3 || failed[0] != "m1" || failed[1] != "x1" || failed[2] != "m2" {
		t.Fatalf("failed %v, want [m1 x1 m2]", failed)
	}
	if len(q.tasks) == 0 || q.tasks[0].Collection != "orders" {
		t.Fatalf("orders must be reconciled although another group failed first: %+v", q.tasks)
	}
	if len(q.reqs) != 3 || len(q.reqs[0].Collections) != 1 || q.reqs[2].Collections[0] != "a3" {
		t.Fatalf("the chunk fans out one request per collection: %+v", q.reqs)
	}
}

// With less invocation time left than one record needs, nothing more is
// taken: the records come back (after their visibility timeout) whole.
func TestReconcileBatchStopsBeforeTheDeadline(t *testing.T) {
	h, q := observerFixture(t) // reserve: one second
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	resp, err := h.HandleReconcile(ctx, events.SQSEvent{Records: []events.SQSMessage{reconcileRecord(t, "o1", "orders"), reconcileRecord(t, "k1", "a1", "a2")}})
	if err != nil || len(resp.BatchItemFailures) != 2 || len(q.tasks) != 0 || len(q.reqs) != 0 {
		t.Fatalf("want both records returned untouched: %+v %v tasks %d reqs %d", resp, err, len(q.tasks), len(q.reqs))
	}
}
