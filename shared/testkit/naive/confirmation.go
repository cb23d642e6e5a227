package naive

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// NameKeyedConfirmations keeps an operator's lineage confirmation the way
// the coordinator did before confirmations named an incarnation (the
// behaviour guard.LineageIncarnation exists against): one record per
// collection name, whatever lifetime it was recorded for and whatever
// lifetime asks, and recording one forgets the first lifetime's observed
// state. It satisfies gc.Memory (HighestObserved is the shipped table's).
type NameKeyedConfirmations struct {
	*awsio.ObservedTable
	api   awsio.DynamoAPI
	table string
}

// NewNameKeyedConfirmations returns the naive store over api's table.
func NewNameKeyedConfirmations(api awsio.DynamoAPI, table string) *NameKeyedConfirmations {
	return &NameKeyedConfirmations{ObservedTable: awsio.NewObservedTable(api, table), api: api, table: table}
}

func nameKey(c string) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: resources.OperatorKeyPrefix + "COLL#" + c}, "sk": &ddb.AttributeValueMemberS{Value: "LINEAGE"}}
}

// LineageConfirmation returns the name's record, for any incarnation.
func (n *NameKeyedConfirmations) LineageConfirmation(ctx context.Context, c string, _ uint64) (contract.LineageConfirmation, bool, error) {
	out, err := n.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(n.table), Key: nameKey(c), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return contract.LineageConfirmation{}, false, err
	}
	doc, _ := out.Item["doc"].(*ddb.AttributeValueMemberS)
	if doc == nil {
		return contract.LineageConfirmation{}, false, nil
	}
	conf, err := contract.DecodeLineageConfirmation("lineage confirmation of "+c, []byte(doc.Value))
	return conf, err == nil, err
}

// ConfirmLineage overwrites the name's record and forgets the first
// lifetime's observed state above the confirmed head.
func (n *NameKeyedConfirmations) ConfirmLineage(ctx context.Context, conf contract.LineageConfirmation) error {
	body, err := contract.Encode(conf)
	if err != nil {
		return err
	}
	item := nameKey(conf.Collection)
	item["doc"] = &ddb.AttributeValueMemberS{Value: string(body)}
	if _, err := n.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(n.table), Item: item}); err != nil {
		return fmt.Errorf("record lineage confirmation of %s: %w", conf.Collection, err)
	}
	_, err = n.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(n.table),
		Key:                       map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "COLL#" + conf.Collection}, "sk": &ddb.AttributeValueMemberS{Value: "OBSERVED"}},
		ConditionExpression:       aws.String("#v > :v OR (#v = :v AND checksum <> :c)"),
		ExpressionAttributeNames:  map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":v": &ddb.AttributeValueMemberN{Value: strconv.FormatUint(conf.HeadVersion, 10)}, ":c": &ddb.AttributeValueMemberS{Value: conf.HeadChecksum}}})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return err
}
