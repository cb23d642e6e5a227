package compact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/resources"
)

// slowObjects is the embedded stack's bucket whose every ranged read takes
// `step` of the test clock: a merge that reads many blocks before it
// finishes its one output runs for many heartbeat intervals.
type slowObjects struct {
	*awsio.Bucket
	clock *stepClock
	step  time.Duration
	// lateReads counts reads made after the stored lease had expired.
	store     *awsio.LeaseTable
	taskID    string
	lateReads int
	reads     int
}

func (s *slowObjects) ReaderAt(ctx context.Context, key string, size int64) io.ReaderAt {
	return slowReader{s: s, r: s.Bucket.ReaderAt(ctx, key, size)}
}

type slowReader struct {
	s *slowObjects
	r io.ReaderAt
}

func (r slowReader) ReadAt(p []byte, off int64) (int, error) {
	now := r.s.clock.Advance(r.s.step)
	r.s.clock.mu.Lock()
	r.s.reads++
	if st, ok, err := r.s.store.Get(context.Background(), r.s.taskID); err != nil || !ok || st.Lease.LeaseExpiryUnixMs <= now.UnixMilli() {
		r.s.lateReads++
	}
	r.s.clock.mu.Unlock()
	return r.r.ReadAt(p, off)
}

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// smallReads makes the fixture's 2 MiB inputs take many reads (64 KiB
// ranges), so that a merge reads for many heartbeat intervals.
var smallReads = segment.ReadOptions{RangeBytes: 64 << 10}

func heartbeatFixture(t *testing.T) (*awsio.Bucket, *awsio.LeaseTable, []contract.ObjectEntry) {
	t.Helper()
	stack, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	ctx := context.Background()
	cl := stack.Clients()
	if _, err := cl.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("hbdata")}); err != nil {
		t.Fatal(err)
	}
	bucket := awsio.NewBucket(cl.S3, "hbdata")
	def := resources.Default("hbtest")
	if _, err := localaws.Provision(ctx, cl, def, localaws.ProvisionOptions{}); err != nil {
		t.Fatal(err)
	}
	var inputs []contract.ObjectEntry
	for i := range 4 {
		body := benchInput(i, 4, 2<<20)
		key := contract.AppendSegmentKey(benchCollection, 1, 1, i)
		if _, err := bucket.Put(ctx, key, body); err != nil {
			t.Fatal(err)
		}
		r, err := segment.Open(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, benchEntry(key, body, r))
	}
	return bucket, awsio.NewLeaseTable(cl.Dynamo, def.Table.Name), inputs
}

// A merge that writes one output but reads for many heartbeat intervals
// keeps its lease: the keeper extends it while the merge reads, so no read
// happens after the stored lease expired. Without the heartbeat during the
// merge (only after each output) the lease expires mid-merge.
func TestLongMergeHeartbeatsWhileReading(t *testing.T) {
	for _, tc := range []struct {
		name      string
		duringRun bool
	}{{"heartbeat while reading", true}, {"heartbeat only per output", false}} {
		t.Run(tc.name, func(t *testing.T) {
			bucket, table, inputs := heartbeatFixture(t)
			ctx := context.Background()
			clock := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			task := benchTask()
			objs := &slowObjects{Bucket: bucket, clock: clock, step: 5 * time.Second, store: table, taskID: task.TaskID}
			leases := lease.New(table, guard.All())
			e := NewExecutor(objs, leases, nil, nil, clock.Now,
				ExecConfig{Policy: Policy{TargetObjectBytes: 1 << 30}, LeaseDuration: time.Minute, Heartbeat: 20 * time.Second, Guards: guard.All(),
					Read: smallReads}, nil, nil)
			ls, err := leases.Acquire(ctx, task, "A", clock.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			every := 20 * time.Second
			if !tc.duringRun {
				every = 1000 * time.Hour // the keeper never finds a heartbeat due: only Force after an output
			}
			keep, err := lease.NewKeeper(leases, ls, task, clock.Now, clock.Now(), every, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			added, _, err := e.merge(ctx, task, keep, Job{Tier: contract.TierHot, Inputs: inputs, OutputLevel: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d outputs, %d reads over %s, %d reads after the lease expired", len(added), objs.reads, time.Duration(objs.reads)*objs.step, objs.lateReads)
			if len(added) != 1 || time.Duration(objs.reads)*objs.step < 3*time.Minute {
				t.Fatalf("fixture: want one output over more than 3 lease durations of reads, got %d outputs over %d reads", len(added), objs.reads)
			}
			if late := objs.lateReads > 0; late == tc.duringRun {
				t.Fatalf("reads after the lease expired: %d (heartbeat while reading %v)", objs.lateReads, tc.duringRun)
			}
		})
	}
}

// A lease lost during a long merge stops the merge at its next read with
// ErrLost (a *lease.LostError), before it writes an output.
func TestLeaseLostMidMergeStopsTheMerge(t *testing.T) {
	bucket, table, inputs := heartbeatFixture(t)
	ctx := context.Background()
	clock := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	task := benchTask()
	objs := &slowObjects{Bucket: bucket, clock: clock, step: 5 * time.Second, store: table, taskID: task.TaskID}
	leases := lease.New(table, guard.All())
	e := NewExecutor(objs, leases, nil, nil, clock.Now,
		ExecConfig{Policy: Policy{TargetObjectBytes: 1 << 30}, LeaseDuration: time.Minute, Heartbeat: 20 * time.Second, Guards: guard.All(),
			Read: smallReads}, nil, nil)
	ls, err := leases.Acquire(ctx, task, "A", clock.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := lease.NewKeeper(leases, ls, task, clock.Now, clock.Now(), 20*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A's lease expires without a heartbeat (A was paused) and B takes the task.
	clock.Advance(61 * time.Second)
	if _, err := leases.Acquire(ctx, task, "B", clock.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	added, _, err := e.merge(ctx, task, keep, Job{Tier: contract.TierHot, Inputs: inputs, OutputLevel: 1}, nil)
	var lost *lease.LostError
	if !errors.Is(err, lease.ErrLost) || !errors.As(err, &lost) || lost.Holder != "A" || len(added) != 0 {
		t.Fatalf("merge after losing the lease: %v (%d outputs), want a LostError of A and no output", err, len(added))
	}
	if objs.reads*int(objs.step/time.Second) > 60 {
		t.Fatalf("the merge read for %d reads after losing its lease", objs.reads)
	}
}

// A lease is refused for another task (ErrScope) before anything is written.
func TestKeeperRefusesALeaseOfAnotherTask(t *testing.T) {
	_, table, _ := heartbeatFixture(t)
	leases := lease.New(table, guard.All())
	task := benchTask()
	ls, err := leases.Acquire(context.Background(), task, "A", time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other := contract.NewTask(contract.KindCompaction, "other", 9, task.BaseManifestChecksum, 0, 0)
	_, err = lease.NewKeeper(leases, ls, other, time.Now, time.Now(), time.Second, time.Minute)
	var se *lease.ScopeError
	if !errors.Is(err, lease.ErrScope) || !errors.As(err, &se) || se.Field != "task_id" {
		t.Fatalf("keeper for another task: %v, want ErrScope on task_id", err)
	}
}
