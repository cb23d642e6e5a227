package awsio

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/store"
)

// LeaseTable stores task leases in the coordinator table: pk
// "TASK#<task_id>", sk "LEASE", attributes epoch, holder, expiry (unix ms),
// done, acquired_at, the task's fence (kind, collection, base_version,
// base_checksum), the holder's heartbeat (heartbeat_at: its latest write;
// heartbeat_ms: its interval, absent when the holder records none) and
// expires_at (TTL, tidiness only). Every write is one
// UpdateItem with a ConditionExpression unless the caller asks for an
// unconditional write (the lease-condition mutation).
type LeaseTable struct {
	api   DynamoAPI
	table string
}

var _ lease.Store = (*LeaseTable)(nil)

// NewLeaseTable adapts api to table.
func NewLeaseTable(api DynamoAPI, table string) *LeaseTable {
	return &LeaseTable{api: api, table: table}
}

func leaseKey(taskID string) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": str("TASK#" + taskID), "sk": str("LEASE")}
}

// leaseNames names every attribute through a placeholder (several are
// DynamoDB reserved words).
func leaseNames(exprs ...*string) map[string]string {
	all := map[string]string{"#pk": "pk", "#ep": "epoch", "#h": "holder", "#x": "expiry", "#aa": "acquired_at", "#d": "done",
		"#k": "kind", "#c": "collection", "#bv": "base_version", "#bc": "base_checksum", "#ttl": "expires_at", "#ca": "completed_at",
		"#ha": "heartbeat_at", "#hi": "heartbeat_ms"}
	used := map[string]string{}
	for _, e := range exprs {
		for _, p := range placeholderRE.FindAllString(aws.ToString(e), -1) {
			used[p] = all[p]
		}
	}
	return used
}

var placeholderRE = regexp.MustCompile(`#[a-z]+`)

func leaseTTL(ms int64) ddb.AttributeValue {
	return num(time.UnixMilli(ms).Add(stateTTL).Unix())
}

// Acquire implements lease.Store.
func (t *LeaseTable) Acquire(ctx context.Context, l contract.Lease, nowMs int64, conditional bool) (contract.Lease, lease.State, error) {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: leaseKey(l.TaskID),
		UpdateExpression: aws.String("SET #ep = if_not_exists(#ep, :zero) + :one, #h = :h, #x = :e, #aa = :now, " +
			"#d = if_not_exists(#d, :false), #k = :k, #c = :c, #bv = :bv, #bc = :bc, #ttl = :ttl, #ha = :now"),

		ExpressionAttributeValues: map[string]ddb.AttributeValue{
			":zero": num(0), ":one": num(1), ":h": str(l.Holder), ":e": num(l.LeaseExpiryUnixMs), ":now": num(nowMs),
			":false": boolean(false), ":k": str(string(l.Kind)), ":c": str(l.Collection), ":bv": unum(l.BaseManifestVersion),
			":bc": str(l.BaseManifestChecksum), ":ttl": leaseTTL(l.LeaseExpiryUnixMs),
		},
		ReturnValues: ddb.ReturnValueAllNew,
	}
	// The heartbeat interval is this holder's: a previous holder's never
	// stays on the record.
	if l.HeartbeatMs > 0 {
		in.UpdateExpression = aws.String(aws.ToString(in.UpdateExpression) + ", #hi = :hi")
		in.ExpressionAttributeValues[":hi"] = num(l.HeartbeatMs)
	} else {
		in.UpdateExpression = aws.String(aws.ToString(in.UpdateExpression) + " REMOVE #hi")
	}
	if conditional {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk) OR (#d = :false AND #x <= :now)")
		in.ReturnValuesOnConditionCheckFailure = ddb.ReturnValuesOnConditionCheckFailureAllOld
	}
	in.ExpressionAttributeNames = leaseNames(in.UpdateExpression, in.ConditionExpression)
	out, err := t.api.UpdateItem(ctx, in)
	if err != nil {
		var ccf *ddb.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return contract.Lease{}, decodeLease(l.TaskID, ccf.Item), fmt.Errorf("acquire lease %s: %w", l.TaskID, store.ErrConditionFailed)
		}
		return contract.Lease{}, lease.State{}, translate("acquire lease", l.TaskID, err, true)
	}
	st := decodeLease(l.TaskID, out.Attributes)
	return st.Lease, lease.State{}, nil
}

// Extend implements lease.Store.
func (t *LeaseTable) Extend(ctx context.Context, taskID, holder string, epoch uint64, nowMs, expiryMs int64, conditional bool) error {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: leaseKey(taskID),
		UpdateExpression: aws.String("SET #x = :e, #ttl = :ttl, #ha = :now"),

		ExpressionAttributeValues: map[string]ddb.AttributeValue{":e": num(expiryMs), ":ttl": leaseTTL(expiryMs), ":now": num(nowMs)},
	}
	if conditional {
		in.ConditionExpression = aws.String("#ep = :ep AND #h = :h AND #d = :false")
		in.ExpressionAttributeValues[":ep"], in.ExpressionAttributeValues[":h"], in.ExpressionAttributeValues[":false"] = unum(epoch), str(holder), boolean(false)
	}
	in.ExpressionAttributeNames = leaseNames(in.UpdateExpression, in.ConditionExpression)
	_, err := t.api.UpdateItem(ctx, in)
	return translate("extend lease", taskID, err, true)
}

// Complete implements lease.Store.
func (t *LeaseTable) Complete(ctx context.Context, taskID, holder string, epoch uint64, nowMs int64, conditional bool) error {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: leaseKey(taskID),
		UpdateExpression: aws.String("SET #d = :true, #ca = :now, #ttl = :ttl"),

		ExpressionAttributeValues: map[string]ddb.AttributeValue{":true": boolean(true), ":now": num(nowMs), ":ttl": leaseTTL(nowMs)},
	}
	if conditional {
		in.ConditionExpression = aws.String("#ep = :ep AND #h = :h")
		in.ExpressionAttributeValues[":ep"], in.ExpressionAttributeValues[":h"] = unum(epoch), str(holder)
	}
	in.ExpressionAttributeNames = leaseNames(in.UpdateExpression, in.ConditionExpression)
	_, err := t.api.UpdateItem(ctx, in)
	return translate("complete lease", taskID, err, true)
}

// Get reads a lease record (found is false when there is none).
func (t *LeaseTable) Get(ctx context.Context, taskID string) (lease.State, bool, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: leaseKey(taskID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return lease.State{}, false, translate("get lease", taskID, err, false)
	}
	return decodeLease(taskID, out.Item), len(out.Item) > 0, nil
}

func decodeLease(taskID string, item map[string]ddb.AttributeValue) lease.State {
	if len(item) == 0 {
		return lease.State{}
	}
	return lease.State{
		Lease: contract.Lease{
			TaskID: taskID, Kind: contract.TaskKind(getS(item, "kind")), Collection: getS(item, "collection"),
			BaseManifestVersion: getU(item, "base_version"), BaseManifestChecksum: getS(item, "base_checksum"),
			LeaseEpoch: getU(item, "epoch"), LeaseExpiryUnixMs: getN(item, "expiry"), Holder: getS(item, "holder"),
			AcquiredAtUnixMs: getN(item, "acquired_at"), HeartbeatAtUnixMs: getN(item, "heartbeat_at"), HeartbeatMs: getN(item, "heartbeat_ms"),
		},
		Done: getB(item, "done"),
	}
}
