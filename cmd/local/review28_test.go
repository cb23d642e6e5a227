package main

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/resources"
)

// Review of issue 28: make local runs "as deployed, N times faster", and
// keeps every function's timeout (and lease) as deployed. A queue's
// visibility timeout must then stay at least its consumer's timeout: a
// message whose invocation is still running must not be handed to another
// one (Lambda refuses an SQS event source mapping whose queue's visibility
// timeout is below the function's timeout; deployed it is 6x). Scaled by 30
// the reconcile queue gets 6 s against the observer's 30 s, compaction and
// GC 60 s against 300 s (and a 2 min lease), handoff 12 s against 60 s: a
// compaction running over a minute is received again by a second
// invocation while the first still holds its lease, each receive counts
// toward maxReceiveCount, and the task ends in the DLQ while it runs.
func TestLocalVisibilityTimeoutsCoverTheFunctionTimeouts(t *testing.T) {
	for _, scale := range []string{"30", "600"} {
		t.Run("time-scale="+scale, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			env, err := start(ctx, []string{"-addr", "127.0.0.1:0", "-time-scale", scale, "-dashboard", ""}, &bytes.Buffer{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			def := env.Prov.Def
			for _, q := range def.Queues {
				fn, _ := def.Function(q.Consumer)
				out, err := env.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
					QueueUrl: aws.String(env.Prov.QueueURLs[q.Class]), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout}})
				if err != nil {
					t.Fatal(err)
				}
				s, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
				vis := time.Duration(s) * time.Second
				if vis < fn.Timeout {
					t.Errorf("queue %s: visibility timeout %s < %s's timeout %s (deployed %s)", q.Class, vis, fn.Name, fn.Timeout, q.VisibilityTimeout)
				}
				// policy validation's own relation (lease_duration_ms): a
				// redelivered task must find a crashed holder's lease expired.
				if lease := env.Config.Policy.LeaseDuration.D(); q.Class == resources.QueueCompaction && vis < lease {
					t.Errorf("queue %s: visibility timeout %s < lease_duration_ms %s (policy validation requires lease <= this queue's visibility)", q.Class, vis, lease)
				}
			}
		})
	}
}
