package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/store"
	"github.com/searchfabric/bcc/shared/testkit/memaws"
)

// provision creates the deployment's bucket, table and queues in the
// in-memory AWS (as localaws.Provision does on the embedded stack), and
// the shipped adapters over them.
func (w *World) provision() error {
	d := w.def
	if _, err := w.s3.CreateBucket(w.ctx, &s3.CreateBucketInput{Bucket: aws.String(d.Bucket.Name)}); err != nil {
		return err
	}
	_, err := w.ddb.CreateTable(w.ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(d.Table.Name), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(d.Table.PartitionKey), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String(d.Table.SortKey), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String(d.Table.PartitionKey), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String(d.Table.SortKey), KeyType: ddbtypes.KeyTypeRange}},
	})
	if err != nil {
		return err
	}
	w.urls, w.dlqs = map[string]string{}, map[string]string{}
	for _, q := range d.Queues {
		dlq, err := w.sqs.CreateQueue(w.ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.DLQName), Attributes: map[string]string{"FifoQueue": "true"}})
		if err != nil {
			return err
		}
		out, err := w.sqs.CreateQueue(w.ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.Name), Attributes: map[string]string{
			"FifoQueue": "true", "VisibilityTimeout": strconv.Itoa(int(q.VisibilityTimeout / time.Second)),
			"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:%s","maxReceiveCount":%d}`, q.DLQName, q.MaxReceiveCount),
		}})
		if err != nil {
			return err
		}
		w.urls[q.Class], w.dlqs[q.Class] = aws.ToString(out.QueueUrl), aws.ToString(dlq.QueueUrl)
	}
	w.bucket = awsio.NewBucket(w.s3, d.Bucket.Name)
	w.peek = peekObjects{s3: w.s3, bucket: d.Bucket.Name}
	w.state = awsio.NewObservedTable(w.ddb, d.Table.Name)
	w.progress = awsio.NewProgressTable(w.ddb, d.Table.Name)
	w.leases = awsio.NewLeaseTable(w.ddb, d.Table.Name)
	w.queues = awsio.NewFIFOQueues(w.sqs, w.urls)
	return nil
}

// exists reports whether a data bucket key exists (no faults, no hooks).
func (w *World) exists(key string) bool { return w.s3.Exists(w.def.Bucket.Name, key) }

// peekObjects reads the data bucket without faults or hooks, for the
// invariant checks (they observe; they are not a function).
type peekObjects struct {
	s3     *memaws.S3
	bucket string
}

func (p peekObjects) Get(_ context.Context, key string) ([]byte, error) {
	b, ok := p.s3.Peek(p.bucket, key)
	if !ok {
		return nil, fmt.Errorf("peek %s: %w", key, store.ErrNotFound)
	}
	return b, nil
}

func (p peekObjects) Size(ctx context.Context, key string) (int64, error) {
	b, err := p.Get(ctx, key)
	return int64(len(b)), err
}

func (p peekObjects) ReaderAt(_ context.Context, key string, _ int64) io.ReaderAt {
	b, _ := p.s3.Peek(p.bucket, key)
	return bytes.NewReader(b)
}

// ---------------------------------------------------------------------------
// The lease contract, checked from outside: on the writes the table
// accepted, and on what a worker believes it holds.

// leaseItem is a lease record as stored (read here independently of the
// adapter's decoding, so that a misreading adapter cannot hide it).
type leaseItem struct {
	epoch            uint64
	holder           string
	expiry, acquired int64
	done             bool
}

func decodeLeaseItem(it map[string]ddbtypes.AttributeValue) (leaseItem, bool) {
	if len(it) == 0 {
		return leaseItem{}, false
	}
	n := func(k string) int64 {
		if v, ok := it[k].(*ddbtypes.AttributeValueMemberN); ok {
			x, _ := strconv.ParseInt(v.Value, 10, 64)
			return x
		}
		return 0
	}
	var l leaseItem
	l.epoch, l.expiry, l.acquired = uint64(n("epoch")), n("expiry"), n("acquired_at")
	if v, ok := it["holder"].(*ddbtypes.AttributeValueMemberS); ok {
		l.holder = v.Value
	}
	if v, ok := it["done"].(*ddbtypes.AttributeValueMemberBOOL); ok {
		l.done = v.Value
	}
	return l, true
}

func leaseKey(taskID string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "TASK#" + taskID}, "sk": &ddbtypes.AttributeValueMemberS{Value: "LEASE"}}
}

// checkLeaseWrite: a lease write the table accepted never takes a live or
// finished lease (a new epoch over a record that was done, or whose expiry
// was after the new holder's acquisition time).
func (w *World) checkLeaseWrite(ch memaws.Change) {
	if ch.Resource != w.def.Table.Name || !strings.HasPrefix(ch.Key, "TASK#") {
		return
	}
	old, had := decodeLeaseItem(ch.Old)
	cur, _ := decodeLeaseItem(ch.New)
	if !had || cur.epoch == old.epoch {
		return
	}
	switch {
	case old.done:
		w.violate("lease-exclusive", "%s was finished (epoch %d) and was leased again by %s", ch.Key, old.epoch, cur.holder)
	case old.expiry > cur.acquired:
		w.violate("lease-exclusive", "%s: %s took the lease while %s held it until %d (acquired at %d)", ch.Key, cur.holder, old.holder, old.expiry, cur.acquired)
	}
}

// checkedLeases is the executor's lease port: the real use case over the
// real adapter, and after every acquisition or heartbeat it reports as
// held, the table must say the same (holder, epoch, expiry, not done). An
// adapter that reads a failed condition as success is caught here.
type checkedLeases struct {
	w *World
	l *lease.Leases
}

func (c checkedLeases) Acquire(ctx context.Context, task contract.Task, holder string, now time.Time, d time.Duration) (contract.Lease, error) {
	got, err := c.l.Acquire(ctx, task, holder, now, d)
	if errors.Is(err, lease.ErrHeld) {
		// Invariant own-write (rule 13): a worker is never told that the
		// lease it just wrote (this very acquire, applied and retried by
		// the SDK) is somebody else's; it would drop the task unrun.
		it, ok := decodeLeaseItem(c.w.ddb.Item(c.w.def.Table.Name, leaseKey(task.TaskID)))
		if ok && !it.done && it.holder == holder && it.acquired == now.UnixMilli() && it.expiry == now.Add(d).UnixMilli() {
			c.w.violate("own-write", "%s was told the lease of %s is held by another holder, but the table holds its own acquire (epoch %d): the task is dropped unrun",
				holder, task.TaskID, it.epoch)
		}
	}
	if err == nil {
		if got.Holder != holder {
			c.w.violate("lease-exclusive", "%s acquired the lease of %s, but the lease it got is %s's (epoch %d until %d)",
				holder, task.TaskID, got.Holder, got.LeaseEpoch, got.LeaseExpiryUnixMs)
			return got, err
		}
		c.w.checkBelief("acquired", got)
		c.w.checkIdleRun(task)
	}
	return got, err
}

// maxIdleRuns bounds the compaction tasks planned against one head with
// nothing to compact that may lease it in the quiescent phase: the
// observer's, and one more when the first ran before the observed state
// recorded the head (its idle record then names no recorded head) or its
// facts changed meanwhile.
const maxIdleRuns = 3

// compactionMsg is the compaction message a compaction invocation handles:
// its SQS message id, the task it carries and when it was sent (simulated
// time).
type compactionMsg struct {
	id, taskID string
	sentAt     int64
}

// checkIdleRun is invariant idle-reenqueue: in the quiescent phase, a head
// whose full object set plans no compaction job (the observer's summary
// may still call compaction due: a level counted across tiers) is leased
// by at most maxIdleRuns compaction tasks planned against it, plus once by
// each compaction message sent before the head was written. Reconciliation
// re-enqueueing it at every pass (a fresh identity each sweep interval) is
// a livelock: tasks wasted forever and a due compaction signalled for a
// healthy collection.
//
// The second term is the backlog. A message planned against an older head
// is rebased by its worker onto the head it finds (compact.takeRewrite: a
// task pinned to that head under the message's CCS facts version), so
// every compaction message still queued when the head is written leases
// it, and the first one's idle record does not stop the others (they
// lease before they plan). Messages of one facts version meet as one
// identity at the head (the lease of the first, done, skips the rest);
// messages pinned to different facts versions are different tasks there,
// each leasing it once. Rewrite coalescing keeps that backlog at one
// message only without faults: the faulty phase leaves more, under facts
// that changed between them, e.g. the observed state wiped (its pending
// claim lost: the next observation of the same head enqueues again), a
// redelivered task's take clearing the pending claim while newer tasks
// are queued, a duplicate event re-deriving the compaction its first
// observation had coalesced away. Their number is what the faults left
// (at most one per facts version the queued messages pin), not a
// constant, but it is finite and fixed once the head is written: every
// observation and reconciliation after that plans against this head (or a
// newer one), so a re-enqueue at every pass counts under maxIdleRuns. A
// lease counts in the backlog only when its task has another identity
// than the message's (it was rebased) and the message was sent no later
// than the head was written (the same millisecond included: the world is
// sequential, and a message planned against an older head was sent before
// this head was written); each backlog message may lease the head once
// (without faults a worker that leased it finishes and deletes the
// message).
func (w *World) checkIdleRun(task contract.Task) {
	col := w.cols[task.Collection]
	if !w.quiet || task.Kind != contract.KindCompaction || col == nil || len(col.versions) == 0 || col.inc != contract.Lifetime(task.Incarnation) {
		return
	}
	h := col.head()
	if h.v != task.BaseManifestVersion || h.checksum != task.BaseManifestChecksum {
		return
	}
	snap := compact.Snapshot{Collection: task.Collection, Version: h.v, Checksum: h.checksum}
	for _, k := range sortedKeys(h.objects) {
		snap.Objects = append(snap.Objects, h.objects[k])
	}
	if len(compact.Plan(snap, w.compactionPolicy(), time.UnixMilli(w.t))) > 0 {
		return
	}
	key := fmt.Sprintf("%s#i%d v%d", task.Collection, col.inc, h.v)
	if m := w.compacting; m.id != "" && m.taskID != task.TaskID && m.sentAt <= h.writtenAt {
		if w.idleBacklog == nil {
			w.idleBacklog = map[string]map[string]bool{}
		}
		if w.idleBacklog[key] == nil {
			w.idleBacklog[key] = map[string]bool{}
		}
		if w.idleBacklog[key][m.id] {
			w.violate("idle-reenqueue", "%s: message %s (task %s, sent before the head) leased the head a second time (as %s) although its full plan is empty",
				key, m.id, m.taskID, task.TaskID)
			return
		}
		w.idleBacklog[key][m.id] = true
		w.count("idle-head-leased-from-backlog")
		return
	}
	if w.idleRuns == nil {
		w.idleRuns = map[string]map[string]bool{}
	}
	if w.idleRuns[key] == nil {
		w.idleRuns[key] = map[string]bool{}
	}
	w.idleRuns[key][task.TaskID] = true
	if n := len(w.idleRuns[key]); n > maxIdleRuns {
		w.violate("idle-reenqueue", "%s: %d compaction tasks planned against a head whose full plan is empty leased it (the last %s; %d more were the backlog sent before the head): re-enqueued at every pass",
			key, n, task.TaskID, len(w.idleBacklog[key]))
	} else if n > 1 {
		w.count(fmt.Sprintf("idle-head-leased-%d-times", n))
	}
}

func (c checkedLeases) Extend(ctx context.Context, l contract.Lease, now time.Time, d time.Duration) (contract.Lease, error) {
	got, err := c.l.Extend(ctx, l, now, d)
	if err == nil {
		c.w.checkBelief("extended", got)
	}
	return got, err
}

func (c checkedLeases) Complete(ctx context.Context, l contract.Lease, now time.Time) error {
	return c.l.Complete(ctx, l, now)
}

func (w *World) checkBelief(what string, l contract.Lease) {
	it, ok := decodeLeaseItem(w.ddb.Item(w.def.Table.Name, leaseKey(l.TaskID)))
	if ok && it.holder == l.Holder && it.epoch == l.LeaseEpoch && it.expiry == l.LeaseExpiryUnixMs && !it.done {
		return
	}
	w.violate("lease-exclusive", "%s %s the lease of %s (epoch %d until %d), but the table holds %s epoch %d until %d (done %v, present %v)",
		l.Holder, what, l.TaskID, l.LeaseEpoch, l.LeaseExpiryUnixMs, it.holder, it.epoch, it.expiry, it.done, ok)
}
