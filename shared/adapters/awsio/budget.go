package awsio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/store"
)

// tokenBucketAttempts bounds the read-and-swap rounds of one TakeTokens
// when other instances keep winning; after them the caller waits as long
// as its tokens take to refill.
const tokenBucketAttempts = 8

// TokenBucket is a token bucket shared by every instance of a function,
// kept in one item of the coordinator's table: pk "BUDGET#<name>", sk
// "BUDGET", attributes tokens, last_ms, ver and taker. A take reads the
// item (consistent), refills it for the time passed (never backwards: a
// caller whose clock is behind the last taker's adds nothing), and writes
// the remainder with a condition on ver, so two instances never spend the
// same tokens. A write refused because the SDK retried our own applied
// write (the refusal returns our taker token) is our take. Losing the item
// (a wiped table) restores one full burst: a budget, not a safety fence.
type TokenBucket struct {
	api    DynamoAPI
	table  string
	name   string
	rate   float64 // tokens per second
	burst  float64
	holder string
	seq    atomic.Uint64
}

// NewTokenBucket returns the bucket name in table, refilled at rate tokens
// per second up to burst; holder names this instance in its takes.
func NewTokenBucket(api DynamoAPI, table, name string, rate, burst float64, holder string) *TokenBucket {
	return &TokenBucket{api: api, table: table, name: name, rate: rate, burst: max(burst, 1), holder: holder}
}

// TakeTokens takes n tokens (at most one burst) at now and returns 0, or
// takes none and returns how long until n should be there.
func (b *TokenBucket) TakeTokens(ctx context.Context, n float64, now time.Time) (time.Duration, error) {
	if b.rate <= 0 {
		return 0, nil
	}
	n = min(n, b.burst)
	key := map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "BUDGET#" + b.name}, "sk": &ddb.AttributeValueMemberS{Value: "BUDGET"}}
	what := "budget " + b.name
	for range tokenBucketAttempts {
		out, err := b.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(b.table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return 0, translate("read", what, err, false)
		}
		tokens, last, ver := b.burst, int64(0), int64(0)
		exists := len(out.Item) > 0
		if exists {
			if tokens, err = numAttr(out.Item, "tokens"); err == nil {
				var l, v float64
				l, err = numAttr(out.Item, "last_ms")
				if err == nil {
					v, err = numAttr(out.Item, "ver")
				}
				last, ver = int64(l), int64(v)
			}
			if err != nil {
				return 0, fmt.Errorf("read %s: %w", what, err)
			}
		}
		nowMs := now.UnixMilli()
		if exists && nowMs > last {
			tokens = min(b.burst, tokens+float64(nowMs-last)/1000*b.rate)
		}
		if tokens < n {
			return time.Duration((n - tokens) / b.rate * float64(time.Second)), nil
		}
		token := b.holder + "/" + strconv.FormatUint(b.seq.Add(1), 10)
		in := &dynamodb.UpdateItemInput{
			TableName: aws.String(b.table), Key: key,
			UpdateExpression: aws.String("SET tokens = :t, last_ms = :l, ver = :nv, taker = :tk"),
			ExpressionAttributeValues: map[string]ddb.AttributeValue{
				":t":  &ddb.AttributeValueMemberN{Value: strconv.FormatFloat(tokens-n, 'f', -1, 64)},
				":l":  &ddb.AttributeValueMemberN{Value: strconv.FormatInt(max(last, nowMs), 10)},
				":nv": &ddb.AttributeValueMemberN{Value: strconv.FormatInt(ver+1, 10)},
				":tk": &ddb.AttributeValueMemberS{Value: token},
			},
			ReturnValuesOnConditionCheckFailure: ddb.ReturnValuesOnConditionCheckFailureAllOld,
		}
		if exists {
			in.ConditionExpression = aws.String("ver = :v")
			in.ExpressionAttributeValues[":v"] = &ddb.AttributeValueMemberN{Value: strconv.FormatInt(ver, 10)}
		} else {
			in.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		_, err = b.api.UpdateItem(ctx, in)
		if err == nil {
			return 0, nil
		}
		var ccf *ddb.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if tk, ok := ccf.Item["taker"].(*ddb.AttributeValueMemberS); ok && tk.Value == token {
				return 0, nil // our own write, applied, then retried by the SDK
			}
			continue // another instance took tokens first: read again
		}
		if err := translate("take from", what, err, true); !errors.Is(err, store.ErrConditionFailed) {
			return 0, err
		}
	}
	return time.Duration(n / b.rate * float64(time.Second)), nil
}

func numAttr(item map[string]ddb.AttributeValue, name string) (float64, error) {
	v, ok := item[name].(*ddb.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s missing or not a number", name)
	}
	return strconv.ParseFloat(v.Value, 64)
}
