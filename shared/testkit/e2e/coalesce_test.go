package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Issue 16 item 1: at most one pending rewrite per collection. Heads that
// find compaction due while a compaction task waits update the debt, not
// the queue; the worker that takes the task plans against the head it
// finds (a task pinned to that head, leased and fenced as any) and, from
// its take on, the next head with compaction due enqueues again.
func TestHeadsCoalesceIntoOnePendingRewrite(t *testing.T) {
	env := newHeldEnv(t) // merge factor 3: compaction due from the third level-0 object
	for range 6 {        // each head observed before the next commit
		for _, ev := range commitHeld(t, env, "c1", 1) {
			if _, err := deliver(t, env, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	bodies := cxReceive(t, env, resources.QueueCompaction)
	if len(bodies) != 1 {
		t.Fatalf("%d compaction tasks pending after 6 heads with compaction due from the third, want 1", len(bodies))
	}
	if !strings.Contains(env.Metrics.String(), `"RewritesCoalesced"`) {
		t.Fatal("coalesced heads are not counted (RewritesCoalesced)")
	}
	task, err := contract.DecodeTask("pending", []byte(bodies[0]))
	if err != nil || task.BaseManifestVersion >= 7 {
		t.Fatalf("the pending task is the first due head's: %+v %v", task, err)
	}
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, bodies...); len(failed) > 0 {
		t.Fatal("compaction failed")
	}
	done := cxReceive(t, env, resources.QueueHandoff)
	if len(done) != 1 {
		t.Fatalf("%d completions, want the compaction's", len(done))
	}
	c, err := contract.DecodeCompletion("completion", []byte(done[0]))
	if err != nil || c.BaseManifestVersion != 7 {
		t.Fatalf("the worker must plan against the head it finds (v7): %+v %v", c, err)
	}
	// Taken: the next head with compaction due enqueues a task again.
	for _, ev := range commitHeld(t, env, "c1", 1) {
		if _, err := deliver(t, env, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(cxReceive(t, env, resources.QueueCompaction)); n != 1 {
		t.Fatalf("after the take, the next due head enqueued %d tasks, want 1", n)
	}
}

// Issue 16 item 1: a coalesced rewrite waits for a still head before it
// starts (a rewrite overtaken by a commit is dropped under rule 2), and the
// heads committed meanwhile coalesce into it: one task, one merge, planned
// against the head where the writer stopped. A writer that never stops
// delays it only up to the wait's bound: past it the rewrite starts right
// after a commit, so the debt is always worked off. (The executor's own
// wait, as where no deferral by visibility is wired; the sim runs it too.)
func TestRewriteWaitsForAStillHeadAndCoalescesTheBurst(t *testing.T) {
	for _, tc := range []struct {
		name    string
		commits int // commits the writer makes while the worker waits (-1: never stops)
	}{
		{"burst_ends", 4},
		{"writer_never_stops", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, clock := stillEnv(t)
			ctx := context.Background()
			bodies := cxReceive(t, env, resources.QueueCompaction)
			task, err := contract.DecodeTask("queued", []byte(bodies[0]))
			if err != nil {
				t.Fatal(err)
			}
			sleeps, left := 0, tc.commits
			ex, rec := app.CompactionExecutor(env.Config, env.FunctionClients(resources.FnCompaction), cxRuntime(env), app.CompactionOptions{
				Sleep: func(ctx context.Context, d time.Duration) error {
					sleeps++
					if left != 0 { // the writer commits while the worker waits
						commitObserved(t, env)
						left--
					}
					clock.Advance(d)
					return ctx.Err()
				}})
			res, err := ex.Run(ctx, task, "worker-1")
			if err != nil {
				t.Fatal(err)
			}
			if err := rec.Flush(env.Metrics, clock.Now()); err != nil {
				t.Fatal(err)
			}
			head, err := env.Lineage.Head(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.commits > 0 && head.Version != uint64(4+tc.commits) {
				t.Fatalf("head v%d, want v%d", head.Version, 4+tc.commits)
			}
			if n := len(cxReceive(t, env, resources.QueueCompaction)); n != 0 {
				t.Fatalf("the heads committed during the wait enqueued %d more tasks, want 0 (coalesced)", n)
			}
			if res.Outcome != compact.OutcomeReported || res.Completion == nil || res.Completion.BaseManifestVersion != head.Version {
				t.Fatalf("the rewrite must run, planned against the head after the wait (v%d): %+v (%d sleeps)", head.Version, res, sleeps)
			}
			if cxMetric(env, "RewriteStartDeferred") != 1 || cxMetric(env, "CompactionsRun") != 1 {
				t.Fatalf("deferred %v, merges %v; want 1 and 1", cxMetric(env, "RewriteStartDeferred"), cxMetric(env, "CompactionsRun"))
			}
			if max := 2 + int(3*time.Second/(50*time.Millisecond)); sleeps > max {
				t.Fatalf("%d sleeps, more than the wait's bound %d", sleeps, max)
			}
		})
	}
}

// The deployed path of the same wait: the compaction function returns a
// rewrite whose head is not still to its queue (a visibility change: no
// worker waits, its collection's group waits with it) and reports no
// failure; redelivered once the head is still, it runs against the head it
// finds. Never dropped: the message stays in the queue until then.
func TestRewriteGoesBackToItsQueueUntilTheHeadIsStill(t *testing.T) {
	env, clock := stillEnv(t)
	ctx := context.Background()
	url := env.Prov.QueueURLs[resources.QueueCompaction]
	invoke := func() events.SQSEventResponse {
		t.Helper()
		out, err := env.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive the compaction task: %v %d", err, len(out.Messages))
		}
		m := out.Messages[0]
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + resources.QueueCompaction, AWSRegion: "us-east-1"}}}
		payload, _ := json.Marshal(ev)
		resp, err := env.Stack.Invoke(ctx, resources.FnCompaction, payload)
		if err != nil {
			t.Fatal(err)
		}
		var r events.SQSEventResponse
		if err := json.Unmarshal(resp, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.BatchItemFailures) == 1 {
			// Deferred: as if its visibility delay had passed.
			if _, err := env.Clients.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
				ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	if r := invoke(); len(r.BatchItemFailures) != 1 {
		t.Fatalf("a rewrite of a head committed just now must go back to its queue: %+v", r)
	}
	commitObserved(t, env) // the writer goes on: coalesced into the waiting task
	if r := invoke(); len(r.BatchItemFailures) != 1 {
		t.Fatalf("still committing: the rewrite must wait again: %+v", r)
	}
	if cxMetric(env, "CompactionsRun") != 0 || cxMetric(env, "BatchItemFailures") != 0 || cxMetric(env, "RewriteStartDeferred") != 2 {
		t.Fatalf("merges %v, failures %v, deferrals %v; want 0, 0, 2", cxMetric(env, "CompactionsRun"), cxMetric(env, "BatchItemFailures"),
			cxMetric(env, "RewriteStartDeferred"))
	}
	clock.Advance(5 * time.Second) // the head is still now
	if r := invoke(); len(r.BatchItemFailures) != 0 {
		t.Fatalf("a still head's rewrite must run: %+v", r)
	}
	done := cxReceive(t, env, resources.QueueHandoff)
	if len(done) != 1 {
		t.Fatalf("%d completions, want 1", len(done))
	}
	c, err := contract.DecodeCompletion("completion", []byte(done[0]))
	if err != nil || c.BaseManifestVersion != 5 {
		t.Fatalf("the rewrite must be planned against the head it finds (v5): %+v %v", c, err)
	}
}

// stillEnv is an environment with the still-head wait on (1 s quiet, 2 s
// bound: the option a publisher without the conflict check wants) whose c1
// has a compaction task queued (compaction due from the third level-0
// object, head v4 committed just now).
func stillEnv(t *testing.T) (*localenv.Env, *cxClock) {
	t.Helper()
	clock := newCxClock()
	pol := mergePolicy(3)
	pol.Compaction.StartQuiet, pol.Compaction.StartMaxWait = policy.Duration(time.Second), policy.Duration(2*time.Second)
	pol.Compaction.ResultWait = 0 // the start's sleeps only (the wait for the cutover sleeps too)
	env := start(t, localenv.Options{HoldS3Events: true, NoDelivery: true, Policy: pol, Now: clock.Now})
	if err := env.Workload.Create(context.Background(), "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	env.Stack.TakeS3Events()
	for range 3 {
		commitObserved(t, env)
	}
	if d := queueDepth(t, env, resources.QueueCompaction); d != 1 {
		t.Fatalf("%d compaction tasks, want 1", d)
	}
	return env, clock
}

// commitObserved commits one append to c1 and delivers its head event.
func commitObserved(t *testing.T, env *localenv.Env) {
	t.Helper()
	for _, ev := range commitHeld(t, env, "c1", 1) {
		if _, err := deliver(t, env, ev); err != nil {
			t.Fatal(err)
		}
	}
}
