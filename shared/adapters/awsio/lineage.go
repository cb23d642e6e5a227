package awsio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/contract"
)

// The coordinator's memory of a collection's lineage (package gc's Memory
// port), in the same disposable table: the highest head version the
// observer recorded (the observed-state item) and an operator's lineage
// confirmation (sk "LINEAGE" in the lifetime's partition, the document
// as JSON under "doc"). Losing either fails closed: GC then refuses a head
// regression on the evidence of the roots above the head alone.
//
// Both are per lifetime of the name (pk "COLL#<collection>" for the first,
// "COLL#<collection>#i<N>" after, as the observed state): a confirmation
// recorded for one incarnation is never read for another, and recording
// it forgets only its own incarnation's observed state
// (guard.LineageIncarnation).

func lineageKey(collection string, incarnation uint64) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": str(lifetimePK(collection, incarnation)), "sk": str("LINEAGE")}
}

// HighestObserved is the version and checksum of the observed-state item
// (the observer only ever moves it forward).
func (t *ObservedTable) HighestObserved(ctx context.Context, collection string, incarnation uint64) (uint64, string, error) {
	st, err := t.Get(ctx, collection, incarnation)
	return st.Version, st.Checksum, err
}

// LineageConfirmation reads the operator's confirmation for one lifetime
// of collection, strictly decoded. A record naming another incarnation
// than its key's is refused (corrupt: it must not answer this lifetime).
func (t *ObservedTable) LineageConfirmation(ctx context.Context, collection string, incarnation uint64) (contract.LineageConfirmation, bool, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: lineageKey(collection, incarnation), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return contract.LineageConfirmation{}, false, translate("get lineage confirmation of", collection, err, false)
	}
	doc := getS(out.Item, "doc")
	if doc == "" {
		return contract.LineageConfirmation{}, false, nil
	}
	c, err := contract.DecodeLineageConfirmation("lineage confirmation of "+collection, []byte(doc))
	if err == nil && c.Inc() != contract.Lifetime(incarnation) {
		err = fmt.Errorf("lineage confirmation of %s stored for incarnation %d names incarnation %d: %w", collection, contract.Lifetime(incarnation), c.Inc(), contract.ErrInvalid)
	}
	return c, err == nil, err
}

// ConfirmLineage records an operator's confirmation of a head regression
// for the incarnation it names and forgets that incarnation's observed
// state when it is recorded above the new head (or at its version with
// other content), so that the observer schedules the new lineage again.
// No other lifetime of the name is touched.
func (t *ObservedTable) ConfirmLineage(ctx context.Context, c contract.LineageConfirmation) error {
	body, err := contract.Encode(c)
	if err != nil {
		return err
	}
	item := lineageKey(c.Collection, c.Inc())
	item["doc"] = str(string(body))
	item["expires_at"] = num(time.UnixMilli(c.ConfirmedAtUnixMs).Add(stateTTL).Unix())
	if _, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: item}); err != nil {
		return translate("record lineage confirmation of", c.Collection, err, true)
	}
	_, err = t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(t.table), Key: observedKey(c.Collection, c.Inc()),
		ConditionExpression: aws.String("#v > :v OR (#v = :v AND checksum <> :c)"), ExpressionAttributeNames: map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":v": unum(c.HeadVersion), ":c": str(c.HeadChecksum)}})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // nothing recorded above the confirmed head
	}
	return translate("forget observed state of", c.Collection, err, true)
}
