package awsio

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// The coordinator's memory of a collection's lineage (package gc's Memory
// port), in the same disposable table: the highest head version the
// observer recorded (the observed-state item) and an operator's lineage
// confirmation (pk resources.OperatorKeyPrefix + the lifetime's partition,
// sk "LINEAGE", the document as JSON under "doc"). The operator prefix is
// what keeps confirmations out of every function role's reach: each is
// denied writes to those partition keys (dynamodb:LeadingKeys). Losing either fails closed: GC then refuses a head
// regression on the evidence of the roots above the head alone.
//
// Both are per lifetime of the name (pk "COLL#<collection>" for the first,
// "COLL#<collection>#i<N>" after, as the observed state): a confirmation
// recorded for one incarnation is never read for another, and recording
// it forgets only its own incarnation's observed state
// (guard.LineageIncarnation).

// maxPlainConfirmation: a confirmation document longer than this is
// stored gzip-compressed (attribute "docz"): one naming thousands of
// abandoned roots (contract.MaxAbandonedRoots) stays under DynamoDB's
// 400 KB item limit.
const maxPlainConfirmation = 64 << 10

// confirmationDoc is the stored confirmation document (nil: none).
func confirmationDoc(item map[string]ddb.AttributeValue) ([]byte, error) {
	if doc := getS(item, "doc"); doc != "" {
		return []byte(doc), nil
	}
	z, ok := item["docz"].(*ddb.AttributeValueMemberB)
	if !ok {
		return nil, nil
	}
	r, err := gzip.NewReader(bytes.NewReader(z.Value))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w: %w", err, contract.ErrInvalid)
	}
	b, err := io.ReadAll(io.LimitReader(r, maxConfirmationBytes+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w: %w", err, contract.ErrInvalid)
	}
	if len(b) > maxConfirmationBytes {
		return nil, fmt.Errorf("decompressed document larger than %d bytes: %w", maxConfirmationBytes, contract.ErrTooLarge)
	}
	return b, nil
}

// maxConfirmationBytes bounds a decompressed confirmation document.
const maxConfirmationBytes = 8 << 20

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func lineageKey(collection string, incarnation uint64) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": str(resources.OperatorKeyPrefix + lifetimePK(collection, incarnation)), "sk": str("LINEAGE")}
}

// HighestObserved is the version and checksum of the observed-state item
// (the observer only ever moves it forward).
func (t *ObservedTable) HighestObserved(ctx context.Context, collection string, incarnation uint64) (uint64, string, error) {
	st, err := t.Get(ctx, collection, incarnation)
	return st.Version, st.Checksum, err
}

// UnverifiedFrom is the recorded head the observer advanced from over a
// gap without checking that the new head descends from it (0: none; see
// observe/descent.go).
func (t *ObservedTable) UnverifiedFrom(ctx context.Context, collection string, incarnation uint64) (uint64, string, error) {
	st, err := t.Get(ctx, collection, incarnation)
	return st.UnverifiedFromVersion, st.UnverifiedFromChecksum, err
}

// ClearUnverified forgets the head an advance over a gap started from,
// once GC's walk of the lineage holds it (only while the record still
// keeps exactly that head).
func (t *ObservedTable) ClearUnverified(ctx context.Context, collection string, incarnation, version uint64, checksum string) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(t.table), Key: observedKey(collection, incarnation),
		UpdateExpression:          aws.String("REMOVE from_v, from_c"),
		ConditionExpression:       aws.String("from_v = :fv AND from_c = :fc"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":fv": unum(version), ":fc": str(checksum)}})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return translate("clear the unverified lineage of", collection, err, true)
}

// LineageConfirmation reads the operator's confirmation for one lifetime
// of collection, strictly decoded. A record naming another incarnation
// than its key's is refused (corrupt: it must not answer this lifetime).
func (t *ObservedTable) LineageConfirmation(ctx context.Context, collection string, incarnation uint64) (contract.LineageConfirmation, bool, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: lineageKey(collection, incarnation), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return contract.LineageConfirmation{}, false, translate("get lineage confirmation of", collection, err, false)
	}
	doc, err := confirmationDoc(out.Item)
	if err != nil {
		return contract.LineageConfirmation{}, false, fmt.Errorf("lineage confirmation of %s: %w", collection, err)
	}
	if doc == nil {
		return contract.LineageConfirmation{}, false, nil
	}
	c, err := contract.DecodeLineageConfirmation("lineage confirmation of "+collection, doc)
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
	// No expires_at: a confirmation must not expire by the table's TTL
	// while the roots it covers still exist (they are the owner's, left in
	// place); without it GC would refuse the confirmed regression again.
	if len(body) <= maxPlainConfirmation {
		item["doc"] = str(string(body))
	} else {
		z, err := gzipBytes(body)
		if err != nil {
			return fmt.Errorf("compress the lineage confirmation of %s: %w", c.Collection, err)
		}
		item["docz"] = &ddb.AttributeValueMemberB{Value: z}
	}
	if _, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: item}); err != nil {
		return translate("record lineage confirmation of", c.Collection, err, true)
	}
	cond := "#v > :v OR (#v = :v AND checksum <> :c)"
	vals := map[string]ddb.AttributeValue{":v": unum(c.HeadVersion), ":c": str(c.HeadChecksum)}
	if c.AbandonedHeadVersion > 0 {
		// The abandoned head itself, also below the confirmed one (a new
		// lineage passed its version): the observer advances only along
		// the lineage of the record, so it must go (observe/descent.go).
		cond += " OR (#v = :av AND checksum = :ac) OR (from_v = :av AND from_c = :ac)"
		vals[":av"], vals[":ac"] = unum(c.AbandonedHeadVersion), str(c.AbandonedHeadChecksum)
	}
	_, err = t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(t.table), Key: observedKey(c.Collection, c.Inc()),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: map[string]string{"#v": "version"},
		ExpressionAttributeValues: vals})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // nothing recorded above the confirmed head
	}
	return translate("forget observed state of", c.Collection, err, true)
}
