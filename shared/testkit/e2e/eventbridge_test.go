package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
)

// A bucket whose owner already notifies its own function for the head keys
// cannot also notify the observer (S3 refuses overlapping configurations).
// In EventBridge mode (-c headEvents=eventbridge) the bucket sends its
// events to EventBridge instead, keeping the owner's configuration, and a
// rule with an exact head-key filter invokes the observer: compaction runs
// end to end and the owner's function still gets its events.
func TestHeadEventsThroughEventBridgeNextToAConflictingNotification(t *testing.T) {
	env := cxStart(t, localenv.Options{HeadEvents: resources.HeadEventsEventBridge})
	ctx := context.Background()
	var ownerEvents atomic.Int32
	env.Stack.RegisterFunction("owner-indexer", func(context.Context, json.RawMessage) error { ownerEvents.Add(1); return nil }, time.Minute)
	bucket := aws.String(env.Prov.Def.Bucket.Name)
	cur, err := env.Clients.S3.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	if cur.EventBridgeConfiguration == nil {
		t.Fatal("EventBridge mode did not switch the bucket's EventBridge delivery on")
	}
	owner := s3types.LambdaFunctionConfiguration{Id: aws.String("owner-indexer"), LambdaFunctionArn: aws.String(localaws.FunctionARN("owner-indexer")),
		Events: []s3types.Event{"s3:ObjectCreated:*"},
		Filter: &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{
			{Name: s3types.FilterRuleNamePrefix, Value: aws.String("collections/")}}}}}
	if _, err := env.Clients.S3.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: bucket,
		NotificationConfiguration: &s3types.NotificationConfiguration{EventBridgeConfiguration: cur.EventBridgeConfiguration,
			LambdaFunctionConfigurations: append(cur.LambdaFunctionConfigurations, owner)}}); err != nil {
		t.Fatal(err)
	}
	provision := func(mode string) error {
		_, err := localaws.Provision(ctx, env.Stack.Clients(), env.Prov.Def, localaws.ProvisionOptions{VisibilityTimeout: 2 * time.Second, HeadEvents: mode})
		return err
	}
	if err := provision(resources.HeadEventsNotification); err == nil || !strings.Contains(err.Error(), "Configurations overlap") {
		t.Fatalf("notification mode next to the owner's configuration: %v, want S3's overlap refusal", err)
	}
	if err := provision(resources.HeadEventsEventBridge); err != nil {
		t.Fatalf("EventBridge mode next to the owner's configuration: %v", err)
	}
	cxSetup(t, env, "c1", 4)
	cxAppend(t, env, "c1", 4)
	cxSettle(t, env)
	if n := len(cxCutovers(cxLineage(t, env, "c1"))); n == 0 {
		t.Fatal("no compaction cutover: heads did not reach the observer through EventBridge")
	}
	// Events for heads written close together may be coalesced (the observer
	// re-reads the head, so a later event can observe what an earlier one
	// pointed at): the proof of delivery is that the observer reached the
	// final head, not a count of observations.
	final, err := env.Lineage.Head(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	observed, sum, err := awsio.NewObservedTable(env.Clients.Dynamo, env.Config.Table).HighestObserved(ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if observed != final.Version || sum != final.ManifestChecksum {
		t.Fatalf("observed v%d (%s), head v%d (%s): the last head did not reach the observer through EventBridge", observed, sum, final.Version, final.ManifestChecksum)
	}
	if cxMetric(env, "HeadsObserved") == 0 {
		t.Fatal("HeadsObserved 0: no head reached the observer")
	}
	if ownerEvents.Load() == 0 {
		t.Fatal("the owner's own notification stopped")
	}
	cxVerify(t, env, "c1")
}
