package awsio

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/contract"
)

// The coordinator's memory of a collection's lineage (package gc's Memory
// port), in the same disposable table: the highest head version the
// observer recorded (the observed-state item) and an operator's lineage
// confirmation (pk "COLL#<collection>", sk "LINEAGE", the document as
// JSON under "doc"). Losing either fails closed: GC then refuses a head
// regression on the evidence of the roots above the head alone.

func lineageKey(collection string) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": str("COLL#" + collection), "sk": str("LINEAGE")}
}

// HighestObserved is the version and checksum of the observed-state item
// (the observer only ever moves it forward).
func (t *ObservedTable) HighestObserved(ctx context.Context, collection string, incarnation uint64) (uint64, string, error) {
	st, err := t.Get(ctx, collection, incarnation)
	return st.Version, st.Checksum, err
}

// LineageConfirmation reads the operator's confirmation, strictly decoded.
func (t *ObservedTable) LineageConfirmation(ctx context.Context, collection string) (contract.LineageConfirmation, bool, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: lineageKey(collection), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return contract.LineageConfirmation{}, false, translate("get lineage confirmation of", collection, err, false)
	}
	doc := getS(out.Item, "doc")
	if doc == "" {
		return contract.LineageConfirmation{}, false, nil
	}
	c, err := contract.DecodeLineageConfirmation("lineage confirmation of "+collection, []byte(doc))
	return c, err == nil, err
}

// ConfirmLineage records an operator's confirmation of a head regression
// and forgets an observed state recorded above the new head (or at its
// version with other content), so that the observer schedules the new
// lineage again.
func (t *ObservedTable) ConfirmLineage(ctx context.Context, c contract.LineageConfirmation) error {
	body, err := contract.Encode(c)
	if err != nil {
		return err
	}
	item := lineageKey(c.Collection)
	item["doc"] = str(string(body))
	item["expires_at"] = num(time.UnixMilli(c.ConfirmedAtUnixMs).Add(stateTTL).Unix())
	if _, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: item}); err != nil {
		return translate("record lineage confirmation of", c.Collection, err, true)
	}
	_, err = t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(t.table), Key: observedKey(c.Collection, 1),
		ConditionExpression: aws.String("#v > :v OR (#v = :v AND checksum <> :c)"), ExpressionAttributeNames: map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":v": unum(c.HeadVersion), ":c": str(c.HeadChecksum)}})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // nothing recorded above the confirmed head
	}
	return translate("forget observed state of", c.Collection, err, true)
}
