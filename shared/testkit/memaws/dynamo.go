package memaws

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	minidyn "github.com/truora/minidyn/aws-v2/client"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
)

// Dynamo is in-memory Amazon DynamoDB (the method set of awsio.DynamoAPI,
// plus CreateTable, DescribeTable, Query and Scan): minidyn's in-process
// client evaluates conditions and update expressions; this layer adds
// faults, hooks and DynamoDB's answers where minidyn's differ.
type Dynamo struct {
	Hooks
	mu   sync.Mutex // serialises calls, so a change's old and new item are exact
	c    *minidyn.Client
	keys map[string][]string // table -> key attribute names
}

// NewDynamo returns DynamoDB without tables.
func NewDynamo() *Dynamo {
	return &Dynamo{c: minidyn.NewClient(), keys: map[string][]string{}}
}

func (d *Dynamo) call(op, table string, key map[string]ddbtypes.AttributeValue, write bool) Call {
	return Call{Service: "DynamoDB", Op: op, Resource: table, Key: keyString(key, d.keyNames(table)), Write: write}
}

func (d *Dynamo) keyNames(table string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.keys[table]
}

// keyString renders an item's key as "pk/sk".
func keyString(item map[string]ddbtypes.AttributeValue, names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += "/"
		}
		switch v := item[n].(type) {
		case *ddbtypes.AttributeValueMemberS:
			s += v.Value
		case *ddbtypes.AttributeValueMemberN:
			s += v.Value
		}
	}
	return s
}

func keyOf(item map[string]ddbtypes.AttributeValue, names []string) map[string]ddbtypes.AttributeValue {
	k := map[string]ddbtypes.AttributeValue{}
	for _, n := range names {
		if v, ok := item[n]; ok {
			k[n] = v
		}
	}
	return k
}

// wrap gives minidyn's error the SDK's shape (an OperationError around an
// HTTP 400 response error).
func wrap(c Call, err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return apiError(c, 400, api)
	}
	return err
}

// CreateTable creates a table.
func (d *Dynamo) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	c := Call{Service: "DynamoDB", Op: "CreateTable", Resource: aws.ToString(in.TableName), Write: true}
	d.mu.Lock()
	defer d.mu.Unlock()
	out, err := d.c.CreateTable(ctx, in)
	if err != nil {
		return nil, wrap(c, err)
	}
	var names []string
	for _, kt := range []ddbtypes.KeyType{ddbtypes.KeyTypeHash, ddbtypes.KeyTypeRange} {
		for _, k := range in.KeySchema {
			if k.KeyType == kt {
				names = append(names, aws.ToString(k.AttributeName))
			}
		}
	}
	d.keys[c.Resource] = names
	if out.TableDescription != nil {
		out.TableDescription.TableStatus = ddbtypes.TableStatusActive
	}
	return out, nil
}

// DescribeTable describes a table (always ACTIVE).
func (d *Dynamo) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	c := Call{Service: "DynamoDB", Op: "DescribeTable", Resource: aws.ToString(in.TableName)}
	d.mu.Lock()
	defer d.mu.Unlock()
	out, err := d.c.DescribeTable(ctx, in)
	if err == nil && out.Table != nil {
		out.Table.TableStatus = ddbtypes.TableStatusActive
	}
	return out, wrap(c, err)
}

// getLocked reads an item (nil when absent). d.mu is held.
func (d *Dynamo) getLocked(table string, key map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
	out, err := d.c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
	if err != nil || len(out.Item) == 0 {
		return nil
	}
	return out.Item
}

// GetItem reads an item (every read is strongly consistent).
func (d *Dynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c := d.call("GetItem", aws.ToString(in.TableName), in.Key, false)
	return read(&d.Hooks, &d.mu, c, func() (*dynamodb.GetItemOutput, error) {
		out, err := d.c.GetItem(ctx, in)
		if err != nil {
			return nil, wrap(c, err)
		}
		if len(out.Item) == 0 {
			out.Item = nil
		}
		return out, nil
	})
}

// dynamoWrite runs one item write: old and new item around do, the change
// reported when the write succeeded.
func (d *Dynamo) dynamoWrite(c Call, key map[string]ddbtypes.AttributeValue, values map[string]ddbtypes.AttributeValue,
	do func(old map[string]ddbtypes.AttributeValue) (any, error)) (any, error) {
	return write(&d.Hooks, &d.mu, c, func() (any, []Change, error) {
		old := d.getLocked(c.Resource, key)
		out, err := do(old)
		if err != nil {
			return nil, nil, wrap(c, err)
		}
		return out, []Change{{Call: c, Old: old, New: d.getLocked(c.Resource, key), Values: values}}, nil
	})
}

// withOldItem gives a failed condition's error the old item when asked for
// (and no item when there is none, as DynamoDB answers).
func withOldItem(err error, old map[string]ddbtypes.AttributeValue, rv ddbtypes.ReturnValuesOnConditionCheckFailure) error {
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return err
	}
	ccf.Item = nil
	if rv == ddbtypes.ReturnValuesOnConditionCheckFailureAllOld && len(old) > 0 {
		ccf.Item = old
	}
	return err
}

// PutItem writes an item (conditionally with ConditionExpression).
func (d *Dynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	table := aws.ToString(in.TableName)
	key := keyOf(in.Item, d.keyNames(table))
	c := d.call("PutItem", table, key, true)
	out, err := d.dynamoWrite(c, key, in.ExpressionAttributeValues, func(old map[string]ddbtypes.AttributeValue) (any, error) {
		if _, err := d.c.PutItem(ctx, in); err != nil {
			return nil, withOldItem(err, old, in.ReturnValuesOnConditionCheckFailure)
		}
		res := &dynamodb.PutItemOutput{}
		if in.ReturnValues == ddbtypes.ReturnValueAllOld {
			res.Attributes = old
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.PutItemOutput), nil
}

// UpdateItem updates (or creates) an item with an update expression.
func (d *Dynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	table := aws.ToString(in.TableName)
	c := d.call("UpdateItem", table, in.Key, true)
	out, err := d.dynamoWrite(c, in.Key, in.ExpressionAttributeValues, func(old map[string]ddbtypes.AttributeValue) (any, error) {
		res, err := d.c.UpdateItem(ctx, in)
		if err != nil {
			return nil, withOldItem(err, old, in.ReturnValuesOnConditionCheckFailure)
		}
		if removed := localaws.RemovedAttributes(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames); len(removed) > 0 {
			// minidyn keeps an attribute its REMOVE deleted (see
			// localaws.RemovedAttributes); DynamoDB deletes it.
			if err := d.removeAttributes(ctx, table, in.Key, removed); err != nil {
				return nil, err
			}
			for _, a := range removed {
				delete(res.Attributes, a)
			}
		}
		if in.ReturnValues == "" || in.ReturnValues == ddbtypes.ReturnValueNone {
			res.Attributes = nil
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.UpdateItemOutput), nil
}

// removeAttributes deletes attrs from the item at key (d.mu is held).
func (d *Dynamo) removeAttributes(ctx context.Context, table string, key map[string]ddbtypes.AttributeValue, attrs []string) error {
	got, err := d.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	item := got.Item
	for _, a := range attrs {
		delete(item, a)
	}
	_, err = d.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
	return err
}

// DeleteItem deletes an item (conditionally with ConditionExpression); a
// missing item succeeds.
func (d *Dynamo) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	table := aws.ToString(in.TableName)
	c := d.call("DeleteItem", table, in.Key, true)
	out, err := d.dynamoWrite(c, in.Key, in.ExpressionAttributeValues, func(old map[string]ddbtypes.AttributeValue) (any, error) {
		res, err := d.c.DeleteItem(ctx, in)
		if err != nil {
			return nil, withOldItem(err, old, in.ReturnValuesOnConditionCheckFailure)
		}
		res.Attributes = nil
		if in.ReturnValues == ddbtypes.ReturnValueAllOld {
			res.Attributes = old
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.DeleteItemOutput), nil
}

// Query runs a query (no hooks: reads of the coordinator's adapters never query).
func (d *Dynamo) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c := Call{Service: "DynamoDB", Op: "Query", Resource: aws.ToString(in.TableName)}
	return read(&d.Hooks, &d.mu, c, func() (*dynamodb.QueryOutput, error) {
		out, err := d.c.Query(ctx, in)
		return out, wrap(c, err)
	})
}

// Scan scans a table.
func (d *Dynamo) Scan(ctx context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c := Call{Service: "DynamoDB", Op: "Scan", Resource: aws.ToString(in.TableName)}
	return read(&d.Hooks, &d.mu, c, func() (*dynamodb.ScanOutput, error) {
		out, err := d.c.Scan(ctx, in)
		return out, wrap(c, err)
	})
}

// Item reads an item without hooks or faults (nil when absent).
func (d *Dynamo) Item(table string, key map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.getLocked(table, key)
}

// Clear deletes every item of a table (no hooks, no faults): losing the
// coordinator's disposable state.
func (d *Dynamo) Clear(table string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return minidyn.ClearTable(d.c, table)
}
