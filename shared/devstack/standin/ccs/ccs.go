package ccs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/contract"
)

// DynamoAPI is what the stand-in needs from DynamoDB.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Service is the stand-in CCS.
type Service struct {
	api   DynamoAPI
	table string
	now   func() time.Time
	// SkipFactsCheck records a collection release intent without
	// comparing its facts_version with the current facts (intent.go): the
	// gap a tombstone replaced between the coordinator's check and the
	// record falls into. Mutation proofs only.
	SkipFactsCheck bool
	// SkipRemainsCheck records a collection release intent without
	// seeing that the lifetime is gone (remains.go). Mutation proofs only.
	SkipRemainsCheck bool
	bucket           Bucket
}

// New returns the stand-in over its table.
func New(api DynamoAPI, table string, now func() time.Time) *Service {
	return &Service{api: api, table: table, now: now}
}

// ErrUnknownCollection: CCS has no facts for the collection.
var ErrUnknownCollection = errors.New("unknown collection")

func key(pk, sk string) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: pk}, "sk": &ddb.AttributeValueMemberS{Value: sk}}
}

// ErrReserved: the name's current incarnation is alive, or dropped and not
// yet released (its release intent is not recorded).
var ErrReserved = errors.New("collection name is reserved")

// PutFacts stores facts with facts_version incremented by one, atomically.
// Facts without an incarnation keep the current one (1 for a new name).
func (s *Service) PutFacts(ctx context.Context, f contract.CollectionFacts) (contract.CollectionFacts, error) {
	cur, err := s.Facts(ctx, f.Collection)
	if err != nil && !errors.Is(err, ErrUnknownCollection) {
		return f, err
	}
	if f.Incarnation == 0 {
		f.Incarnation = cur.Inc()
	}
	f.SchemaVersion, f.FactsVersion = contract.SchemaVersion, cur.FactsVersion+1
	body, err := contract.Encode(f)
	if err != nil {
		return f, err
	}
	item := key("FACTS#"+f.Collection, "FACTS")
	item["doc"] = &ddb.AttributeValueMemberS{Value: string(body)}
	item["facts_version"] = &ddb.AttributeValueMemberN{Value: strconv.FormatUint(f.FactsVersion, 10)}
	cond := "attribute_not_exists(pk)"
	vals := map[string]ddb.AttributeValue{}
	if cur.FactsVersion > 0 {
		cond = "facts_version = :fv"
		vals[":fv"] = &ddb.AttributeValueMemberN{Value: strconv.FormatUint(cur.FactsVersion, 10)}
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String(cond)}
	if len(vals) > 0 {
		in.ExpressionAttributeValues = vals
	}
	if _, err := s.api.PutItem(ctx, in); err != nil {
		return f, fmt.Errorf("put facts of %s: %w", f.Collection, err)
	}
	return f, nil
}

// Create registers a new lifetime of collection and returns its facts:
// incarnation 1 for a new name, the next one for a name whose previous
// lifetime was dropped and released (its release intent recorded). Any
// other state of the name is ErrReserved.
func (s *Service) Create(ctx context.Context, collection, namespace string, lc contract.Lifecycle) (contract.CollectionFacts, error) {
	cur, err := s.Facts(ctx, collection)
	f := contract.CollectionFacts{Collection: collection, Namespace: namespace, Lifecycle: lc, Incarnation: 1}
	switch {
	case errors.Is(err, ErrUnknownCollection):
	case err != nil:
		return f, err
	case !cur.Tombstoned || !cur.ReleaseIntentRecorded:
		return cur, fmt.Errorf("create %s: incarnation %d: %w", collection, cur.Inc(), ErrReserved)
	default:
		f.Incarnation = cur.Inc() + 1
	}
	return s.PutFacts(ctx, f)
}

// Drop tombstones the current incarnation of collection now, reserving the
// name for reserve (the reservation horizon) and naming the control
// artifacts its cleanup must delete.
func (s *Service) Drop(ctx context.Context, collection string, reserve time.Duration, artifacts ...string) (contract.CollectionFacts, error) {
	f, err := s.Facts(ctx, collection)
	if err != nil {
		return f, err
	}
	if f.Tombstoned {
		return f, nil
	}
	now := s.now()
	f.Tombstoned, f.TombstonedAtUnixMs, f.ReservationHorizonUnixMs = true, now.UnixMilli(), now.Add(reserve).UnixMilli()
	f.ControlArtifacts = artifacts
	return s.PutFacts(ctx, f)
}

// CreateNamespace registers a namespace (incarnation 1, or the next one
// after its previous lifetime was dropped and released).
func (s *Service) CreateNamespace(ctx context.Context, namespace string) (contract.NamespaceFacts, error) {
	cur, err := s.NamespaceFacts(ctx, namespace)
	f := contract.NamespaceFacts{Namespace: namespace, Incarnation: 1}
	switch {
	case errors.Is(err, ErrUnknownCollection):
	case err != nil:
		return f, err
	case !cur.Tombstoned || !cur.ReleaseIntentRecorded:
		return cur, fmt.Errorf("create namespace %s: incarnation %d: %w", namespace, cur.Inc(), ErrReserved)
	default:
		f.Incarnation = cur.Inc() + 1
	}
	return s.putNamespace(ctx, f)
}

// DropNamespace tombstones a namespace; admitted only once every child
// collection is hidden (tombstoned).
func (s *Service) DropNamespace(ctx context.Context, namespace string) (contract.NamespaceFacts, error) {
	f, err := s.NamespaceFacts(ctx, namespace)
	if err != nil {
		return f, err
	}
	for _, c := range f.Collections {
		cf, err := s.Facts(ctx, c)
		if err != nil {
			return f, err
		}
		if !cf.Tombstoned {
			return f, fmt.Errorf("drop namespace %s: child collection %s is not dropped: %w", namespace, c, ErrReserved)
		}
	}
	f.Tombstoned, f.TombstonedAtUnixMs = true, s.now().UnixMilli()
	return s.putNamespace(ctx, f)
}

func (s *Service) putNamespace(ctx context.Context, f contract.NamespaceFacts) (contract.NamespaceFacts, error) {
	f.Collections = nil // derived from the collections' facts when read
	f.SchemaVersion = contract.SchemaVersion
	f.FactsVersion++
	body, err := contract.Encode(f)
	if err != nil {
		return f, err
	}
	item := key("NS#"+f.Namespace, "FACTS")
	item["doc"] = &ddb.AttributeValueMemberS{Value: string(body)}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return f, fmt.Errorf("put namespace facts of %s: %w", f.Namespace, err)
	}
	return s.NamespaceFacts(ctx, f.Namespace)
}

// NamespaceFacts returns a namespace's facts; its children are the
// collections whose facts name it.
func (s *Service) NamespaceFacts(ctx context.Context, namespace string) (contract.NamespaceFacts, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key("NS#"+namespace, "FACTS"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return contract.NamespaceFacts{}, fmt.Errorf("get namespace facts of %s: %w", namespace, err)
	}
	doc, ok := out.Item["doc"].(*ddb.AttributeValueMemberS)
	if !ok {
		return contract.NamespaceFacts{Namespace: namespace}, fmt.Errorf("namespace %s: %w", namespace, ErrUnknownCollection)
	}
	f, err := contract.DecodeNamespaceFacts("ccs namespace facts "+namespace, []byte(doc.Value))
	if err != nil {
		return f, err
	}
	cols, err := s.Collections(ctx)
	if err != nil {
		return f, err
	}
	f.Collections = []string{}
	for _, c := range cols {
		if cf, err := s.Facts(ctx, c); err == nil && cf.Namespace == namespace {
			f.Collections = append(f.Collections, c)
		}
	}
	return f, nil
}

// TombstonedNamespaces lists the dropped namespaces (released or not)
// with their facts, sorted by name, those after after only, at most limit
// (at most contract.MaxTombstonedNamespacesPage) per page; NextAfter names
// the last one when more may follow.
func (s *Service) TombstonedNamespaces(ctx context.Context, after string, limit int) (contract.TombstonedNamespaces, error) {
	page := contract.TombstonedNamespaces{SchemaVersion: contract.SchemaVersion, Namespaces: []contract.NamespaceFacts{}}
	if limit <= 0 || limit > contract.MaxTombstonedNamespacesPage {
		limit = contract.MaxTombstonedNamespacesPage
	}
	names, err := s.scanPrefix(ctx, "NS#")
	if err != nil {
		return page, fmt.Errorf("list namespaces: %w", err)
	}
	for _, n := range names {
		if n <= after {
			continue
		}
		f, err := s.NamespaceFacts(ctx, n)
		if err != nil {
			return page, err
		}
		if !f.Tombstoned {
			continue
		}
		if len(page.Namespaces) == limit {
			page.NextAfter = page.Namespaces[limit-1].Namespace
			break
		}
		page.Namespaces = append(page.Namespaces, f)
	}
	return page, nil
}

// recordNamespaceIntent records a namespace's release intent once, only
// while the namespace is dropped and every child's release is recorded.
func (s *Service) recordNamespaceIntent(ctx context.Context, req contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	ans := contract.ReleaseIntentAnswer{SchemaVersion: contract.SchemaVersion, IntentID: req.IntentID}
	if at, ok, err := s.intent(ctx, req.IntentID); err != nil {
		return ans, err
	} else if ok {
		ans.Status, ans.RecordedAtUnixMs = contract.IntentAlreadyRecorded, at
		return ans, nil
	}
	f, err := s.NamespaceFacts(ctx, req.Namespace)
	if err != nil {
		return ans, err
	}
	if !f.Tombstoned || f.Inc() != contract.Lifetime(req.Incarnation) {
		ans.Status, ans.Reason = contract.IntentRejected, fmt.Sprintf("namespace %s incarnation %d is not dropped", req.Namespace, contract.Lifetime(req.Incarnation))
		return ans, nil
	}
	for _, c := range f.Collections {
		if cf, err := s.Facts(ctx, c); err != nil || !cf.ReleaseIntentRecorded {
			ans.Status, ans.Reason = contract.IntentRejected, fmt.Sprintf("child collection %s is not released", c)
			return ans, nil
		}
	}
	ans, err = s.putIntent(ctx, ans, req)
	if err != nil || ans.Status != contract.IntentRecorded {
		return ans, err
	}
	f.ReleaseIntentRecorded = true
	if _, err := s.putNamespace(ctx, f); err != nil {
		return ans, err
	}
	return ans, nil
}

// Facts returns a collection's facts.
func (s *Service) Facts(ctx context.Context, collection string) (contract.CollectionFacts, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key("FACTS#"+collection, "FACTS"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return contract.CollectionFacts{}, fmt.Errorf("get facts of %s: %w", collection, err)
	}
	doc, ok := out.Item["doc"].(*ddb.AttributeValueMemberS)
	if !ok {
		return contract.CollectionFacts{Collection: collection}, fmt.Errorf("facts of %s: %w", collection, ErrUnknownCollection)
	}
	return contract.DecodeCollectionFacts("ccs facts "+collection, []byte(doc.Value))
}

// Collections lists every collection CCS has facts for, sorted.
func (s *Service) Collections(ctx context.Context) ([]string, error) {
	out, err := s.scanPrefix(ctx, "FACTS#")
	if err != nil {
		return nil, fmt.Errorf("list collections: %w", err)
	}
	return out, nil
}

// scanPrefix lists the names of every item whose key starts with prefix,
// sorted.
func (s *Service) scanPrefix(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	var start map[string]ddb.AttributeValue
	for {
		page, err := s.api.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.table), ExclusiveStartKey: start})
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			if pk, ok := it["pk"].(*ddb.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, prefix) {
				out = append(out, strings.TrimPrefix(pk.Value, prefix))
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		start = page.LastEvaluatedKey
	}
	slices.Sort(out)
	return out, nil
}

// RecordReleaseIntent records an intent once; a repeat is already_recorded.
// An intent for a collection that is not tombstoned, whose reservation
// horizon has not passed by CCS's own clock, or whose lifetime is not gone
// from the data bucket (remains.go: head retired, no key of it left), is
// rejected.
func (s *Service) RecordReleaseIntent(ctx context.Context, req contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	ans := contract.ReleaseIntentAnswer{SchemaVersion: contract.SchemaVersion, IntentID: req.IntentID}
	if req.IntentKind == contract.NamespaceReleaseIntent {
		return s.recordNamespaceIntent(ctx, req)
	}
	if prev, ok, err := s.intent(ctx, req.IntentID); err != nil {
		return ans, err
	} else if ok {
		// The identity is the incarnation's: a repeat is the same intent,
		// whatever happened to the name since.
		ans.Status, ans.RecordedAtUnixMs = contract.IntentAlreadyRecorded, prev
		return ans, nil
	}
	f, err := s.Facts(ctx, req.Collection)
	if err != nil {
		return ans, err
	}
	switch {
	case !f.Tombstoned:
		ans.Status, ans.Reason = contract.IntentRejected, req.Collection+" is not tombstoned"
		return ans, nil
	case f.Inc() != contract.Lifetime(req.Incarnation):
		ans.Status, ans.Reason = contract.IntentRejected, fmt.Sprintf("%s is incarnation %d, the intent names %d", req.Collection, f.Inc(), contract.Lifetime(req.Incarnation))
		return ans, nil
	case len(f.PendingPreconditions) > 0:
		ans.Status, ans.Reason = contract.IntentRejected, fmt.Sprintf("preconditions pending: %v", f.PendingPreconditions)
		return ans, nil
	case s.now().UnixMilli() < f.ReservationHorizonUnixMs:
		// The owner checks its own horizon by its own clock at the record:
		// no caller's word (a completion's "confirmed") releases early.
		ans.Status, ans.Reason = contract.IntentRejected, fmt.Sprintf("the reservation horizon of %s has not passed (%s from now)",
			req.Collection, time.UnixMilli(f.ReservationHorizonUnixMs).Sub(s.now()).Round(time.Second))
		return ans, nil
	}
	if why := s.staleFacts(req, f); why != "" {
		ans.Status, ans.Reason = contract.IntentStaleFacts, why
		return ans, nil
	}
	if req.IntentKind == contract.CollectionReleaseIntent {
		why, err := s.lifetimeLeft(ctx, req.Collection, f.Inc())
		if err != nil {
			return ans, err
		}
		if why != "" {
			ans.Status, ans.Reason = contract.IntentRejected, why
			return ans, nil
		}
	}
	ans, err = s.putIntent(ctx, ans, req)
	if err != nil || ans.Status != contract.IntentRecorded {
		return ans, err
	}
	if req.IntentKind == contract.CollectionReleaseIntent {
		f.ReleaseIntentRecorded = true
		if _, err := s.PutFacts(ctx, f); err != nil {
			return ans, fmt.Errorf("mark %s incarnation %d released: %w", req.Collection, f.Inc(), err)
		}
	}
	return ans, nil
}

// putIntent records req once (a conditional put on its id): recorded, or
// already_recorded when the id is there.
func (s *Service) putIntent(ctx context.Context, ans contract.ReleaseIntentAnswer, req contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	body, err := contract.Encode(req)
	if err != nil {
		return ans, err
	}
	now := s.now().UnixMilli()
	item := key("INTENT#"+req.IntentID, "INTENT")
	item["doc"] = &ddb.AttributeValueMemberS{Value: string(body)}
	item["recorded_at"] = &ddb.AttributeValueMemberN{Value: strconv.FormatInt(now, 10)}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")})
	var ccf *ddb.ConditionalCheckFailedException
	switch {
	case err == nil:
		ans.Status, ans.RecordedAtUnixMs = contract.IntentRecorded, now
	case errors.As(err, &ccf):
		ans.Status = contract.IntentAlreadyRecorded
	default:
		return ans, fmt.Errorf("record intent %s: %w", req.IntentID, err)
	}
	return ans, nil
}

// intent returns when the intent id was recorded, if it was.
func (s *Service) intent(ctx context.Context, id string) (int64, bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key("INTENT#"+id, "INTENT"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, false, fmt.Errorf("get intent %s: %w", id, err)
	}
	at, ok := out.Item["recorded_at"].(*ddb.AttributeValueMemberN)
	if !ok {
		return 0, false, nil
	}
	n, _ := strconv.ParseInt(at.Value, 10, 64)
	return n, true, nil
}

// Intents lists recorded intents (for demos and tests).
func (s *Service) Intents(ctx context.Context) ([]contract.ReleaseIntentRequest, error) {
	page, err := s.api.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.table)})
	if err != nil {
		return nil, err
	}
	var out []contract.ReleaseIntentRequest
	for _, it := range page.Items {
		if pk, ok := it["pk"].(*ddb.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "INTENT#") {
			doc := it["doc"].(*ddb.AttributeValueMemberS)
			r, err := contract.DecodeReleaseIntentRequest(pk.Value, []byte(doc.Value))
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// Handler serves the stand-in's HTTP contract:
//
//	GET  /collections                   -> {"collections": [...]}
//	GET  /collections/{c}/facts         -> CollectionFacts
//	GET  /namespaces/{n}/facts          -> NamespaceFacts
//	GET  /namespaces/tombstoned?after=n -> TombstonedNamespaces (one page)
//	POST /release-intents               ReleaseIntentRequest -> ReleaseIntentAnswer
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /collections", func(w http.ResponseWriter, r *http.Request) {
		cols, err := s.Collections(r.Context())
		respond(w, map[string][]string{"collections": nonNil(cols)}, err)
	})
	mux.HandleFunc("GET /collections/{c}/facts", func(w http.ResponseWriter, r *http.Request) {
		f, err := s.Facts(r.Context(), r.PathValue("c"))
		if errors.Is(err, ErrUnknownCollection) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		respond(w, f, err)
	})
	mux.HandleFunc("GET /namespaces/tombstoned", func(w http.ResponseWriter, r *http.Request) {
		after := r.URL.Query().Get("after")
		if after != "" && !contract.ValidCollection(after) {
			http.Error(w, fmt.Sprintf("after %q is not a valid namespace name", after), http.StatusBadRequest)
			return
		}
		page, err := s.TombstonedNamespaces(r.Context(), after, 0)
		respond(w, page, err)
	})
	mux.HandleFunc("GET /namespaces/{n}/facts", func(w http.ResponseWriter, r *http.Request) {
		f, err := s.NamespaceFacts(r.Context(), r.PathValue("n"))
		if errors.Is(err, ErrUnknownCollection) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		respond(w, f, err)
	})
	mux.HandleFunc("POST /release-intents", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := contract.DecodeReleaseIntentRequest("POST /release-intents", body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ans, err := s.RecordReleaseIntent(r.Context(), req)
		respond(w, ans, err)
	})
	return mux
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func respond(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b, err := contract.Encode(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
