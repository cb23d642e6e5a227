package awsio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

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

// CleanupDoneAt is when the incarnation's cleanup handed its completion to
// the release workflow under facts version factsVersion (0: it did not).
func (t *ProgressTable) CleanupDoneAt(ctx context.Context, collection string, incarnation, factsVersion uint64) (int64, error) {
	p, err := t.LoadProgress(ctx, collection, incarnation)
	if err != nil || p.Phase != gc.PhaseDone || p.DoneFactsVersion != factsVersion {
		return 0, err
	}
	return max(p.DoneAtUnixMs, 1), nil
}

// sightingKey is the item recording when the coordinator first saw one
// tombstone of a lifetime in one CCS facts document (sk "SEEN#<CCS's
// tombstone time>#<facts version>"; "SEEN#<time>" for version 0), in the
// lifetime's partition beside its cleanup cursor.
func sightingKey(collection string, incarnation uint64, tombstonedAt int64, factsVersion uint64) map[string]ddb.AttributeValue {
	sk := fmt.Sprintf("SEEN#%d", tombstonedAt)
	if factsVersion > 0 {
		sk += fmt.Sprintf("#%d", factsVersion)
	}
	return map[string]ddb.AttributeValue{"pk": str(lifetimePK(collection, incarnation)), "sk": str(sk)}
}

// FirstSighting reads when the coordinator first saw the tombstone (ok
// false: no record).
func (t *ProgressTable) FirstSighting(ctx context.Context, collection string, incarnation uint64, tombstonedAt int64, factsVersion uint64) (int64, bool, error) {
	return t.firstSeen(ctx, collection, sightingKey(collection, incarnation, tombstonedAt, factsVersion))
}

func (t *ProgressTable) firstSeen(ctx context.Context, collection string, key map[string]ddb.AttributeValue) (int64, bool, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, false, translate("get sighting of", collection, err, false)
	}
	if len(out.Item) == 0 {
		return 0, false, nil
	}
	return getN(out.Item, "seen_ms"), true, nil
}

// confirmationSightingKey is the item recording when the coordinator first
// saw one lineage confirmation of a lifetime (sk "CONFSEEN#<id>").
func confirmationSightingKey(collection string, incarnation uint64, id string) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": str(lifetimePK(collection, incarnation)), "sk": str("CONFSEEN#" + id)}
}

// FirstConfirmationSighting reads when the coordinator first saw the
// lineage confirmation id (ok false: no record).
func (t *ProgressTable) FirstConfirmationSighting(ctx context.Context, collection string, incarnation uint64, id string) (int64, bool, error) {
	return t.firstSeen(ctx, collection, confirmationSightingKey(collection, incarnation, id))
}

// RecordConfirmationSighting records at as the first sighting of the
// lineage confirmation id unless one is recorded, and returns the one kept.
func (t *ProgressTable) RecordConfirmationSighting(ctx context.Context, collection string, incarnation uint64, id string, at int64) (int64, error) {
	return t.recordSeen(ctx, collection, confirmationSightingKey(collection, incarnation, id), at)
}

// RecordSighting records at as the first sighting unless one is recorded
// (a conditional put on absence: the first one stays, whoever wrote it, a
// retried write of our own included) and returns the one kept. A wiped
// table loses it: the next run records a later one (rule 1: a tombstone
// is then seen later, never earlier).
func (t *ProgressTable) RecordSighting(ctx context.Context, collection string, incarnation uint64, tombstonedAt int64, factsVersion uint64, at int64) (int64, error) {
	return t.recordSeen(ctx, collection, sightingKey(collection, incarnation, tombstonedAt, factsVersion), at)
}

func (t *ProgressTable) recordSeen(ctx context.Context, collection string, key map[string]ddb.AttributeValue, at int64) (int64, error) {
	item := maps.Clone(key)
	item["seen_ms"] = num(at)
	_, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: ddb.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *ddb.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf) && len(ccf.Item) > 0:
		return getN(ccf.Item, "seen_ms"), nil
	case errors.As(err, &ccf):
		seen, ok, err := t.firstSeen(ctx, collection, key)
		if err != nil || !ok {
			return at, err
		}
		return seen, nil
	case err != nil:
		return 0, translate("record sighting of", collection, err, true)
	}
	return at, nil
}
