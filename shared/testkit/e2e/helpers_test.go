package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
)

// start brings the product up for one test and tears it down after.
func start(t *testing.T, opts localenv.Options) *localenv.Env {
	t.Helper()
	if opts.Log == nil && os.Getenv("BCC_TEST_LOG") != "" {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	env, err := launch(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// mergePolicy returns the default policy with a low merge factor so a few
// appends make compaction due.
func mergePolicy(mergeFactor int) *policy.Policy {
	p := policy.Default()
	p.Compaction.MergeFactor = mergeFactor
	p.Compaction.StartQuiet = 0 // rewrites start at once (tests of the wait set it)
	return &p
}

// queueDepth returns visible + in-flight messages of a queue class.
func queueDepth(t testing.TB, env *localenv.Env, class string) int {
	t.Helper()
	return depth(t, env, env.Prov.QueueURLs[class])
}

// dlqDepth returns visible + in-flight messages of a class's DLQ.
func dlqDepth(t testing.TB, env *localenv.Env, class string) int {
	t.Helper()
	return depth(t, env, env.Prov.DLQURLs[class])
}

func depth(t testing.TB, env *localenv.Env, url string) int {
	t.Helper()
	out, err := env.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
		var v int
		for _, c := range out.Attributes[k] {
			v = v*10 + int(c-'0')
		}
		n += v
	}
	return n
}

func settle(t *testing.T, env *localenv.Env) {
	t.Helper()
	if err := env.Settle(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
}
