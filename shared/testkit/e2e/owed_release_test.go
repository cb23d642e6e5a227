package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/resources"
)

// deliverAll runs every message of class's queue through its function, as
// the event source mapping would, until the queue has none visible.
func (e *gcEnv) deliverAll(class, fn string) int {
	e.t.Helper()
	q, _ := e.Prov.Def.Queue(class)
	n := 0
	for range 50 {
		_, ok, err := e.Stack.DeliverBatch(e.ctx, e.Prov.QueueURLs[class], fn, q.BatchSize)
		if !ok {
			if err != nil {
				e.t.Fatalf("deliver %s: %v", class, err)
			}
			return n
		}
		n++
	}
	return n
}

// deadLetter moves every visible message of class's queue to its DLQ: the
// consumer could not process them (the owner unreachable for every
// receive) and SQS redrove them after maxReceiveCount.
func (e *gcEnv) deadLetter(class string) int {
	e.t.Helper()
	bodies := receiveAll(e.t.(*testing.T), e, class)
	for _, b := range bodies {
		if _, err := e.Clients.SQS.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.Prov.DLQURLs[class]), MessageBody: aws.String(b),
			MessageGroupId: aws.String("dead"), MessageDeduplicationId: aws.String(fmt.Sprintf("dead-%d", len(b)))}); err != nil {
			e.t.Fatal(err)
		}
	}
	return len(bodies)
}

// Issue 24 item 1: the tombstone cleanup closes its cursor ("done") once
// its completion is sent to the handoff queue. When that message
// dead-letters (CCS unreachable for its receives), CCS still holds the
// tombstone unreleased and the bucket is empty; on the old path
// reconciliation saw "done" and asked for nothing, forever. The release is
// owed work derived from CCS's facts: once the completion's delivery bound
// (max_task_lifetime_ms) passed, the next reconciliation schedules the
// cleanup again, which lists what is left (nothing), confirms every
// dependency again and reports again; the handoff records the one intent.
func TestLostReleaseCompletionIsAskedAgain(t *testing.T) {
	e := startGC(t, nil)
	e.create("c1", contract.Lifecycle{})
	e.add("c1", 3, 0, 0)
	if _, err := dropSeen(t, e.Env, e.ctx, "c1", 0); err != nil {
		t.Fatal(err)
	}
	progress := awsio.NewProgressTable(e.Clients.Dynamo, e.Config.Table)
	intent := contract.ReleaseIntentID(contract.CollectionReleaseIntent, "c1", 1)
	recorded := func() bool {
		t.Helper()
		in, err := e.CCS.Intents(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range in {
			if r.IntentID == intent {
				return true
			}
		}
		return false
	}
	// Clean until the cursor closes; the completion dead-letters.
	lost := 0
	for pass := 0; pass < 6 && lost == 0; pass++ {
		e.clk.Advance(time.Hour)
		e.watermark(e.clk.Now())
		e.reconcile()
		e.deliverAll(resources.QueueGC, resources.FnGC)
		lost = e.deadLetter(resources.QueueHandoff)
	}
	p, err := progress.LoadProgress(e.ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if lost != 1 || p.Phase != gc.PhaseDone {
		t.Fatalf("cleanup: %d completions dead-lettered, cursor phase %q; want 1 and done", lost, p.Phase)
	}
	if left := e.keysUnderPrefix(contract.CollectionPrefix("c1")); len(left) > 0 {
		t.Fatalf("keys of the dropped incarnation left after its cleanup: %v", left)
	}
	// Within the delivery bound the cursor is trusted: nothing again.
	e.clk.Advance(time.Minute)
	e.reconcile()
	if n := e.deliverAll(resources.QueueGC, resources.FnGC); n != 0 || recorded() {
		t.Fatalf("inside the completion's delivery bound: %d cleanup batches ran, intent recorded %v; want none", n, recorded())
	}
	// Past it, CCS's facts say the release is still owed: asked again.
	for pass := 0; pass < 2 && !recorded(); pass++ {
		e.clk.Advance(e.Config.Policy.ReleaseReaskAfter() + time.Minute)
		e.watermark(e.clk.Now())
		e.reconcile()
		e.deliverAll(resources.QueueGC, resources.FnGC)
		e.deliverAll(resources.QueueHandoff, resources.FnHandoff)
	}
	if !recorded() {
		f, _ := e.CCS.Facts(e.ctx, "c1")
		t.Fatalf("the lost release completion was never asked for again: CCS facts %+v", f)
	}
	f, err := e.CCS.Facts(e.ctx, "c1")
	if err != nil || !f.ReleaseIntentRecorded {
		t.Fatalf("CCS facts after the release: %+v %v", f, err)
	}
	if n := cxMetric(e.Env, "ReleasesOwedAgain"); n < 1 {
		t.Fatalf("ReleasesOwedAgain %v: the release was not derived again by reconciliation", n)
	}
	// Released: nothing is scheduled for the incarnation any more.
	e.clk.Advance(e.Config.Policy.ReleaseReaskAfter() + time.Minute)
	e.reconcile()
	if n := e.deliverAll(resources.QueueGC, resources.FnGC); n != 0 {
		t.Fatalf("%d cleanup batches after the release", n)
	}
}

// keysUnderPrefix lists every key under prefix.
func (e *gcEnv) keysUnderPrefix(prefix string) []string {
	e.t.Helper()
	ls, err := e.Bucket.List(e.ctx, prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.Key)
	}
	return out
}
