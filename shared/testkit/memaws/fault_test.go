package memaws_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
	"github.com/searchfabric/bcc/shared/testkit/memaws"
)

// Every fault answers with the error the SDK would return, and awsio's
// translate maps it as it maps the real one: a refused write is throttled
// or ambiguous, an applied write whose answer was lost is ambiguous (and
// applied), a read is never ambiguous.
func TestFaultsTranslateAsRealErrors(t *testing.T) {
	cases := []struct {
		f          memaws.Fault
		writeIs    error // what a failed write wraps (nil: it succeeds)
		applied    bool
		readIs     error // what a failed read wraps (nil: not a store outcome)
		readFailed bool
	}{
		{memaws.None, nil, true, nil, false},
		{memaws.Throttle, store.ErrThrottled, false, store.ErrThrottled, true},
		{memaws.ServerError, store.ErrAmbiguous, false, nil, true},
		{memaws.Timeout, store.ErrAmbiguous, false, nil, true},
		{memaws.AppliedTimeout, store.ErrAmbiguous, true, nil, true},
		{memaws.AppliedServerError, store.ErrAmbiguous, true, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.f.String(), func(t *testing.T) {
			clk := &clock{t: time.Unix(1_760_000_000, 0)}
			s := memaws.NewS3(clk.Now)
			if _, err := s.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("b")}); err != nil {
				t.Fatal(err)
			}
			var changes int
			s.Hooks = memaws.Hooks{
				Fault:   func(c memaws.Call) memaws.Fault { return tc.f },
				Applied: func(memaws.Change) { changes++ },
			}
			bk := awsio.NewBucket(s, "b")
			_, err := bk.Put(ctx, "k", []byte("v"))
			if tc.writeIs == nil && err != nil || tc.writeIs != nil && !errors.Is(err, tc.writeIs) {
				t.Fatalf("write: %v, want %v", err, tc.writeIs)
			}
			if got := s.Exists("b", "k"); got != tc.applied || (changes == 1) != tc.applied {
				t.Fatalf("applied %v (hook saw %d), want %v", got, changes, tc.applied)
			}
			_, err = bk.Get(ctx, "k")
			switch {
			case !tc.readFailed && err != nil && !errors.Is(err, store.ErrNotFound):
				t.Fatalf("read: %v", err)
			case tc.readFailed && err == nil:
				t.Fatal("read succeeded under a fault")
			case errors.Is(err, store.ErrAmbiguous):
				t.Fatalf("a read is never ambiguous: %v", err)
			case tc.readIs != nil && !errors.Is(err, tc.readIs):
				t.Fatalf("read: %v, want %v", err, tc.readIs)
			}
		})
	}
}

// AppliedRetried: the write takes effect and the SDK's retry of the same
// request answers, so a conditional write fails on the caller's own first
// attempt (rule 13's situation), in every service.
func TestAppliedRetriedAnswersWithTheRetry(t *testing.T) {
	clk := &clock{t: time.Unix(1_760_000_000, 0)}
	s := memaws.NewS3(clk.Now)
	if _, err := s.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("b")}); err != nil {
		t.Fatal(err)
	}
	s.Hooks.Fault = func(memaws.Call) memaws.Fault { return memaws.AppliedRetried }
	if _, err := awsio.NewBucket(s, "b").PutIfAbsent(ctx, "head", []byte("v1")); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("retried If-None-Match: %v, want 412 from the retry", err)
	}
	if b, ok := s.Peek("b", "head"); !ok || string(b) != "v1" {
		t.Fatal("the first attempt was not applied")
	}

	d := memaws.NewDynamo()
	newTable(t, backend{ddb: d})
	d.Hooks.Fault = func(memaws.Call) memaws.Fault { return memaws.AppliedRetried }
	lt := awsio.NewLeaseTable(d, "coord")
	want := contract.Lease{TaskID: "t", Holder: "me", LeaseExpiryUnixMs: 2000}
	_, cur, err := lt.Acquire(ctx, want, 1000, true)
	if !errors.Is(err, store.ErrConditionFailed) || cur.Lease.Holder != "me" || cur.Lease.LeaseEpoch != 1 {
		t.Fatalf("retried acquire: %+v %v, want the condition to fail on our own epoch-1 lease", cur, err)
	}

	q := memaws.NewSQS(clk.Now)
	url := newFIFO(t, backend{sqs: q}, "retry", 0)
	q.Hooks.Fault = func(memaws.Call) memaws.Fault { return memaws.AppliedRetried }
	if err := awsio.NewFIFOQueues(q, map[string]string{"c": url}).Send(ctx, "c", []awsio.Message{{Group: "g", DedupID: "d", Body: []byte("x")}}); err != nil {
		t.Fatalf("retried send: %v (the retry is deduplicated)", err)
	}
	if n := q.Len(url); n != 1 {
		t.Fatalf("%d messages after a retried send, want 1", n)
	}
}
