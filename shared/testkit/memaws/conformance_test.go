package memaws_test

// Conformance: the same cases run against memaws and against the embedded
// stack (shared/devstack/localaws: gofakes3, minidyn's server, sqsd)
// through the real SDK, so the simulation's AWS behaves like the one the
// end-to-end tests and `make demo` use (and both like AWS where tested).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
	"github.com/searchfabric/bcc/shared/store"
	"github.com/searchfabric/bcc/shared/testkit/memaws"
)

// S3API is what the S3 cases need of a client.
type S3API interface {
	awsio.S3API
	awsio.MultipartAPI
	CreateBucket(ctx context.Context, in *s3.CreateBucketInput, opts ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
}

// DynamoAPI is what the DynamoDB cases need of a client.
type DynamoAPI interface {
	awsio.DynamoAPI
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// SQSAPI is what the SQS cases need of a client.
type SQSAPI interface {
	awsio.SQSAPI
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, opts ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type backend struct {
	name  string
	s3    S3API
	ddb   DynamoAPI
	sqs   SQSAPI
	clock *clock // SQS's clock
}

// each runs a case against memaws and against the embedded stack.
func each(t *testing.T, run func(t *testing.T, b backend)) {
	t.Run("memaws", func(t *testing.T) {
		clk := &clock{t: time.Unix(1_760_000_000, 0)}
		run(t, backend{name: "memaws", s3: memaws.NewS3(clk.Now), ddb: memaws.NewDynamo(), sqs: memaws.NewSQS(clk.Now), clock: clk})
	})
	t.Run("embedded", func(t *testing.T) {
		st, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		cl := st.Clients()
		// SQS on its own sqsd with a clock the test moves (the stack's
		// runs on wall time).
		clk := &clock{t: time.Unix(1_760_000_000, 0)}
		var url string
		srv := httptest.NewServer(sqsd.New(sqsd.Options{Now: clk.Now, BaseURL: func() string { return url }}))
		url = srv.URL
		t.Cleanup(srv.Close)
		run(t, backend{name: "embedded", s3: cl.S3, ddb: cl.Dynamo, sqs: sqs.NewFromConfig(localaws.Config(srv.URL)), clock: clk})
	})
}

var ctx = context.Background()

// knownDivergences are where the embedded stack answers differently from
// AWS (and memaws); the cases log them instead of failing, so they stay
// visible. None of them is read by the coordinator's adapters.
var knownDivergences = map[string]string{
	"s3-delete-1001": "gofakes3 accepts a DeleteObjects of more than 1,000 keys (S3: MalformedXML); awsio never sends one",
	"ddb-put-attrs":  "minidyn's server answers PutItem with the item when ReturnValues is NONE (DynamoDB: nothing); awsio ignores PutItem's output",
	"ddb-put-ccf-item": "minidyn's server returns no item with a PutItem whose condition failed, even with ReturnValuesOnConditionCheckFailure ALL_OLD " +
		"(DynamoDB returns it); awsio reads the item only from UpdateItem",
}

// diverges reports (and logs) whether b is known to answer case differently.
func diverges(t *testing.T, b backend, name string) bool {
	t.Helper()
	if b.name == "embedded" {
		t.Logf("known divergence of the embedded stack: %s", knownDivergences[name])
		return true
	}
	return false
}

func newBucket(t *testing.T, b backend) *awsio.Bucket {
	t.Helper()
	if _, err := b.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("conf")}); err != nil {
		t.Fatal(err)
	}
	return awsio.NewBucket(b.s3, "conf")
}

func TestS3ConditionalWrites(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := newBucket(t, b)
		etag, err := bk.PutIfAbsent(ctx, "k", []byte("v1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bk.PutIfAbsent(ctx, "k", []byte("again")); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Fatalf("If-None-Match on an existing key: %v, want 412", err)
		}
		etag2, err := bk.PutIfMatch(ctx, "k", []byte("v2"), etag)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bk.PutIfMatch(ctx, "k", []byte("v3"), etag); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Fatalf("stale If-Match: %v, want 412", err)
		}
		if _, err := bk.PutIfMatch(ctx, "missing", []byte("x"), etag2); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("If-Match on a missing key: %v, want 404 (S3's answer)", err)
		}
		got, gotTag, err := bk.GetWithETag(ctx, "k")
		if err != nil || string(got) != "v2" || gotTag != etag2 {
			t.Fatalf("read back %q %q %v, want v2 %q", got, gotTag, err, etag2)
		}
	})
}

func TestS3ConditionalRaceHasExactlyOneWinner(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := newBucket(t, b)
		etag, err := bk.Put(ctx, "head", []byte("v0"))
		if err != nil {
			t.Fatal(err)
		}
		var wins, lost atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				_, err := bk.PutIfMatch(ctx, "head", []byte(fmt.Sprintf("v1-%d", i)), etag)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, store.ErrPreconditionFailed):
					lost.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || lost.Load() != 7 {
			t.Fatalf("%d winners, %d losers; want exactly one winner", wins.Load(), lost.Load())
		}
	})
}

func TestS3ReadsDeletesAndListing(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := newBucket(t, b)
		for i := range 7 {
			if _, err := bk.Put(ctx, fmt.Sprintf("p/%d", i), []byte(strings.Repeat(strconv.Itoa(i), 10))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := bk.Put(ctx, "q/other", []byte("x")); err != nil {
			t.Fatal(err)
		}
		r := make([]byte, 4)
		if n, err := bk.ReadRange(ctx, "p/3", 2, r); err != nil || n != 4 || string(r) != "3333" {
			t.Fatalf("ranged GET: %q %v", r, err)
		}
		tail := make([]byte, 3)
		if n, err := bk.ReaderAt(ctx, "p/3", 10).ReadAt(tail, 8); n != 2 || string(tail[:n]) != "33" || err == nil {
			t.Fatalf("ranged read past the end: %d %q %v", n, tail[:n], err)
		}
		if _, err := bk.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GET missing: %v", err)
		}
		if _, err := bk.Size(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("HEAD missing: %v", err)
		}
		if n, err := bk.Size(ctx, "p/1"); err != nil || n != 10 {
			t.Fatalf("HEAD: %d %v", n, err)
		}
		// ListObjectsV2 pages by MaxKeys with continuation tokens.
		var pages []int
		in := &s3.ListObjectsV2Input{Bucket: aws.String("conf"), Prefix: aws.String("p/"), MaxKeys: aws.Int32(3)}
		var keys []string
		for {
			out, err := b.s3.ListObjectsV2(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, len(out.Contents))
			for _, o := range out.Contents {
				keys = append(keys, aws.ToString(o.Key))
			}
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			in.ContinuationToken = out.NextContinuationToken
		}
		if fmt.Sprint(pages) != "[3 3 1]" || strings.Join(keys, ",") != "p/0,p/1,p/2,p/3,p/4,p/5,p/6" {
			t.Fatalf("pages %v keys %v", pages, keys)
		}
		// DeleteObjects: a result per key; a missing key counts as deleted.
		var ids []s3types.ObjectIdentifier
		for _, k := range []string{"p/0", "p/1", "never-existed"} {
			ids = append(ids, s3types.ObjectIdentifier{Key: aws.String(k)})
		}
		res, err := b.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("conf"), Delete: &s3types.Delete{Objects: ids}})
		if err != nil || len(res.Deleted) != 3 || len(res.Errors) != 0 {
			t.Fatalf("delete batch: %+v %v", res, err)
		}
		ls, err := bk.List(ctx, "p/")
		if err != nil || len(ls) != 5 || ls[0].Key != "p/2" {
			t.Fatalf("list after delete: %+v %v", ls, err)
		}
		if err := bk.Delete(ctx, "never-existed"); err != nil {
			t.Fatalf("DeleteObject of a missing key: %v", err)
		}
		ids = make([]s3types.ObjectIdentifier, 1001)
		for i := range ids {
			ids[i] = s3types.ObjectIdentifier{Key: aws.String(fmt.Sprintf("x/%d", i))}
		}
		if _, err := b.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("conf"), Delete: &s3types.Delete{Objects: ids}}); err == nil && !diverges(t, b, "s3-delete-1001") {
			t.Fatal("DeleteObjects of 1001 keys was accepted")
		}
	})
}

func TestS3MultipartUpload(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := newBucket(t, b)
		up, err := bk.Create(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte("0123456789abcdef"), (awsio.PartSize*2+1000)/16)
		if _, err := up.Write(want); err != nil {
			t.Fatal(err)
		}
		if err := up.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := bk.Get(ctx, "big")
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("multipart object: %d bytes, %v (want %d)", len(got), err, len(want))
		}
		// An aborted upload leaves nothing.
		up, _ = bk.Create(ctx, "aborted")
		_, _ = up.Write(want[:awsio.PartSize+10])
		if err := up.Abort(); err != nil {
			t.Fatal(err)
		}
		if _, err := bk.Get(ctx, "aborted"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("aborted upload left an object: %v", err)
		}
	})
}

func newTable(t *testing.T, b backend) {
	t.Helper()
	_, err := b.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("coord"), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The lease table's conditions, and what a failed condition returns, as
// awsio reads them.
func TestDynamoLeaseConditions(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		newTable(t, b)
		lt := awsio.NewLeaseTable(b.ddb, "coord")
		want := contract.Lease{TaskID: "t1", Kind: contract.KindCompaction, Collection: "c", BaseManifestVersion: 3, BaseManifestChecksum: "sha256:x",
			Holder: "w1", LeaseExpiryUnixMs: 2000, AcquiredAtUnixMs: 1000}
		got, _, err := lt.Acquire(ctx, want, 1000, true)
		if err != nil || got.LeaseEpoch != 1 || got.Holder != "w1" {
			t.Fatalf("first acquire: %+v %v", got, err)
		}
		w2 := want
		w2.Holder, w2.LeaseExpiryUnixMs = "w2", 3000
		_, cur, err := lt.Acquire(ctx, w2, 1500, true)
		if !errors.Is(err, store.ErrConditionFailed) || cur.Lease.Holder != "w1" || cur.Lease.LeaseEpoch != 1 || cur.Done {
			t.Fatalf("acquire of a live lease: %+v %v, want the condition to fail and return w1's lease", cur, err)
		}
		if err := lt.Extend(ctx, "t1", "w2", 1, 1600, 5000, true); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("extend by another holder: %v", err)
		}
		got, _, err = lt.Acquire(ctx, w2, 2500, true) // expired
		if err != nil || got.LeaseEpoch != 2 || got.Holder != "w2" {
			t.Fatalf("acquire after expiry: %+v %v", got, err)
		}
		if err := lt.Extend(ctx, "t1", "w1", 1, 2600, 9000, true); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("extend by the previous holder: %v", err)
		}
		if err := lt.Complete(ctx, "t1", "w2", 2, 2600, true); err != nil {
			t.Fatal(err)
		}
		w3 := want
		w3.Holder = "w3"
		if _, cur, err := lt.Acquire(ctx, w3, 99_000, true); !errors.Is(err, store.ErrConditionFailed) || !cur.Done {
			t.Fatalf("acquire of a finished task: %+v %v, want the condition to fail with done", cur, err)
		}
		if st, ok, err := lt.Get(ctx, "t1"); err != nil || !ok || !st.Done || st.Lease.LeaseEpoch != 2 {
			t.Fatalf("get: %+v %v %v", st, ok, err)
		}
		var _ lease.Store = lt
	})
}

func TestDynamoObservedStateConditions(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		newTable(t, b)
		ot := awsio.NewObservedTable(b.ddb, "coord")
		st := func(v uint64, gc int64) observe.Observed {
			return observe.Observed{Collection: "c", Version: v, Checksum: fmt.Sprintf("sha256:%d", v), ObservedAtUnixMs: 1000,
				Debt: observe.Debt{GCObjects: gc, GCBytes: gc * 10, GCDueAtUnixMs: 5000 + int64(v)}}
		}
		if prev, err := ot.Advance(ctx, st(1, 0)); err != nil || prev.Version != 0 {
			t.Fatalf("first advance: %+v %v", prev, err)
		}
		if prev, err := ot.Advance(ctx, st(2, 3)); err != nil || prev.Version != 1 {
			t.Fatalf("advance: %+v %v", prev, err)
		}
		if prev, err := ot.Advance(ctx, st(4, 2)); err != nil || prev.Version != 2 {
			t.Fatalf("advance: %+v %v", prev, err)
		}
		prev, err := ot.Advance(ctx, st(3, 1))
		if !errors.Is(err, store.ErrConditionFailed) || prev.Version != 4 || prev.Checksum != "sha256:4" {
			t.Fatalf("stale advance: %+v %v, want the condition to fail and return v4", prev, err)
		}
		got, err := ot.Get(ctx, "c", 1)
		if err != nil || got.Version != 4 || got.Debt.GCObjects != 5 || got.Debt.GCDueAtUnixMs != 5002 {
			t.Fatalf("state: %+v %v (GC debt accumulates, due time is the first)", got, err)
		}
		// A due time recorded earlier but later than the new debt's (a
		// sweep that saw a young never-committed output records its reclaim
		// grace) is lowered: the recorded due is the earliest.
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 4, RemainingObjects: 1, NextDueUnixMs: 90_000, SweptAtUnixMs: 6000}); err != nil {
			t.Fatal(err)
		}
		later := st(5, 2)
		later.Debt.GCDueAtUnixMs = 7000
		if _, err := ot.Advance(ctx, later); err != nil {
			t.Fatal(err)
		}
		if got, err := ot.Get(ctx, "c", 1); err != nil || got.Version != 5 || got.Debt.GCObjects != 3 || got.Debt.GCDueAtUnixMs != 7000 {
			t.Fatalf("state: %+v %v (the recorded due 90000 is later than the new debt's 7000: want 7000)", got, err)
		}
		// An earlier recorded due stays (the new debt's is later).
		after := st(6, 1)
		after.Debt.GCDueAtUnixMs = 8000
		if _, err := ot.Advance(ctx, after); err != nil {
			t.Fatal(err)
		}
		if got, err := ot.Get(ctx, "c", 1); err != nil || got.Debt.GCObjects != 4 || got.Debt.GCDueAtUnixMs != 7000 {
			t.Fatalf("state: %+v %v (want the earliest due 7000 kept)", got, err)
		}
		if err := ot.Revert(ctx, st(3, 0), st(2, 0)); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("revert of a state not held: %v", err)
		}
		if err := ot.Revert(ctx, st(6, 0), observe.Observed{}); err != nil {
			t.Fatal(err)
		}
		if got, err := ot.Get(ctx, "c", 1); err != nil || got.Version != 0 {
			t.Fatalf("after reverting the first state: %+v %v", got, err)
		}
	})
}

// A finished sweep with nothing left due clears gc_due_at (an UpdateItem
// REMOVE, which minidyn alone kept).
func TestDynamoSweepRecordClearsTheDueTime(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		newTable(t, b)
		ot := awsio.NewObservedTable(b.ddb, "coord")
		if _, err := ot.Advance(ctx, observe.Observed{Collection: "c", Version: 1, Checksum: "sha256:1", ObservedAtUnixMs: 1000,
			Debt: observe.Debt{GCObjects: 3, GCDueAtUnixMs: 5000}}); err != nil {
			t.Fatal(err)
		}
		// A sweep that judged another head than the recorded one replaces
		// nothing (the recorded debt may hold what it never saw): the
		// answer names the head the state holds, for the sweep to carry
		// its record forward. So does another checksum at the version.
		var moved *gc.SweptHeadMovedError
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 2, SweptAtUnixMs: 5500}); !errors.As(err, &moved) || moved.Version != 1 || moved.Checksum != "sha256:1" {
			t.Fatalf("record for v2 over a state at v1: %v, want SweptHeadMovedError naming v1 sha256:1", err)
		}
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 1, HeadChecksum: "sha256:other", SweptAtUnixMs: 5500}); !errors.As(err, &moved) || moved.Version != 1 {
			t.Fatalf("record for v1 of another checksum: %v, want SweptHeadMovedError", err)
		}
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "gone", Incarnation: 1, HeadVersion: 1, SweptAtUnixMs: 5500}); err != nil {
			t.Fatalf("record over no state (wiped): %v, want nil", err)
		}
		if got, err := ot.Get(ctx, "c", 1); err != nil || got.Debt.GCObjects != 3 || got.Debt.GCDueAtUnixMs != 5000 {
			t.Fatalf("after a sweep of another head: %+v %v, want the debt kept", got.Debt, err)
		}
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 1, RetentionObjects: 2, RetentionDueUnixMs: 9000, SweptAtUnixMs: 6000}); err != nil {
			t.Fatal(err)
		}
		got, err := ot.Get(ctx, "c", 1)
		if err != nil || got.Debt.GCDueAtUnixMs != 0 || got.Debt.GCObjects != 0 || got.Debt.GCSweptAtUnixMs != 6000 {
			t.Fatalf("after a sweep that left nothing: %+v %v, want no due time", got.Debt, err)
		}
		if got.Debt.RetentionObjects != 2 || got.Debt.RetentionDueAtUnixMs != 9000 {
			t.Fatalf("after a sweep that left a retention window: %+v, want 2 objects due at 9000", got.Debt)
		}
	})
}

// A sweep record carried forward with the state's totals (gc.SweepRecord
// Added) lands at its head and at every later one: the debt the advances
// added after the totals is kept by difference (one conditional write,
// if_not_exists and subtraction in SET), and the write says when advances
// raced it so that the caller lowers the due time (LowerGCDue).
func TestDynamoCountedSweepRecordKeepsLaterDebt(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		newTable(t, b)
		ot := awsio.NewObservedTable(b.ddb, "coord")
		adv := func(v uint64, gc int64, due int64) {
			t.Helper()
			if _, err := ot.Advance(ctx, observe.Observed{Collection: "c", Version: v, Checksum: fmt.Sprintf("sha256:%d", v), ObservedAtUnixMs: 1000,
				Debt: observe.Debt{GCObjects: gc, GCBytes: gc * 10, GCDueAtUnixMs: due}}); err != nil {
				t.Fatal(err)
			}
		}
		adv(1, 0, 0) // no totals yet: an absent total counts as 0
		var moved *gc.SweptHeadMovedError
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 2, SweptAtUnixMs: 1}); !errors.As(err, &moved) || moved.Added != (gc.AddedTotals{}) {
			t.Fatalf("record over v1: %v, want SweptHeadMovedError with no totals", err)
		}
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 1, HeadChecksum: "sha256:1", RemainingObjects: 1, RemainingBytes: 10,
			NextDueUnixMs: 4000, SweptAtUnixMs: 2, Added: &moved.Added}); err != nil {
			t.Fatalf("counted record at its head over absent totals: %v", err)
		}
		adv(2, 3, 5000)
		adv(3, 2, 6000)
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 2, SweptAtUnixMs: 3}); !errors.As(err, &moved) || moved.Version != 3 || moved.Added != (gc.AddedTotals{Objects: 5, Bytes: 50}) {
			t.Fatalf("record for v2 over v3: %v, want SweptHeadMovedError naming v3 with totals 5 objects, 50 bytes", err)
		}
		totals := moved.Added
		adv(4, 4, 7000) // the writer commits again before the carried record lands
		var raced *gc.SweepRecordRacedError
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 3, HeadChecksum: "sha256:3", RemainingObjects: 2, RemainingBytes: 20,
			NextDueUnixMs: 6000, SweptAtUnixMs: 4, Added: &totals}); !errors.As(err, &raced) || raced.Version != 4 || raced.Checksum != "sha256:4" {
			t.Fatalf("counted record for v3 over v4: %v, want it landed and SweepRecordRacedError naming v4", err)
		}
		got, err := ot.Get(ctx, "c", 1)
		if err != nil || got.Version != 4 || got.Debt.GCObjects != 6 || got.Debt.GCBytes != 60 || got.Debt.GCSweptAtUnixMs != 4 || got.Debt.GCDueAtUnixMs != 6000 {
			t.Fatalf("after the counted record: %+v %v, want v4 with 2 left + 4 added later = 6 objects (60 bytes), swept at 4, due 6000", got.Debt, err)
		}
		if err := ot.LowerGCDue(ctx, "c", 1, 5500); err != nil {
			t.Fatal(err)
		}
		if err := ot.LowerGCDue(ctx, "c", 1, 9000); err != nil {
			t.Fatal(err)
		}
		if got, err := ot.Get(ctx, "c", 1); err != nil || got.Debt.GCDueAtUnixMs != 5500 {
			t.Fatalf("after lowering to 5500 then 9000: %+v %v, want 5500", got.Debt, err)
		}
		// A counted record for a head the state went back from is refused.
		if err := ot.RecordGCSweep(ctx, gc.SweepRecord{Collection: "c", Incarnation: 1, HeadVersion: 5, HeadChecksum: "sha256:5", SweptAtUnixMs: 5, Added: &totals}); !errors.As(err, &moved) || moved.Version != 4 {
			t.Fatalf("counted record for v5 over v4: %v, want SweptHeadMovedError naming v4", err)
		}
		if err := ot.LowerGCDue(ctx, "gone", 1, 1); err != nil {
			t.Fatalf("lowering over no state: %v", err)
		}
		if got, err := ot.Get(ctx, "gone", 1); err != nil || got.Version != 0 {
			t.Fatalf("lowering over no state created %+v %v", got, err)
		}
	})
}

func TestDynamoRawAnswers(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		newTable(t, b)
		key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "b"}}
		item := map[string]ddbtypes.AttributeValue{"pk": key["pk"], "sk": key["sk"], "n": &ddbtypes.AttributeValueMemberN{Value: "1"}}
		out, err := b.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("coord"), Item: item})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Attributes) != 0 && !diverges(t, b, "ddb-put-attrs") {
			t.Fatalf("PutItem answers %v, want no attributes", out.Attributes)
		}
		_, err = b.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("coord"), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)"), ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld})
		var ccf *ddbtypes.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("failed conditional put: %v", err)
		}
		if len(ccf.Item) == 0 && !diverges(t, b, "ddb-put-ccf-item") {
			t.Fatalf("failed conditional put: %v, want the old item", err)
		}
		missing := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "none"}, "sk": key["sk"]}
		_, err = b.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("coord"), Key: missing,
			UpdateExpression: aws.String("SET n = :one"), ConditionExpression: aws.String("attribute_exists(pk)"),
			ExpressionAttributeValues:           map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
			ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld})
		if !errors.As(err, &ccf) || len(ccf.Item) != 0 {
			t.Fatalf("failed conditional update of a missing item: %v (item %v), want no item", err, ccf)
		}
		if g, err := b.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("coord"), Key: missing}); err != nil || len(g.Item) != 0 {
			t.Fatalf("the failed update created %v %v", g.Item, err)
		}
		_, err = b.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("coord"), Key: key,
			ConditionExpression: aws.String("n = :two"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":two": &ddbtypes.AttributeValueMemberN{Value: "2"}}})
		if !errors.As(err, &ccf) {
			t.Fatalf("failed conditional delete: %v", err)
		}
		if _, err := b.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("coord"), Key: key}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("coord"), Key: key}); err != nil {
			t.Fatalf("delete of a missing item: %v", err)
		}
	})
}

func newFIFO(t *testing.T, b backend, name string, redrive int) string {
	t.Helper()
	attrs := map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"}
	if redrive > 0 {
		dlq, err := b.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq.fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := b.sqs.(interface {
			GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
		}).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, a.Attributes["QueueArn"], redrive)
	}
	out, err := b.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + ".fifo"), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func send(t *testing.T, b backend, url string, msgs ...[3]string) { // group, dedup, body
	t.Helper()
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i, m := range msgs {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageGroupId: aws.String(m[0]),
			MessageDeduplicationId: aws.String(m[1]), MessageBody: aws.String(m[2])})
	}
	out, err := b.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil || len(out.Failed) > 0 {
		t.Fatalf("send: %v %+v", err, out)
	}
}

func receive(t *testing.T, b backend, url string, max int32) []sqstypes.Message {
	t.Helper()
	out, err := b.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: max,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func bodies(ms []sqstypes.Message) string {
	var s []string
	for _, m := range ms {
		s = append(s, aws.ToString(m.Body))
	}
	return strings.Join(s, ",")
}

func TestSQSFIFOGroupsOrderAndBlocking(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		url := newFIFO(t, b, "order", 0)
		send(t, b, url, [3]string{"A", "a1", "a1"}, [3]string{"A", "a2", "a2"}, [3]string{"B", "b1", "b1"})
		first := receive(t, b, url, 1)
		if bodies(first) != "a1" {
			t.Fatalf("first receive %q, want a1", bodies(first))
		}
		// Group A is blocked while a1 is in flight: B's message comes next.
		if got := bodies(receive(t, b, url, 10)); got != "b1" {
			t.Fatalf("receive while a1 is in flight: %q, want b1", got)
		}
		if got := bodies(receive(t, b, url, 10)); got != "" {
			t.Fatalf("receive while both groups are in flight: %q", got)
		}
		if _, err := b.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: first[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		if got := bodies(receive(t, b, url, 10)); got != "a2" {
			t.Fatalf("after deleting a1: %q, want a2", got)
		}
	})
}

func TestSQSDeduplicationInterval(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		url := newFIFO(t, b, "dedup", 0)
		send(t, b, url, [3]string{"A", "same", "one"})
		send(t, b, url, [3]string{"A", "same", "two"}) // accepted, dropped
		b.clock.Advance(5*time.Minute + time.Second)
		send(t, b, url, [3]string{"A", "same", "three"}) // a new message
		got := receive(t, b, url, 10)
		if bodies(got) != "one,three" {
			t.Fatalf("received %q, want one,three (the duplicate inside the interval collapsed)", bodies(got))
		}
	})
}

func TestSQSVisibilityAndRedrive(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		url := newFIFO(t, b, "vis", 2)
		send(t, b, url, [3]string{"A", "m", "m"})
		m := receive(t, b, url, 1)
		if len(m) != 1 || m[0].Attributes["ApproximateReceiveCount"] != "1" {
			t.Fatalf("first receive %+v", m)
		}
		if got := receive(t, b, url, 1); len(got) != 0 {
			t.Fatal("an in-flight message was received again")
		}
		b.clock.Advance(31 * time.Second)
		m2 := receive(t, b, url, 1)
		if len(m2) != 1 || m2[0].Attributes["ApproximateReceiveCount"] != "2" {
			t.Fatalf("after the visibility timeout: %+v", m2)
		}
		// The stale receipt handle deletes nothing.
		if _, err := b.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m[0].ReceiptHandle}); err != nil {
			t.Fatalf("stale receipt: %v", err)
		}
		if _, err := b.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m2[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
		// Received twice (maxReceiveCount 2): the next receive redrives it.
		if got := receive(t, b, url, 1); len(got) != 0 {
			t.Fatalf("a message past maxReceiveCount was delivered: %+v", got)
		}
		dlq := strings.TrimSuffix(url, ".fifo") + "-dlq.fifo"
		if got := receive(t, b, dlq, 10); bodies(got) != "m" {
			t.Fatalf("DLQ holds %q, want m", bodies(got))
		}
	})
}

func TestSQSBatchLimits(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		url := newFIFO(t, b, "limits", 0)
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := range 11 {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageGroupId: aws.String("g"),
				MessageDeduplicationId: aws.String(strconv.Itoa(i)), MessageBody: aws.String("x")})
		}
		if _, err := b.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err == nil {
			t.Fatal("a batch of 11 entries was accepted")
		}
		// awsio splits into batches of ten.
		q := awsio.NewFIFOQueues(b.sqs, map[string]string{"c": url})
		var msgs []awsio.Message
		for i := range 23 {
			msgs = append(msgs, awsio.Message{Group: "g" + strconv.Itoa(i%3), DedupID: "d" + strconv.Itoa(i), Body: []byte("x")})
		}
		if err := q.Send(ctx, "c", msgs); err != nil {
			t.Fatal(err)
		}
	})
}
