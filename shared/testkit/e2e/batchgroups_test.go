package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// downFor is the publisher, unreachable for one collection.
type downFor struct {
	inner handoff.Publisher
	down  string
}

func (p downFor) Cutover(ctx context.Context, req contract.CutoverRequest) (contract.CutoverAnswer, error) {
	if req.Collection == p.down {
		return contract.CutoverAnswer{}, fmt.Errorf("publisher unreachable for %s: %w", req.Collection, errors.New("connection refused"))
	}
	return p.inner.Cutover(ctx, req)
}

// Issue 12 item 3 (rule 9): a handoff batch mixes collections while the
// publisher is down for one of them. Only that collection's records fail
// (its later records with it, in order); the others cut over in the same
// invocation. With group_isolation off every record after the failing one
// fails too, and the other collections' cutovers burn their receives.
func TestHandoffBatchFailureStaysInItsGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		g        guard.Set
		wantCuts int // cutovers of c2 and c3
	}{{"guarded", guard.All(), 2}, {"group_isolation_off", without(t, "group_isolation"), 0}} {
		t.Run(tc.name, func(t *testing.T) {
			env := cxStart(t, localenv.Options{NoDelivery: true})
			var recs []events.SQSMessage
			for _, c := range []string{"c1", "c2", "c3"} {
				cxSetup(t, env, c, 4)
				_, body := cxTask(t, env, c)
				if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) != 0 {
					t.Fatalf("compaction of %s failed", c)
				}
				for _, b := range cxReceive(t, env, resources.QueueHandoff) {
					sender, _ := received.Load(b)
					recs = append(recs, events.SQSMessage{MessageId: "m-" + c, ReceiptHandle: "rh", Body: b, EventSource: "aws:sqs",
						Attributes:     map[string]string{"MessageGroupId": c, "ApproximateReceiveCount": "1", "SenderId": sender.(string)},
						EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + resources.QueueHandoff, AWSRegion: "us-east-1"})
				}
			}
			if len(recs) != 3 {
				t.Fatalf("%d completions, want 3", len(recs))
			}
			g := tc.g
			cxRegisterHandoff(env, app.HandoffOptions{Guards: &g,
				Publisher: downFor{inner: app.PublisherClient(env.Config, env.FunctionClients(resources.FnHandoff)), down: "c1"}})
			payload, _ := json.Marshal(events.SQSEvent{Records: recs}) // c1 first: its failure comes before the others
			out, err := env.Stack.Invoke(context.Background(), resources.FnHandoff, payload)
			if err != nil {
				t.Fatal(err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			cuts := len(cxCutovers(cxLineage(t, env, "c2"))) + len(cxCutovers(cxLineage(t, env, "c3")))
			if cuts != tc.wantCuts || len(cxCutovers(cxLineage(t, env, "c1"))) != 0 {
				t.Fatalf("cutovers of c2+c3: %d, want %d (failed %v)", cuts, tc.wantCuts, failed)
			}
			if tc.wantCuts == 2 && !slices.Equal(failed, []string{"m-c1"}) {
				t.Fatalf("failed %v, want only c1's record", failed)
			}
		})
	}
}
