package awsio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/store"
)

// ProgressTable keeps tombstone cleanup cursors in the coordinator table:
// pk "COLL#<collection>[#i<N>]" (the lifetime's partition, see lifetimePK),
// sk "TOMBSTONE". Every write is conditional on the sequence number read.
type ProgressTable struct {
	api   DynamoAPI
	table string
}

// NewProgressTable adapts api to table.
func NewProgressTable(api DynamoAPI, table string) *ProgressTable {
	return &ProgressTable{api: api, table: table}
}

func progressKey(collection string, incarnation uint64) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": str(lifetimePK(collection, incarnation)), "sk": str("TOMBSTONE")}
}

// LoadProgress reads the cursor (Seq 0 when none).
func (t *ProgressTable) LoadProgress(ctx context.Context, collection string, incarnation uint64) (gc.TombstoneProgress, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: progressKey(collection, incarnation), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return gc.TombstoneProgress{}, translate("get tombstone progress of", collection, err, false)
	}
	return decodeProgress(collection, out.Item)
}

func decodeProgress(collection string, item map[string]ddb.AttributeValue) (gc.TombstoneProgress, error) {
	var p gc.TombstoneProgress
	doc := getS(item, "doc")
	if doc == "" {
		return p, nil
	}
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return p, fmt.Errorf("tombstone progress of %s is unreadable: %w", collection, err)
	}
	return p, nil
}

// SaveProgress writes p over Seq-1. A failed condition whose stored item is
// exactly p (same Seq and Run: our own write, applied and retried by the
// SDK) counts as written.
func (t *ProgressTable) SaveProgress(ctx context.Context, p gc.TombstoneProgress) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	item := progressKey(p.Collection, p.Incarnation)
	item["doc"], item["seq"], item["phase"] = str(string(body)), unum(p.Seq), str(p.Phase)
	in := &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: item,
		ReturnValuesOnConditionCheckFailure: ddb.ReturnValuesOnConditionCheckFailureAllOld}
	if p.Seq <= 1 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = aws.String("seq = :prev")
		in.ExpressionAttributeValues = map[string]ddb.AttributeValue{":prev": unum(p.Seq - 1)}
	}
	_, err = t.api.PutItem(ctx, in)
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if got, derr := decodeProgress(p.Collection, ccf.Item); derr == nil && got.Seq == p.Seq && got.Run == p.Run {
			return nil
		}
		return fmt.Errorf("save tombstone progress of %s incarnation %d at seq %d: %w", p.Collection, p.Incarnation, p.Seq, store.ErrConditionFailed)
	}
	return translate("save tombstone progress of", p.Collection, err, true)
}

// CleanupDone reports whether the incarnation's cleanup handed its
// completion to the release workflow under facts version factsVersion.
func (t *ProgressTable) CleanupDone(ctx context.Context, collection string, incarnation, factsVersion uint64) (bool, error) {
	p, err := t.LoadProgress(ctx, collection, incarnation)
	return p.Phase == gc.PhaseDone && p.DoneFactsVersion == factsVersion, err
}
