package awsio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

// DynamoAPI is the part of the DynamoDB client the adapters use.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// stateTTL keeps disposable records tidy; nothing relies on it.
const stateTTL = 30 * 24 * time.Hour

// ObservedTable stores observe.Observed items: pk "COLL#<collection>" (the
// first incarnation) or "COLL#<collection>#i<N>" (incarnation N > 1), sk
// "OBSERVED": every lifetime of a name has its own item.
type ObservedTable struct {
	api   DynamoAPI
	table string
}

// NewObservedTable adapts api to table.
func NewObservedTable(api DynamoAPI, table string) *ObservedTable {
	return &ObservedTable{api: api, table: table}
}

func observedKey(collection string, incarnation uint64) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": str(lifetimePK(collection, incarnation)), "sk": str("OBSERVED")}
}

// lifetimePK is the partition key of one lifetime of a collection.
func lifetimePK(collection string, incarnation uint64) string {
	if contract.Lifetime(incarnation) == 1 {
		return resources.CollectionKeyPrefix + collection
	}
	return fmt.Sprintf("%s%s#i%d", resources.CollectionKeyPrefix, collection, incarnation)
}

func str(s string) ddb.AttributeValue { return &ddb.AttributeValueMemberS{Value: s} }
func num(n int64) ddb.AttributeValue {
	return &ddb.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func unum(n uint64) ddb.AttributeValue {
	return &ddb.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
}
func flt(f float64) ddb.AttributeValue {
	return &ddb.AttributeValueMemberN{Value: strconv.FormatFloat(f, 'f', -1, 64)}
}
func boolean(b bool) ddb.AttributeValue { return &ddb.AttributeValueMemberBOOL{Value: b} }

// Advance is one conditional UpdateItem: the state moves only forward and
// the previous item comes back either way (ALL_OLD on success and on
// condition failure), so the observer learns duplicate/stale in one call.
func (t *ObservedTable) Advance(ctx context.Context, st observe.Observed) (observe.Observed, error) {
	expr := "SET #v = :v, checksum = :c, commit_ts = :ct, observed_at = :oa, facts_version = :fv, objects = :o, #b = :b, " +
		"max_fan_out = :mf, delete_density = :dd, compaction_due = :cd, tombstone = :tb, expires_at = :exp, obs_id = :id"
	vals := map[string]ddb.AttributeValue{
		":v": unum(st.Version), ":c": str(st.Checksum), ":ct": num(st.CommitTsUnixMs), ":oa": num(st.ObservedAtUnixMs),
		":fv": unum(st.FactsVersion), ":o": num(st.Debt.Objects), ":b": num(st.Debt.Bytes), ":mf": num(st.Debt.MaxFanOut),
		":dd": flt(st.Debt.DeleteDensity), ":cd": boolean(st.Debt.CompactionDue), ":tb": boolean(st.Debt.TombstoneActive),
		":exp": num(time.UnixMilli(st.ObservedAtUnixMs).Add(stateTTL).Unix()), ":id": str(st.ObservationID),
	}
	remove := " REMOVE compaction_due_since"
	switch {
	case st.Debt.CompactionDue && st.CompactionServed:
		expr += ", compaction_due_since = :cds"
		vals[":cds"], remove = num(st.Debt.CompactionDueSinceUnixMs), ""
	case st.Debt.CompactionDue:
		expr += ", compaction_due_since = if_not_exists(compaction_due_since, :cds)"
		vals[":cds"], remove = num(st.Debt.CompactionDueSinceUnixMs), ""
	}
	var add []string
	if st.Debt.GCObjects > 0 {
		expr += ", gc_due_at = if_not_exists(gc_due_at, :due)"
		add = append(add, "gc_objects :go", "gc_bytes :gb", "gc_added_objects :go", "gc_added_bytes :gb")
		vals[":due"], vals[":go"], vals[":gb"] = num(st.Debt.GCDueAtUnixMs), num(st.Debt.GCObjects), num(st.Debt.GCBytes)
	}
	expr += remove
	if st.RewriteClaims > 0 {
		// The old image tells the observer whether a claim was pending.
		add = append(add, "rewrite_claims :rc")
		vals[":rc"] = num(st.RewriteClaims)
	}
	if len(add) > 0 {
		expr += " ADD " + strings.Join(add, ", ")
	}
	cond := "attribute_not_exists(#v) OR #v < :v"
	switch {
	case st.Expect != nil && st.Expect.Version == 0:
		cond = "attribute_not_exists(#v)"
	case st.Expect != nil:
		// Only from the head the advance descends from (observe/descent.go).
		cond = "attribute_not_exists(#v) OR (#v = :ev AND checksum = :ec AND #v < :v)"
		vals[":ev"], vals[":ec"] = unum(st.Expect.Version), str(st.Expect.Checksum)
		if st.Expect.KeepFrom {
			// Across a gap: keep the head advanced from (the first one).
			expr = strings.Replace(expr, "SET ", "SET from_v = if_not_exists(from_v, :ev), from_c = if_not_exists(from_c, :ec), ", 1)
		}
	}
	out, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: observedKey(st.Collection, st.Incarnation),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#v": "version", "#b": "bytes"},
		ExpressionAttributeValues:           vals,
		ReturnValues:                        ddb.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: ddb.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *ddb.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			prev := decodeObserved(st.Collection, ccf.Item)
			prev.Incarnation = st.Incarnation
			if prev.ObservationID != "" && prev.ObservationID == st.ObservationID && prev.Version == st.Version {
				// Our own advance, applied by an attempt whose answer was
				// lost: the due time it found is unknown, so lower it now.
				t.lowerGCDue(ctx, st)
			}
			return prev, fmt.Errorf("advance %s to v%d: %w", st.Collection, st.Version, store.ErrConditionFailed)
		}
		return observe.Observed{}, translate("advance observed state of", st.Collection, err, true)
	}
	prev := decodeObserved(st.Collection, out.Attributes)
	if prev.Version != 0 {
		prev.Incarnation = st.Incarnation
	}
	if st.Debt.GCObjects > 0 && prev.Debt.GCDueAtUnixMs > st.Debt.GCDueAtUnixMs {
		t.lowerGCDue(ctx, st)
	}
	return prev, nil
}

// lowerGCDue makes the recorded gc_due_at the earliest due of the debt it
// covers: the advance's if_not_exists keeps a recorded due time, and an
// earlier-recorded one can be later than the debt this advance adds (a
// sweep that saw a young never-committed output records its reclaim grace,
// half an hour ahead, while a cutover's debt is due in minutes). An update
// expression has no min(), so this is a second UpdateItem, conditional on
// the recorded due being later (and present: a sweep record that cleared
// the debt meanwhile is not undone). Lowering is always safe: a due time
// only says when reconciliation sweeps, the sweep judges every gate at
// execution time. It is best effort: a failure leaves the later due (the
// debt is then swept late, never lost), and the next advance or sweep
// record writes the due again.
func (t *ObservedTable) lowerGCDue(ctx context.Context, st observe.Observed) {
	_, _ = t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: observedKey(st.Collection, st.Incarnation),
		UpdateExpression:          aws.String("SET gc_due_at = :due"),
		ConditionExpression:       aws.String("attribute_exists(gc_due_at) AND gc_due_at > :due"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":due": num(st.Debt.GCDueAtUnixMs)},
	})
}

// Get reads the observed state (zero when none).
func (t *ObservedTable) Get(ctx context.Context, collection string, incarnation uint64) (observe.Observed, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: observedKey(collection, incarnation), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return observe.Observed{}, translate("get observed state of", collection, err, false)
	}
	o := decodeObserved(collection, out.Item)
	if o.Version != 0 {
		o.Incarnation = contract.Lifetime(incarnation)
	}
	return o, nil
}

// Revert restores prev if the item still holds st.
func (t *ObservedTable) Revert(ctx context.Context, st, prev observe.Observed) error {
	cond := aws.String("#v = :v AND checksum = :c")
	vals := map[string]ddb.AttributeValue{":v": unum(st.Version), ":c": str(st.Checksum)}
	names := map[string]string{"#v": "version"}
	var err error
	if prev.Version == 0 {
		_, err = t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(t.table), Key: observedKey(st.Collection, st.Incarnation),
			ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: vals})
	} else {
		_, err = t.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: encodeObserved(prev),
			ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: vals})
	}
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Refused: the item no longer holds st. If it holds prev (or is
		// gone when prev was nothing), this is our own revert, applied and
		// retried by the SDK after its answer was lost (SYSTEM rule 13).
		if cur, gerr := t.Get(ctx, st.Collection, st.Incarnation); gerr == nil && cur.Version == prev.Version && cur.Checksum == prev.Checksum {
			return nil
		}
	}
	return translate("revert observed state of", st.Collection, err, true)
}

// TakeRewrite records that a worker took the collection's pending rewrite
// task: every claim counted so far is served by it (the worker reads the
// head after this write and plans against it). Nothing claimed is not an
// error.
func (t *ObservedTable) TakeRewrite(ctx context.Context, collection string, incarnation uint64) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(t.table), Key: observedKey(collection, incarnation),
		UpdateExpression: aws.String("SET rewrite_taken = rewrite_claims"), ConditionExpression: aws.String("attribute_exists(rewrite_claims)")})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return translate("take the pending rewrite of", collection, err, true)
}

// RecordCompactionIdle records that a compaction worker planned the full
// object set of head version/checksum and found nothing, only while the
// item still records that head (a newer head is judged afresh; a wiped
// state is rebuilt by reconciliation). The head owes no compaction, so
// the due clock stops: the next head that is due starts it again
// (compaction_due_since is kept across heads with if_not_exists).
func (t *ObservedTable) RecordCompactionIdle(ctx context.Context, collection string, incarnation, version uint64, checksum, policy string) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(t.table), Key: observedKey(collection, incarnation),
		UpdateExpression:          aws.String("SET compaction_idle_version = :v, compaction_idle_checksum = :c, compaction_idle_policy = :p REMOVE compaction_due_since"),
		ConditionExpression:       aws.String("#v = :v AND checksum = :c"),
		ExpressionAttributeNames:  map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":v": unum(version), ":c": str(checksum), ":p": str(policy)}})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return translate("record compaction idle of", collection, err, true)
}

// RecordGCSweep replaces the GC debt with what a finished sweep left: the
// GC debt (gc_objects, gc_due_at) and the lifecycle retention window
// (retention_objects, retention_due_at; 0: none), which reconciliation
// schedules as the retention_reclaim class. A record with totals
// (sw.Added) sets the debt to what it left plus what the advances added
// since those totals (gc_added_*, which only advances change), in one
// conditional write that holds for its head and every later one.
func (t *ObservedTable) RecordGCSweep(ctx context.Context, sw gc.SweepRecord) error {
	expr := "SET gc_objects = :go, gc_bytes = :gb, gc_swept_at = :sa, retention_objects = :ro, retention_due_at = :rd"
	vals := map[string]ddb.AttributeValue{":go": num(sw.RemainingObjects), ":gb": num(sw.RemainingBytes), ":sa": num(sw.SweptAtUnixMs),
		":ro": num(sw.RetentionObjects), ":rd": num(sw.RetentionDueUnixMs)}
	if sw.Added != nil {
		// gc_objects = remaining + (totals now - totals at the head).
		expr = "SET gc_objects = if_not_exists(gc_added_objects, :zero) - :go, gc_bytes = if_not_exists(gc_added_bytes, :zero) - :gb, " +
			"gc_swept_at = :sa, retention_objects = :ro, retention_due_at = :rd"
		vals[":zero"], vals[":go"], vals[":gb"] = num(0), num(sw.Added.Objects-sw.RemainingObjects), num(sw.Added.Bytes-sw.RemainingBytes)
	}
	if sw.NextDueUnixMs > 0 {
		expr += ", gc_due_at = :due"
		vals[":due"] = num(sw.NextDueUnixMs)
	} else {
		expr += " REMOVE gc_due_at"
	}
	cond := "attribute_exists(pk)"
	var names map[string]string
	switch {
	case sw.HeadVersion > 0 && sw.Added != nil:
		// While the state holds the head or any later one: what the later
		// advances added is in the totals' difference.
		cond += " AND (#v > :hv OR (#v = :hv AND checksum = :hc))"
		names, vals[":hv"], vals[":hc"] = map[string]string{"#v": "version"}, unum(sw.HeadVersion), str(sw.HeadChecksum)
	case sw.HeadVersion > 0:
		// Only while the state still holds the head the record is for: an
		// observation that advanced it meanwhile added debt the record
		// does not count; the caller carries the record forward to the
		// head the state holds (gc.SweptHeadMovedError) and tries again.
		cond += " AND #v = :hv"
		names, vals[":hv"] = map[string]string{"#v": "version"}, unum(sw.HeadVersion)
		if sw.HeadChecksum != "" {
			cond += " AND checksum = :hc"
			vals[":hc"] = str(sw.HeadChecksum)
		}
	}
	in := &dynamodb.UpdateItemInput{TableName: aws.String(t.table), Key: observedKey(sw.Collection, sw.Incarnation),
		UpdateExpression: aws.String(expr), ExpressionAttributeValues: vals, ExpressionAttributeNames: names, ConditionExpression: aws.String(cond),
		ReturnValuesOnConditionCheckFailure: ddb.ReturnValuesOnConditionCheckFailureAllOld}
	if sw.Added != nil {
		in.ReturnValues = ddb.ReturnValueAllOld
	}
	out, err := t.api.UpdateItem(ctx, in)
	if err != nil {
		var ccf *ddb.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if len(ccf.Item) == 0 {
				return nil // state wiped: reconciliation rebuilds it
			}
			st := decodeObserved(sw.Collection, ccf.Item)
			return &gc.SweptHeadMovedError{Collection: sw.Collection, Version: st.Version, Checksum: st.Checksum,
				Added: gc.AddedTotals{Objects: st.Debt.GCAddedObjects, Bytes: st.Debt.GCAddedBytes}}
		}
		return translate("record gc sweep of", sw.Collection, err, true)
	}
	if sw.Added != nil {
		if old := decodeObserved(sw.Collection, out.Attributes); old.Debt.GCAddedObjects != sw.Added.Objects || old.Debt.GCAddedBytes != sw.Added.Bytes {
			return &gc.SweepRecordRacedError{Collection: sw.Collection, Version: old.Version, Checksum: old.Checksum}
		}
	}
	return nil
}

// LowerGCDue makes the recorded due time of the GC debt at most due (set
// when none is recorded): after a sweep record that advances raced
// (gc.SweepRecordRacedError). A wiped state is left alone.
func (t *ObservedTable) LowerGCDue(ctx context.Context, collection string, incarnation uint64, due int64) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: observedKey(collection, incarnation),
		UpdateExpression:          aws.String("SET gc_due_at = :due"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(gc_due_at) OR gc_due_at > :due)"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":due": num(due)},
	})
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return translate("lower the gc due time of", collection, err, true)
}

func encodeObserved(o observe.Observed) map[string]ddb.AttributeValue {
	item := observedKey(o.Collection, o.Incarnation)
	item["version"], item["checksum"], item["commit_ts"], item["observed_at"] = unum(o.Version), str(o.Checksum), num(o.CommitTsUnixMs), num(o.ObservedAtUnixMs)
	item["facts_version"], item["objects"], item["bytes"], item["max_fan_out"] = unum(o.FactsVersion), num(o.Debt.Objects), num(o.Debt.Bytes), num(o.Debt.MaxFanOut)
	item["delete_density"], item["compaction_due"], item["tombstone"] = flt(o.Debt.DeleteDensity), boolean(o.Debt.CompactionDue), boolean(o.Debt.TombstoneActive)
	item["gc_objects"], item["gc_bytes"], item["gc_swept_at"] = num(o.Debt.GCObjects), num(o.Debt.GCBytes), num(o.Debt.GCSweptAtUnixMs)
	if o.Debt.GCAddedObjects != 0 || o.Debt.GCAddedBytes != 0 {
		item["gc_added_objects"], item["gc_added_bytes"] = num(o.Debt.GCAddedObjects), num(o.Debt.GCAddedBytes)
	}
	if o.UnverifiedFromVersion > 0 {
		item["from_v"], item["from_c"] = unum(o.UnverifiedFromVersion), str(o.UnverifiedFromChecksum)
	}
	if o.Debt.GCDueAtUnixMs > 0 {
		item["gc_due_at"] = num(o.Debt.GCDueAtUnixMs)
	}
	if o.Debt.CompactionDueSinceUnixMs > 0 {
		item["compaction_due_since"] = num(o.Debt.CompactionDueSinceUnixMs)
	}
	item["retention_objects"], item["retention_due_at"] = num(o.Debt.RetentionObjects), num(o.Debt.RetentionDueAtUnixMs)
	if o.RewriteClaims > 0 {
		item["rewrite_claims"], item["rewrite_taken"] = num(o.RewriteClaims), num(o.RewriteTaken)
	}
	if o.CompactionIdleVersion > 0 {
		item["compaction_idle_version"], item["compaction_idle_checksum"] = unum(o.CompactionIdleVersion), str(o.CompactionIdleChecksum)
		item["compaction_idle_policy"] = str(o.CompactionIdlePolicy)
	}
	item["expires_at"] = num(time.UnixMilli(o.ObservedAtUnixMs).Add(stateTTL).Unix())
	item["obs_id"] = str(o.ObservationID)
	return item
}

func decodeObserved(collection string, item map[string]ddb.AttributeValue) observe.Observed {
	o := observe.Observed{Collection: collection}
	if len(item) == 0 {
		return o
	}
	o.Version = getU(item, "version")
	o.Checksum = getS(item, "checksum")
	o.CommitTsUnixMs = getN(item, "commit_ts")
	o.ObservedAtUnixMs = getN(item, "observed_at")
	o.FactsVersion = getU(item, "facts_version")
	o.ObservationID = getS(item, "obs_id")
	o.RewriteClaims, o.RewriteTaken = getN(item, "rewrite_claims"), getN(item, "rewrite_taken")
	o.CompactionIdleVersion, o.CompactionIdleChecksum = getU(item, "compaction_idle_version"), getS(item, "compaction_idle_checksum")
	o.CompactionIdlePolicy = getS(item, "compaction_idle_policy")
	o.UnverifiedFromVersion, o.UnverifiedFromChecksum = getU(item, "from_v"), getS(item, "from_c")
	o.Debt = observe.Debt{
		Objects: getN(item, "objects"), Bytes: getN(item, "bytes"), MaxFanOut: getN(item, "max_fan_out"),
		DeleteDensity: getF(item, "delete_density"), CompactionDue: getB(item, "compaction_due"), TombstoneActive: getB(item, "tombstone"),
		CompactionDueSinceUnixMs: getN(item, "compaction_due_since"),
		GCObjects:                getN(item, "gc_objects"), GCBytes: getN(item, "gc_bytes"), GCDueAtUnixMs: getN(item, "gc_due_at"),
		GCSweptAtUnixMs: getN(item, "gc_swept_at"), GCAddedObjects: getN(item, "gc_added_objects"), GCAddedBytes: getN(item, "gc_added_bytes"),
		RetentionObjects:     getN(item, "retention_objects"),
		RetentionDueAtUnixMs: getN(item, "retention_due_at"),
	}
	return o
}

func getS(item map[string]ddb.AttributeValue, k string) string {
	if v, ok := item[k].(*ddb.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]ddb.AttributeValue, k string) int64 {
	if v, ok := item[k].(*ddb.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func getU(item map[string]ddb.AttributeValue, k string) uint64 {
	if v, ok := item[k].(*ddb.AttributeValueMemberN); ok {
		n, _ := strconv.ParseUint(v.Value, 10, 64)
		return n
	}
	return 0
}

func getF(item map[string]ddb.AttributeValue, k string) float64 {
	if v, ok := item[k].(*ddb.AttributeValueMemberN); ok {
		f, _ := strconv.ParseFloat(v.Value, 64)
		return f
	}
	return 0
}

func getB(item map[string]ddb.AttributeValue, k string) bool {
	if v, ok := item[k].(*ddb.AttributeValueMemberBOOL); ok {
		return v.Value
	}
	return false
}
