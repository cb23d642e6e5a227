package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/resources"
)

// Rule 9: a collection whose compaction message keeps failing (a poison
// message in its FIFO group) does not hold back another collection: that
// one's commits are observed, compacted and cut over while the poison
// message is retried and finally moved to the DLQ, and nothing is published
// or deleted because of it.
func TestOneCollectionsBacklogDoesNotBlockAnother(t *testing.T) {
	// 5 receives x 4 s: the poison stays in its group for about 20 s.
	env := start(t, localenv.Options{Policy: mergePolicy(3), VisibilityTimeout: 4 * time.Second})
	ctx := context.Background()
	for _, c := range []string{"stuck", "flowing"} {
		if err := env.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
	}
	poison := `{"schema_version":1,"task_id":"x","task_kind":"compaction","collection":"stuck","surprise":true}`
	if _, err := env.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Prov.QueueURLs[resources.QueueCompaction]),
		MessageBody: aws.String(poison), MessageGroupId: aws.String("stuck"), MessageDeduplicationId: aws.String("poison")}); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := env.Workload.Append(ctx, "flowing", env.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	// The flowing collection gets its cutover while the stuck group is still
	// retrying its poison message: the order of the two events is the
	// claim, not how long either takes (on moto, on a loaded machine, both
	// are slower). The head is read before the DLQ, so a cutover seen with
	// an empty DLQ happened while the poison was still in its group.
	deadline := time.Now().Add(2 * time.Minute) // only a hang guard
	for {
		_, root, err := env.Lineage.HeadRoot(ctx, "flowing")
		if err != nil {
			t.Fatal(err)
		}
		dead := dlqDepth(t, env, resources.QueueCompaction) > 0
		if root.Origin.Kind == contract.OriginCutover && !dead {
			break
		}
		if dead || time.Now().After(deadline) {
			t.Fatalf("flowing collection not compacted while another group was stuck (head v%d, %s; poison dead-lettered: %v)",
				root.Version, root.Origin.Kind, dead)
		}
		time.Sleep(50 * time.Millisecond)
	}
	settle(t, env)
	got, _, err := workload.Read(ctx, env.Lineage, env.Bucket, "flowing")
	if err != nil {
		t.Fatal(err)
	}
	if d := workload.Diff(env.Workload.Expected("flowing"), got); len(d) > 0 {
		t.Fatalf("flowing collection lost writes: %v", d[:min(5, len(d))])
	}
	out, err := env.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.Prov.DLQURLs[resources.QueueCompaction]), WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != poison {
		t.Fatalf("poison message not in the DLQ intact: %v %+v", err, out)
	}
}
