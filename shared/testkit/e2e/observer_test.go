package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

// commitHeld appends n times and returns the held head notifications in
// commit order.
func commitHeld(t *testing.T, env *localenv.Env, collection string, n int) []localaws.HeldEvent {
	t.Helper()
	ctx := context.Background()
	for range n {
		if _, err := env.Workload.Append(ctx, collection, env.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	return env.Stack.TakeS3Events()
}

func newHeldEnv(t *testing.T) *localenv.Env {
	t.Helper()
	env := start(t, localenv.Options{HoldS3Events: true, NoDelivery: true, Policy: mergePolicy(3)})
	if err := env.Workload.Create(context.Background(), "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	env.Stack.TakeS3Events() // v1's notification
	return env
}

func deliver(t *testing.T, env *localenv.Env, ev localaws.HeldEvent) (map[string]int, error) {
	t.Helper()
	before := env.Stack.Counter().Snapshot()
	_, err := env.Stack.Invoke(context.Background(), ev.Function, ev.Payload)
	return env.Stack.Counter().Since(before), err
}

func TestHeadEventDeliveredTwiceEnqueuesOnce(t *testing.T) {
	env := newHeldEnv(t)
	evs := commitHeld(t, env, "c1", 3) // v2..v4: three L0 objects, compaction due
	calls, err := deliver(t, env, evs[len(evs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if calls["sqs:SendMessageBatch"] != 1 || queueDepth(t, env, resources.QueueCompaction) != 1 {
		t.Fatalf("first delivery: want one enqueue, calls %v depth %d", calls, queueDepth(t, env, resources.QueueCompaction))
	}
	calls, err = deliver(t, env, evs[len(evs)-1])
	if err != nil {
		t.Fatal(err)
	}
	// The duplicate re-derives the same task and sends it again (a lost
	// first enqueue would be made up for); FIFO deduplication keeps one.
	if calls["sqs:SendMessageBatch"] != 1 {
		t.Fatalf("duplicate delivery: want the same task re-sent once, calls %v", calls)
	}
	if d := queueDepth(t, env, resources.QueueCompaction); d != 1 {
		t.Fatalf("queue depth %d after duplicate, want 1 (deduplicated)", d)
	}
	if !strings.Contains(env.Metrics.String(), `"DuplicateEventsAbsorbed":1`) {
		t.Fatalf("duplicate not counted: %s", env.Metrics.String())
	}
}

func TestOlderEventAfterNewerChangesNothing(t *testing.T) {
	env := newHeldEnv(t)
	evs := commitHeld(t, env, "c1", 3)
	v8, v7 := evs[2], evs[1]
	if _, err := deliver(t, env, v8); err != nil {
		t.Fatal(err)
	}
	state := awsio.NewObservedTable(env.FunctionClients(resources.FnObserver).Dynamo, env.Config.Table)
	before, err := state.Get(context.Background(), "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	depthBefore := queueDepth(t, env, resources.QueueCompaction)
	calls, err := deliver(t, env, v7)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := state.Get(context.Background(), "c1", 1)
	// The older event re-reads the newer head: a duplicate observation,
	// which re-sends that head's task (deduplicated by the FIFO queue).
	if queueDepth(t, env, resources.QueueCompaction) != depthBefore || calls["dynamodb:PutItem"]+calls["dynamodb:DeleteItem"] != 0 || after != before {
		t.Fatalf("older event changed something: calls %v, state %+v -> %+v", calls, before, after)
	}
}

// The state table itself refuses to go backwards: even an observer that read
// an older head (it raced a newer commit) cannot regress the observed version.
func TestObservedStateOnlyMovesForward(t *testing.T) {
	env := newHeldEnv(t)
	state := awsio.NewObservedTable(env.FunctionClients(resources.FnObserver).Dynamo, env.Config.Table)
	ctx := context.Background()
	sum := contract.Checksum([]byte("x"))
	if _, err := state.Advance(ctx, observe.Observed{Collection: "c9", Version: 8, Checksum: sum}); err != nil {
		t.Fatal(err)
	}
	prev, err := state.Advance(ctx, observe.Observed{Collection: "c9", Version: 7, Checksum: sum})
	if !errors.Is(err, store.ErrConditionFailed) || prev.Version != 8 {
		t.Fatalf("v7 after v8: err %v prev %d, want ErrConditionFailed with prev 8", err, prev.Version)
	}
	if _, err := state.Advance(ctx, observe.Observed{Collection: "c9", Version: 8, Checksum: sum}); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("v8 twice: %v, want ErrConditionFailed", err)
	}
}

// writeHead points c1's head at a root of our making (a broken publisher).
func writeHead(t *testing.T, env *localenv.Env, root []byte, checksum string, version uint64) {
	t.Helper()
	ctx := context.Background()
	key := contract.ManifestKey("c1", 1, version, checksum)
	if _, err := env.Bucket.Put(ctx, key, root); err != nil {
		t.Fatal(err)
	}
	head, _ := contract.Encode(contract.Head{SchemaVersion: 1, Collection: "c1", Version: version, ManifestKey: key, ManifestChecksum: checksum, CommittedAtUnixMs: 1})
	if _, err := env.Bucket.Put(ctx, contract.HeadKey("c1"), head); err != nil {
		t.Fatal(err)
	}
}

func currentRoot(t *testing.T, env *localenv.Env) (contract.Head, []byte) {
	t.Helper()
	h, err := env.Lineage.Head(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Bucket.Get(context.Background(), h.ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	return h, b
}

func TestUnverifiableHeadEnqueuesNothingAndSaysWhy(t *testing.T) {
	cases := map[string]struct {
		mutate func(root []byte) (body []byte, checksum string)
		want   string
	}{
		"checksum mismatch": {
			mutate: func(root []byte) ([]byte, string) { return root, contract.Checksum([]byte("not the root")) },
			want:   "checksum mismatch",
		},
		"unknown manifest field": {
			mutate: func(root []byte) ([]byte, string) {
				var m map[string]any
				_ = json.Unmarshal(root, &m)
				m["deletion_vectors"] = []string{"dv-1"}
				b, _ := json.Marshal(m)
				return b, contract.Checksum(b)
			},
			want: `field "deletion_vectors" is not understood`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := newHeldEnv(t)
			commitHeld(t, env, "c1", 3)
			h, root := currentRoot(t, env)
			body, sum := tc.mutate(root)
			writeHead(t, env, body, sum, h.Version+1)
			evs := env.Stack.TakeS3Events()
			calls, err := deliver(t, env, evs[len(evs)-1])
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			if calls["sqs:SendMessageBatch"] != 0 || calls["dynamodb:UpdateItem"] != 0 {
				t.Fatalf("unverifiable head caused writes: %v", calls)
			}
			if d := queueDepth(t, env, resources.QueueCompaction); d != 0 {
				t.Fatalf("queue depth %d", d)
			}
		})
	}
}

func TestEventForOtherKeyIsIgnored(t *testing.T) {
	env := newHeldEnv(t)
	ctx := context.Background()
	// The bucket notification filter does not even deliver data keys...
	if _, err := env.Bucket.Put(ctx, contract.AppendSegmentKey("c1", 1, 99, 0), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if evs := env.Stack.TakeS3Events(); len(evs) != 0 {
		t.Fatalf("data key notified the observer: %d events", len(evs))
	}
	// ...and the observer ignores one that reaches it anyway.
	held := commitHeld(t, env, "c1", 1)
	ev := strings.Replace(string(held[0].Payload), contract.HeadSuffix, "manifests/x.json", 1)
	calls, err := deliver(t, env, localaws.HeldEvent{Function: resources.FnObserver, Payload: []byte(ev)})
	if err != nil || localaws.Total(calls) != 0 {
		t.Fatalf("other key: err %v calls %v, want ignored with no AWS call", err, calls)
	}
}

func TestObserverMakesAtMostFourAWSCallsPerHead(t *testing.T) {
	env := newHeldEnv(t)
	evs := commitHeld(t, env, "c1", 4)
	for i, ev := range evs {
		calls, err := deliver(t, env, ev)
		if err != nil {
			t.Fatal(err)
		}
		if n := localaws.Total(calls); n > 4 {
			t.Fatalf("head %d: %d AWS calls %v, want <= 4", i, n, calls)
		}
		t.Logf("head %d: %v", i, calls)
	}
}

// A head notification whose every invocation fails (the head names a root
// whose checksum does not match) is not lost: after Lambda's two retries it
// reaches the observer's on-failure destination queue as a destination
// record, sent on the observer's behalf (under its deployed role when the
// IAM checks are on).
func TestExhaustedHeadNotificationReachesFailureQueue(t *testing.T) {
	env := start(t, localenv.Options{Policy: mergePolicy(3)})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	settle(t, env)
	h, root := currentRoot(t, env)
	writeHead(t, env, root, contract.Checksum([]byte("not the root")), h.Version+1)
	settle(t, env)
	out, err := env.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.Prov.FailureQueueURL), WaitTimeSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("%d messages in the failure queue, want 1", len(out.Messages))
	}
	var rec struct {
		RequestContext struct {
			Condition string `json:"condition"`
		} `json:"requestContext"`
		RequestPayload json.RawMessage `json:"requestPayload"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(out.Messages[0].Body)), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.RequestContext.Condition != "RetriesExhausted" || !strings.Contains(string(rec.RequestPayload), contract.HeadSuffix) {
		t.Fatalf("destination record %s", aws.ToString(out.Messages[0].Body))
	}
}
