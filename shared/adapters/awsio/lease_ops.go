package awsio

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/store"
)

// DynamoScanAPI is the one DynamoDB call listing leases needs (operator
// commands only: no function scans the table).
type DynamoScanAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// ListLeases lists every lease record of the table (of collection only,
// when collection is not empty) with consistent Scan pages: read-only.
func ListLeases(ctx context.Context, api DynamoScanAPI, table, collection string) ([]lease.State, error) {
	in := &dynamodb.ScanInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(#pk, :p) AND #sk = :s"),
		ExpressionAttributeNames:  map[string]string{"#pk": "pk", "#sk": "sk"},
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":p": str("TASK#"), ":s": str("LEASE")},
	}
	if collection != "" {
		in.FilterExpression = aws.String(*in.FilterExpression + " AND #c = :c")
		in.ExpressionAttributeNames["#c"], in.ExpressionAttributeValues[":c"] = "collection", str(collection)
	}
	var out []lease.State
	for {
		page, err := api.Scan(ctx, in)
		if err != nil {
			return out, translate("list leases", table, err, false)
		}
		for _, it := range page.Items {
			out = append(out, decodeLease(strings.TrimPrefix(getS(it, "pk"), "TASK#"), it))
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Release revokes the lease l exactly as planned: one conditional
// UpdateItem that bumps the epoch (the holder's next heartbeat or
// completion fails with ErrLost, so it stops without reporting), names
// `by` as holder and expires it at nowMs (the next delivery takes the
// task). It is refused with store.ErrConditionFailed, and the record as it
// is now, when the stored epoch, holder or expiry is no longer l's (a
// heartbeat, a completion or another holder moved it since the plan) or
// the task is done. A refusal by this very release (applied, its answer
// lost, retried by the SDK) is recognised as success (lease.OwnRelease).
func (t *LeaseTable) Release(ctx context.Context, l contract.Lease, by string, nowMs int64) (lease.State, error) {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: leaseKey(l.TaskID),
		UpdateExpression:    aws.String("SET #ep = #ep + :one, #h = :by, #x = :now, #aa = :now"),
		ConditionExpression: aws.String("#ep = :ep AND #h = :h AND #x = :x AND #d = :false"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{
			":one": num(1), ":by": str(by), ":now": num(nowMs), ":ep": unum(l.LeaseEpoch), ":h": str(l.Holder),
			":x": num(l.LeaseExpiryUnixMs), ":false": boolean(false),
		},
		ReturnValues:                        ddb.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: ddb.ReturnValuesOnConditionCheckFailureAllOld,
	}
	in.ExpressionAttributeNames = leaseNames(in.UpdateExpression, in.ConditionExpression)
	out, err := t.api.UpdateItem(ctx, in)
	if err != nil {
		var ccf *ddb.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			cur := decodeLease(l.TaskID, ccf.Item)
			if lease.OwnRelease(cur, l, by, nowMs) {
				return cur, nil // our own release, applied and retried by the SDK
			}
			return cur, fmt.Errorf("release lease %s epoch %d: %w", l.TaskID, l.LeaseEpoch, store.ErrConditionFailed)
		}
		return lease.State{}, translate("release lease", l.TaskID, err, true)
	}
	return decodeLease(l.TaskID, out.Attributes), nil
}
