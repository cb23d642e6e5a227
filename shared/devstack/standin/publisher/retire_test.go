package publisher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/store"
)

// Two runs of the same cleanup retire the same head concurrently; the one
// accepted first lets the name be re-created at once (its release came
// first). Whatever the interleaving, on the embedded stack's real
// conditional delete: both retirements are accepted or the slower one is a
// conflict naming incarnation 2, and incarnation 2's head is never removed.
func TestConcurrentRetirementsNeverRemoveTheRecreatedHead(t *testing.T) {
	st, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0", HoldS3Events: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	c := st.Clients()
	if _, err := c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("retire")}); err != nil {
		t.Fatal(err)
	}
	bucket := awsio.NewBucket(c.S3, "retire")
	pub := publisher.New(bucket, time.Now, publisher.Options{}, nil)
	pub.SetFacts(droppedFirst{}) // CCS dropped every name's first lifetime
	conflicts := 0
	for round := range 30 {
		name := "c" + string(rune('a'+round%26)) + string(rune('a'+round/26))
		h1, err := pub.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		req := contract.NewRetireRequest(h1)
		var wg sync.WaitGroup
		answers := make([]contract.RetireAnswer, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := pub.Retire(ctx, req)
				if err != nil {
					t.Error(err)
					return
				}
				answers[i] = a
				if i == 0 && a.Status == contract.RetireAccepted {
					if _, err := pub.CreateIncarnation(ctx, name, 2); err != nil && !errors.Is(err, publisher.ErrExists) {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if answers[0].Status != contract.RetireAccepted {
			t.Fatalf("round %d: the first run's retirement %+v", round, answers[0])
		}
		switch a := answers[1]; {
		case a.Status == contract.RetireConflict && a.HeadIncarnation == 2:
			conflicts++
		case a.Status != contract.RetireAccepted:
			t.Fatalf("round %d: the second run's retirement %+v", round, a)
		}
		b, err := bucket.Get(ctx, contract.HeadKey(name))
		if errors.Is(err, store.ErrNotFound) {
			t.Fatalf("round %d: incarnation 2's head was removed (answers %+v)", round, answers)
		}
		if h, err := contract.DecodeHead(name, b); err != nil || h.Inc() != 2 {
			t.Fatalf("round %d: head %+v %v", round, h, err)
		}
	}
	t.Logf("30 rounds, %d answered conflict (the re-created head was there first)", conflicts)
}

// droppedFirst is a CCS whose every collection's first lifetime is dropped.
type droppedFirst struct{}

func (droppedFirst) Facts(_ context.Context, c string) (contract.CollectionFacts, error) {
	return contract.CollectionFacts{Collection: c, FactsVersion: 2, Tombstoned: true}, nil
}
