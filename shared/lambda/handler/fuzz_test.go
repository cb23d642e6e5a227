package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/store"
	"github.com/searchfabric/bcc/shared/testkit/jsonref"
)

// Fuzz targets for the Lambda handlers' untrusted inputs (make fuzz; make
// test replays testdata/fuzz): the observer's event payload and the SQS
// message bodies of the compaction, gc and handoff queues.

var (
	now   = time.UnixMilli(1_800_000_000_000)
	quiet = slog.New(slog.DiscardHandler)
)

func eventFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- the observer ----

type memObjects map[string][]byte

func (m memObjects) Get(_ context.Context, key string) ([]byte, error) {
	if b, ok := m[key]; ok {
		return b, nil
	}
	return nil, store.ErrNotFound
}

type memState map[string]observe.Observed

func (m memState) Advance(_ context.Context, st observe.Observed) (observe.Observed, error) {
	prev := m[st.Collection]
	if prev.Version >= st.Version {
		return prev, fmt.Errorf("observed v%d: %w", prev.Version, store.ErrConditionFailed)
	}
	m[st.Collection] = st
	return prev, nil
}
func (m memState) Get(_ context.Context, c string, _ uint64) (observe.Observed, error) {
	return m[c], nil
}
func (m memState) Revert(_ context.Context, st, prev observe.Observed) error {
	m[st.Collection] = prev
	return nil
}

type recQueue struct {
	tasks []contract.Task
	reqs  []contract.ReconcileRequest
}

func (q *recQueue) SendReconcile(_ context.Context, reqs []contract.ReconcileRequest) error {
	q.reqs = append(q.reqs, reqs...)
	return nil
}

func (q *recQueue) Enqueue(_ context.Context, tasks []contract.Task) error {
	q.tasks = append(q.tasks, tasks...)
	return nil
}

type catalog struct{}

func (catalog) Facts(_ context.Context, c string) (contract.CollectionFacts, error) {
	return contract.CollectionFacts{SchemaVersion: 1, Collection: c, FactsVersion: 1}, nil
}
func (catalog) Collections(context.Context) ([]string, error) { return []string{"orders"}, nil }

// observerFixture is the observer handler over a store holding one
// committed head, of "orders", whose root makes compaction due.
func observerFixture(t testing.TB) (*handler.Observer, *recQueue) {
	objs := memObjects{}
	m := contract.Manifest{SchemaVersion: 1, Collection: "orders", Version: 1, CommitTsUnixMs: 1, Origin: contract.Origin{Kind: contract.OriginCreate},
		Change: contract.Change{Added: []contract.ObjectEntry{}, Removed: []contract.ObjectEntry{}}, Parts: []contract.PartRef{}}
	body, err := contract.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	sum := contract.Checksum(body)
	objs[contract.ManifestKey("orders", 1, 1, sum)] = body
	head, _ := contract.Encode(contract.Head{SchemaVersion: 1, Collection: "orders", Version: 1, ManifestKey: contract.ManifestKey("orders", 1, 1, sum), ManifestChecksum: sum, CommittedAtUnixMs: 1})
	objs[contract.HeadKey("orders")] = head
	q := &recQueue{}
	cfg := observe.DefaultConfig()
	cfg.CompactionDue = func(contract.Summary) bool { return true }
	clock := func() time.Time { return now }
	uc := observe.New(objs, memState{}, q, catalog{}, clock, cfg, metrics.New("observer"), nil)
	return handler.NewObserver(uc, catalog{}, q, handler.Batch{Reserve: time.Second, Guards: guard.All()}, metrics.New("observer"), io.Discard, clock, quiet), q
}

// eventKeys reads the object keys of a head event the way a
// case-sensitive, duplicate-rejecting reader would: an S3 notification's
// Records[].s3.object.key (URL-decoded, as aws-lambda-go does), or an S3
// EventBridge event's detail.object.key (carried as is).
func eventKeys(raw []byte) ([]string, bool) {
	tree, err := jsonref.Parse(raw)
	if err != nil {
		return nil, false
	}
	doc, _ := tree.(map[string]any)
	if src, _ := doc["source"].(string); src == "aws.s3" && doc["Records"] == nil {
		detail, _ := doc["detail"].(map[string]any)
		obj, _ := detail["object"].(map[string]any)
		k, _ := obj["key"].(string)
		if k == "" {
			return nil, true
		}
		return []string{k}, true
	}
	recs, _ := doc["Records"].([]any)
	var keys []string
	for _, r := range recs {
		rec, _ := r.(map[string]any)
		s3, _ := rec["s3"].(map[string]any)
		obj, _ := s3["object"].(map[string]any)
		k, _ := obj["key"].(string)
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return nil, false
		}
		keys = append(keys, dk)
	}
	return keys, true
}

// FuzzObserverEvent: whatever the payload, the observer never panics; what
// it observes is exactly what the event says (the keys a case-sensitive,
// duplicate-rejecting reader finds in Records[].s3.object.key, in order,
// or in an EventBridge event's detail.object.key),
// and it enqueues work only for a verified head named by the event (or
// on a scheduled reconciliation).
func FuzzObserverEvent(f *testing.F) {
	f.Add(eventFile(f, "s3-head-created.json"))
	f.Add(eventFile(f, "eventbridge-head-created.json"))
	f.Add(eventFile(f, "scheduled-reconcile.json"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, q := observerFixture(t)
		resp, err := h.Handle(context.Background(), json.RawMessage(raw))
		if resp.Reconcile != nil {
			return // a scheduled reconciliation: every collection is judged from its head
		}
		if len(resp.Results) == 0 {
			if len(q.tasks) > 0 {
				t.Fatalf("enqueued %d tasks for a payload that observed nothing (err %v)", len(q.tasks), err)
			}
			return
		}
		keys, ok := eventKeys(raw)
		if !ok {
			t.Fatalf("observed %d records of a payload a duplicate-rejecting reader refuses: %.200q", len(resp.Results), raw)
		}
		if len(keys) != len(resp.Results) {
			t.Fatalf("observed %d records, the event has %d", len(resp.Results), len(keys))
		}
		named := false
		for i, r := range resp.Results {
			if r.Key != keys[i] {
				t.Fatalf("observed key %q, the event says %q", r.Key, keys[i])
			}
			named = named || r.Key == contract.HeadKey("orders")
		}
		if len(q.tasks) > 0 && !named {
			t.Fatalf("enqueued %d tasks though no record names the head", len(q.tasks))
		}
		for _, tk := range q.tasks {
			if tk.Collection != "orders" || tk.BaseManifestVersion != 1 {
				t.Fatalf("enqueued %+v", tk)
			}
		}
	})
}

// ---- the SQS handlers ----

// tripwire records any use of a port and fails it: a message body that
// does not decode strictly must reach no port at all.
type tripwire struct{ touched []string }

var errTripped = errors.New("tripwire")

func (w *tripwire) trip(what string) error { w.touched = append(w.touched, what); return errTripped }

func (w *tripwire) Get(context.Context, string) ([]byte, error) { return nil, w.trip("get") }
func (w *tripwire) ReaderAt(context.Context, string, int64) io.ReaderAt {
	_ = w.trip("readerat")
	return nil
}
func (w *tripwire) Put(context.Context, string, []byte) (string, error) { return "", w.trip("put") }
func (w *tripwire) Acquire(context.Context, contract.Task, string, time.Time, time.Duration) (contract.Lease, error) {
	return contract.Lease{}, w.trip("acquire")
}
func (w *tripwire) Extend(context.Context, contract.Lease, time.Time, time.Duration) (contract.Lease, error) {
	return contract.Lease{}, w.trip("extend")
}
func (w *tripwire) Facts(context.Context, string) (contract.CollectionFacts, error) {
	return contract.CollectionFacts{}, w.trip("facts")
}
func (w *tripwire) Report(context.Context, contract.Completion) error { return w.trip("report") }
func (w *tripwire) List(context.Context, string, func([]gc.Listed) error) error {
	return w.trip("list")
}
func (w *tripwire) DeleteProven(context.Context, gc.ProvenBatch) (gc.DeleteResult, error) {
	return gc.DeleteResult{}, w.trip("delete")
}
func (w *tripwire) Watermark(context.Context) (contract.Watermark, error) {
	return contract.Watermark{}, w.trip("watermark")
}
func (w *tripwire) Head(context.Context, string) (contract.Head, error) {
	return contract.Head{}, w.trip("head")
}
func (w *tripwire) HeadRoot(context.Context, string) (contract.Head, contract.Manifest, error) {
	return contract.Head{}, contract.Manifest{}, w.trip("head")
}
func (w *tripwire) Root(context.Context, string, string) (contract.Manifest, error) {
	return contract.Manifest{}, w.trip("root")
}
func (w *tripwire) Lookup(context.Context, *contract.Manifest, string) (contract.ObjectEntry, bool, error) {
	return contract.ObjectEntry{}, false, w.trip("lookup")
}
func (w *tripwire) EachChange(context.Context, *contract.Manifest, string, func(contract.ObjectEntry) error) error {
	return w.trip("each change")
}
func (w *tripwire) Cutover(context.Context, contract.CutoverRequest) (contract.CutoverAnswer, error) {
	return contract.CutoverAnswer{}, w.trip("cutover")
}
func (w *tripwire) RecordReleaseIntent(context.Context, contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	return contract.ReleaseIntentAnswer{}, w.trip("intent")
}

// leaseTrip is the compaction executor's lease port (its Complete differs
// from the gc completion sink's).
type leaseTrip struct{ *tripwire }

func (l leaseTrip) Complete(context.Context, contract.Lease, time.Time) error {
	return l.trip("lease complete")
}

var _ = lease.ErrLost // the lease package's sentinels are what the executor branches on

type sqsHandler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// sqsQueues are the SQS handlers FuzzSQSMessageBodies selects by
// kind % len(sqsQueues), with the strict decoder of their bodies.
var sqsQueues = []struct {
	name   string
	decode func([]byte) error
	build  func(w *tripwire) sqsHandler
}{
	{"compaction", func(b []byte) error { _, err := contract.DecodeTask("m", b); return err }, func(w *tripwire) sqsHandler {
		uc := compact.NewExecutor(w, leaseTrip{w}, w, w, func() time.Time { return now }, compact.ExecConfig{Guards: guard.All()}, metrics.New("compaction"), nil)
		return handler.NewCompaction(uc, metrics.New("compaction"), io.Discard, func() time.Time { return now }, quiet).Handle
	}},
	{"gc", func(b []byte) error { _, err := contract.DecodeTask("m", b); return err }, func(w *tripwire) sqsHandler {
		ports := gc.Ports{ReadPorts: gc.ReadPorts{Objects: w, Lister: w, Facts: w, Watermark: w}, Deleter: w}
		clock := func() time.Time { return now }
		ex := gc.New(ports, gc.DefaultConfig(), gc.NewPacer(1000, 1000, 1000, clock, nil), clock, nil, metrics.New("gc"), nil)
		return handler.NewGC(ex, metrics.New("gc"), io.Discard, clock, quiet).Handle
	}},
	{"handoff", func(b []byte) error { _, err := contract.DecodeCompletion("m", b); return err }, func(w *tripwire) sqsHandler {
		uc := handoff.New(w, w, w, nil, func() time.Time { return now }, handoff.Config{Guards: guard.All()}, metrics.New("handoff"), nil)
		return handler.NewHandoff(uc, metrics.New("handoff"), io.Discard, func() time.Time { return now }, quiet).Handle
	}},
}

// FuzzSQSMessageBodies: a message whose body does not decode strictly is
// reported in batchItemFailures (so it reaches its DLQ intact) and reaches
// no port: no read, no lease, no delete, no cutover, no intent.
func FuzzSQSMessageBodies(f *testing.F) {
	for i := range sqsQueues {
		for _, seed := range []string{"task.json", "completion-rewrite.json", "completion-cleanup.json"} {
			f.Add(uint16(i), string(eventFile(f, seed)))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint16, body string) {
		q := sqsQueues[int(kind)%len(sqsQueues)]
		w := &tripwire{}
		resp, err := q.build(w)(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: body,
			Attributes: map[string]string{"MessageGroupId": "orders", "ApproximateReceiveCount": "1", "SentTimestamp": strconv.FormatInt(now.UnixMilli(), 10)}}}})
		if err != nil {
			t.Fatalf("%s handler returned an invocation error: %v", q.name, err)
		}
		if q.decode([]byte(body)) == nil {
			return
		}
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-1" {
			t.Fatalf("%s: malformed body not reported as a batch item failure: %+v", q.name, resp)
		}
		if len(w.touched) > 0 {
			t.Fatalf("%s: malformed body reached ports %v", q.name, w.touched)
		}
	})
}

// ---- the handoff's cutover requests ----

// baseLineage is a collection whose head is the base of the events/
// completion example and holds the objects of events/manifest-part.json.
type baseLineage struct {
	head contract.Head
	held map[string]contract.ObjectEntry
}

func (l *baseLineage) Head(ctx context.Context, c string) (contract.Head, error) {
	h, _, err := l.HeadRoot(ctx, c)
	return h, err
}
func (l *baseLineage) HeadRoot(context.Context, string) (contract.Head, contract.Manifest, error) {
	return l.head, contract.Manifest{SchemaVersion: 1, Collection: l.head.Collection, Version: l.head.Version}, nil
}
func (l *baseLineage) Root(context.Context, string, string) (contract.Manifest, error) {
	return contract.Manifest{}, store.ErrNotFound
}
func (l *baseLineage) EachChange(context.Context, *contract.Manifest, string, func(contract.ObjectEntry) error) error {
	return nil
}
func (l *baseLineage) Lookup(_ context.Context, _ *contract.Manifest, key string) (contract.ObjectEntry, bool, error) {
	o, ok := l.held[key]
	return o, ok, nil
}

// factsCCS answers the same facts for every collection and records no
// intent.
type factsCCS struct{ facts contract.CollectionFacts }

func (f *factsCCS) Facts(context.Context, string) (contract.CollectionFacts, error) {
	return f.facts, nil
}
func (f *factsCCS) RecordReleaseIntent(_ context.Context, r contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	return contract.ReleaseIntentAnswer{SchemaVersion: 1, IntentID: r.IntentID, Status: contract.IntentRejected}, nil
}

type recPublisher struct{ reqs []contract.CutoverRequest }

func (p *recPublisher) Cutover(_ context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	p.reqs = append(p.reqs, r)
	return contract.CutoverAnswer{SchemaVersion: 1, RequestID: r.RequestID, Status: contract.CutoverConflict}, nil
}

// FuzzHandoffCompletion runs the handoff handler on any completion body
// against a base holding known objects. Property: every cutover request
// that reaches the publisher is based on the head, removes only objects
// the base holds (with exactly the base's entries), names no key twice and
// adds no key the base already holds.
func FuzzHandoffCompletion(f *testing.F) {
	f.Add(string(eventFile(f, "completion-rewrite.json")))
	f.Fuzz(func(t *testing.T, body string) {
		seed, err := contract.DecodeCompletion("seed", eventFile(t, "completion-rewrite.json"))
		if err != nil {
			t.Fatal(err)
		}
		var part contract.Part
		if err := contract.Decode("part", "seed", eventFile(t, "manifest-part.json"), &part); err != nil {
			t.Fatal(err)
		}
		lin := &baseLineage{head: contract.Head{SchemaVersion: 1, Collection: seed.Collection, Version: seed.BaseManifestVersion, ManifestChecksum: seed.BaseManifestChecksum},
			held: map[string]contract.ObjectEntry{}}
		for _, o := range part.Objects {
			lin.held[o.Key] = o
		}
		pub := &recPublisher{}
		clock := func() time.Time { return time.UnixMilli(seed.StartedAtUnixMs).Add(time.Minute) }
		ccs := &factsCCS{facts: contract.CollectionFacts{SchemaVersion: 1, Collection: seed.Collection, FactsVersion: seed.CCSFactsVersion}}
		uc := handoff.New(lin, pub, ccs, nil, clock, handoff.Config{Guards: guard.All()}, metrics.New("handoff"), quiet)
		h := handler.NewHandoff(uc, metrics.New("handoff"), io.Discard, clock, quiet)
		if _, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: body}}}); err != nil {
			t.Fatal(err)
		}
		if os.Getenv("BCC_FUZZ_DEBUG") != "" {
			t.Logf("%d cutover requests", len(pub.reqs))
		}
		for _, r := range pub.reqs {
			if r.BaseVersion != lin.head.Version || r.BaseChecksum != lin.head.ManifestChecksum {
				t.Fatalf("cutover based on v%d, head is v%d", r.BaseVersion, lin.head.Version)
			}
			seen := map[string]bool{}
			for _, o := range r.Removed {
				if held, ok := lin.held[o.Key]; !ok || held != o || seen[o.Key] {
					t.Fatalf("cutover removes %s (held %v, entry equal %v, twice %v)", o.Key, ok, held == o, seen[o.Key])
				}
				seen[o.Key] = true
			}
			for _, o := range r.Added {
				if _, ok := lin.held[o.Key]; ok || seen[o.Key] {
					t.Fatalf("cutover adds %s, which the base holds or the request names twice", o.Key)
				}
				seen[o.Key] = true
			}
		}
	})
}
