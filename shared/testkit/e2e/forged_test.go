package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// Issue 25 item 1: the handoff queue is written by executor roles, so the
// handoff takes nothing on a sender's word. A holder of the compaction role
// forges completions (a task id nobody issued removing every live object
// and adding nothing, a real identity adding nothing, someone else's
// object as output, outputs that cannot hold the inputs' records); a
// holder of the GC or the observer role sends compaction's real result as
// its own; compaction sends a tombstone cleanup and a namespace release
// request. Every one is refused and counted by check, the head does not
// move, and compaction's real report, sent by compaction, still lands.
// Delivered by the stack's event source mapping, with the SenderId SQS
// stamps on each message.
func TestForgedCompletionsAreRefusedAndARealOneLands(t *testing.T) {
	env, real := forgeSetup(t)
	ctx := context.Background()
	head0, err := env.Lineage.Head(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*contract.Completion)) contract.Completion {
		c := real
		cov := contract.Coverage{Removed: append([]contract.ObjectEntry(nil), real.Coverage.Removed...), Added: append([]contract.ObjectEntry(nil), real.Coverage.Added...)}
		c.Coverage = &cov
		f(&c)
		return c
	}
	forged := []struct {
		from string
		msg  any
	}{
		{resources.FnCompaction, edit(func(c *contract.Completion) { c.TaskID, c.Coverage.Added = "forged", nil })},
		{resources.FnCompaction, edit(func(c *contract.Completion) { c.Coverage.Added = nil })},
		{resources.FnCompaction, edit(func(c *contract.Completion) {
			c.Coverage.Added[0].Key, c.Coverage.Added[0].Level = contract.AppendSegmentKey("c1", 1, 99, 0), 0
		})},
		{resources.FnCompaction, edit(func(c *contract.Completion) {
			c.Coverage.Added = c.Coverage.Added[:1]
			c.Coverage.Added[0].DocCount = max(1, c.Coverage.Added[0].DeleteCount) // far fewer than the inputs keep
		})},
		{resources.FnGC, real},
		{resources.FnObserver, real},
		{resources.FnCompaction, contract.Completion{SchemaVersion: 1, TaskID: "tombstonecleanup-c1-v1-0000000000000000", Kind: contract.KindTombstoneCleanup,
			Collection: "c1", Outcome: contract.OutcomeSucceeded, Cleanup: &contract.Cleanup{Deleted: []string{}, Complete: true,
				Dependencies: []contract.Dependency{{Name: contract.DepObjects, State: contract.DependencyConfirmed, Evidence: "forged"}}}}},
		{resources.FnCompaction, contract.NamespaceRelease{SchemaVersion: 1, MessageKind: contract.MessageNamespaceRelease, Namespace: "shop", FactsVersion: 1, RequestedAtUnixMs: 1}},
	}
	for i, f := range forged {
		forgeSend(t, env, f.from, i, f.msg)
	}
	forgeSend(t, env, resources.FnCompaction, len(forged), real) // the real report, by its sender
	forgeDeliver(t, env)

	want := map[string]float64{handoff.CheckTaskIdentity: 1, handoff.CheckEmptyRewrite: 1, handoff.CheckForeignOutput: 1, handoff.CheckConservation: 1, handoff.CheckSender: 4}
	for check, n := range want {
		if got := cxMetricDim(env, "ForgedCompletions", "Check", check); got != n {
			t.Errorf("ForgedCompletions{Check=%s} = %v, want %v", check, got, n)
		}
	}
	roots := cxLineage(t, env, "c1")
	if cuts := cxCutovers(roots); len(cuts) != 1 || roots[0].Version != head0.Version+1 {
		t.Fatalf("%d cutovers, head v%d (was v%d): want the real one only", len(cuts), roots[0].Version, head0.Version)
	}
	cxVerify(t, env, "c1")
	if in, err := env.CCS.Intents(ctx); err != nil || len(in) != 0 {
		t.Fatalf("%d release intents recorded from forged messages (%v)", len(in), err)
	}
}

// With the sender check off, the GC role's copy of compaction's result is
// handed off as if compaction had sent it: the check is what keeps a
// holder of one executor role from sending another's kind.
func TestRewriteFromAnotherRoleLandsWithoutTheSenderCheck(t *testing.T) {
	for _, g := range []guard.Set{guard.All(), mustWithout("handoff_sender")} {
		t.Run(fmt.Sprintf("sender_check=%v", g.HandoffSender), func(t *testing.T) {
			env, real := forgeSetup(t)
			cxRegisterHandoff(env, app.HandoffOptions{Guards: &g})
			forgeSend(t, env, resources.FnGC, 0, real)
			forgeDeliver(t, env)
			cuts := len(cxCutovers(cxLineage(t, env, "c1")))
			if g.HandoffSender && (cuts != 0 || cxMetricDim(env, "ForgedCompletions", "Check", handoff.CheckSender) != 1) {
				t.Fatalf("guarded: %d cutovers, want the GC role's rewrite refused", cuts)
			}
			if !g.HandoffSender && cuts != 1 {
				t.Fatalf("unguarded: %d cutovers, want the GC role's rewrite handed off", cuts)
			}
		})
	}
}

// forgeSetup runs one real compaction of c1 and returns its completion,
// taken off the handoff queue.
func forgeSetup(t *testing.T) (*localenv.Env, contract.Completion) {
	t.Helper()
	env := cxStart(t, localenv.Options{NoDelivery: true})
	cxSetup(t, env, "c1", 4)
	_, body := cxTask(t, env, "c1")
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) != 0 {
		t.Fatal("compaction failed")
	}
	bodies := cxReceive(t, env, resources.QueueHandoff)
	if len(bodies) != 1 {
		t.Fatalf("%d completions, want 1", len(bodies))
	}
	real, err := contract.DecodeCompletion("real", []byte(bodies[0]))
	if err != nil || real.Coverage == nil || len(real.Coverage.Added) == 0 {
		t.Fatalf("real completion %+v: %v", real, err)
	}
	return env, real
}

// forgeSend sends msg to the handoff queue signed as function from, in a
// group and with a deduplication id of its own (a forger picks both).
func forgeSend(t *testing.T, env *localenv.Env, from string, n int, msg any) {
	t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.FunctionClients(from).SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(env.Prov.QueueURLs[resources.QueueHandoff]), MessageBody: aws.String(string(body)),
		MessageGroupId: aws.String(fmt.Sprintf("g%d", n)), MessageDeduplicationId: aws.String(fmt.Sprintf("forged-%d", n)),
	})
	if err != nil {
		t.Fatalf("send as %s: %v", from, err)
	}
}

// forgeDeliver delivers the handoff queue to the handoff function as its
// event source mapping does, until it is empty.
func forgeDeliver(t *testing.T, env *localenv.Env) {
	t.Helper()
	for range 20 {
		_, ok, err := env.Stack.DeliverBatch(context.Background(), env.Prov.QueueURLs[resources.QueueHandoff], resources.FnHandoff, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
	}
	t.Fatal("handoff queue not drained")
}

// cxMetricDim sums metric name over the EMF lines whose dimension dim is val.
func cxMetricDim(env *localenv.Env, name, dim, val string) float64 {
	var sum float64
	for _, line := range strings.Split(env.Metrics.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m[dim] != val {
			continue
		}
		if v, ok := m[name].(float64); ok {
			sum += v
		}
	}
	return sum
}

// Issue 25 item 4: compaction writes its outputs with If-None-Match: *.
// An output key that already holds other bytes (a committed output, an
// earlier attempt under another plan, a forger's object) is never
// overwritten: the attempt fails, reports nothing, and the object stays.
// The same task's own identical bytes (a retry after a crash) are
// recognised and the retry lands (TestCompactionCrashAfterOutputs).
func TestCompactionNeverOverwritesAnOutput(t *testing.T) {
	env := cxStart(t, localenv.Options{NoDelivery: true})
	cxSetup(t, env, "c1", 4)
	task, body := cxTask(t, env, "c1")
	ctx := context.Background()
	var keys []string
	for l := 0; l <= contract.MaxLevel; l++ {
		k := contract.RewriteOutputKey("c1", l, task.TaskID, 0)
		if _, err := env.Bucket.Put(ctx, k, []byte("someone else's bytes")); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) != 1 {
		t.Fatalf("compaction over taken output keys: %d failed, want the task failed", len(failed))
	}
	if n := len(cxReceive(t, env, resources.QueueHandoff)); n != 0 {
		t.Fatalf("%d completions reported", n)
	}
	for _, k := range keys {
		if b, err := env.Bucket.Get(ctx, k); err != nil || string(b) != "someone else's bytes" {
			t.Fatalf("%s after the attempt: %q %v", k, b, err)
		}
	}
	if n := cxMetric(env, "RewriteOutputsTaken"); n != 1 {
		t.Fatalf("RewriteOutputsTaken = %v, want 1", n)
	}
}
