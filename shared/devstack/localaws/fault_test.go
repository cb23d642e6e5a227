package localaws_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/store"
)

// An applied request whose answer is lost is retried by the real SDK
// retryer: a conditional write then fails its condition on its own first
// attempt, which the old image shows.
func TestApplyThenFailIsRetriedBySDK(t *testing.T) {
	for _, mode := range []localaws.FaultMode{localaws.ApplyThenFail, localaws.ApplyThenReset} {
		t.Run(mode.String(), func(t *testing.T) {
			s, c, p := startStack(t, false)
			ctx := context.Background()
			f := s.InjectFault(localaws.Fault{Service: "dynamodb", Operation: "UpdateItem", Mode: mode})
			before := s.Counter().Snapshot()
			_, err := c.Dynamo.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                           aws.String(p.Def.Table.Name),
				Key:                                 map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "x"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "y"}},
				UpdateExpression:                    aws.String("SET holder = :h"),
				ExpressionAttributeValues:           map[string]ddbtypes.AttributeValue{":h": &ddbtypes.AttributeValueMemberS{Value: "me"}},
				ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
				ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
			})
			var ccf *ddbtypes.ConditionalCheckFailedException
			if !errors.As(err, &ccf) {
				t.Fatalf("want the retry to fail its condition, got %v", err)
			}
			if h, ok := ccf.Item["holder"].(*ddbtypes.AttributeValueMemberS); !ok || h.Value != "me" {
				t.Fatalf("old image %v, want our own write", ccf.Item)
			}
			if f.Hits() != 1 || s.Counter().Since(before)["dynamodb:UpdateItem"] != 2 {
				t.Fatalf("hits %d, calls %v", f.Hits(), s.Counter().Since(before))
			}
		})
	}
	// S3: If-None-Match applied, answer lost, the retry answers 412.
	s, c, p := startStack(t, false)
	b := awsio.NewBucket(c.S3, p.Def.Bucket.Name)
	s.InjectFault(localaws.Fault{Service: "s3", Operation: "PutObject"})
	if _, err := b.PutIfAbsent(context.Background(), "k", []byte("v1")); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("retried If-None-Match: %v, want 412", err)
	}
	if got, err := b.Get(context.Background(), "k"); err != nil || string(got) != "v1" {
		t.Fatalf("object %q %v, want the applied write", got, err)
	}
	// FailBeforeApply: nothing written, the retry succeeds.
	s.InjectFault(localaws.Fault{Service: "s3", Operation: "PutObject", Mode: localaws.FailBeforeApply})
	if _, err := b.PutIfAbsent(context.Background(), "k2", []byte("v1")); err != nil {
		t.Fatalf("retried after a refusal: %v", err)
	}
}
