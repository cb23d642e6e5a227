package observe_test

// Per-commit cost of the observer at 1,000,000 objects (issue 7).
//
// BenchmarkObserveCommit runs the real observer function (aws-lambda-go
// dispatch, app wiring, awsio adapters, SDK clients) on the embedded stack
// for a commit that adds 10 and removes 10 objects of a 1,000,000-object
// collection; BenchmarkObserveCommitBaseline is the full-manifest path: an
// observer that reads one JSON manifest listing all 1,000,000 objects from
// the same embedded S3, verifies its checksum, decodes it strictly and
// derives the same debt, then makes the same state write and enqueue.
//
// Metrics per observed head (each op is one head; the commit that produces
// it runs with the timer stopped and outside every measurement):
//
//	aws-calls/op  AWS requests the observer made (embedded stack counter; max over ops)
//	cpu-ms/op     getrusage(RUSAGE_SELF) user+sys during the observation (mean)
//	alloc-MB/op   runtime TotalAlloc during the observation (mean)
//	peak-heap-MB  HeapInuse peak above the heap after a forced GC (max over ops)
//
// CPU and heap are process-wide, so they include the embedded S3, DynamoDB
// and SQS servers answering the observer's requests: an upper bound on what
// the function itself spends. No timing is asserted here; cmd/benchreport
// compares the figures with the acceptance targets.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/testkit/memprobe"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
)

const (
	benchObjects    = 1_000_000
	benchCollection = "bench"
	fullCollection  = "bench-full"
	changeSize      = 10 // objects added and removed per commit
)

// fixture is one embedded product holding a 1,000,000-object collection in
// the publisher's part layout, and the same objects as one full manifest.
type fixture struct {
	env      *localenv.Env
	syn      publisher.Synthetic
	rng      *rand.Rand
	removed  map[int]bool
	fullHead string // key of the baseline's head
	fullSize int
	version  uint64 // baseline's observed version, bumped per op
	err      error
}

var (
	fixOnce sync.Once
	fix     *fixture
)

func load(b *testing.B) *fixture {
	b.Helper()
	fixOnce.Do(func() {
		start := time.Now()
		fix = &fixture{}
		fix.err = fix.build(context.Background())
		if fix.err == nil {
			fmt.Printf("observe bench fixture: %d objects, full manifest %d MB, built in %s\n", benchObjects, fix.fullSize>>20, time.Since(start).Round(time.Millisecond))
		}
	})
	if fix.err != nil {
		b.Fatal(fix.err)
	}
	return fix
}

func (f *fixture) build(ctx context.Context) error {
	env, err := localenv.Start(ctx, localenv.Options{HoldS3Events: true, NoDelivery: true})
	if err != nil {
		return err
	}
	f.env = env
	f.syn = publisher.Synthetic{Collection: benchCollection, Objects: benchObjects}
	f.rng = rand.New(rand.NewPCG(7, 7))
	f.removed = map[int]bool{}
	if err := env.Workload.Create(ctx, benchCollection, contract.Lifecycle{}); err != nil {
		return err
	}
	if _, err := env.Publisher.BulkLoad(ctx, benchCollection, benchObjects, f.syn.Object); err != nil {
		return err
	}
	// The bulk version's root lists every object in its change; one
	// ordinary commit on top makes the head's root small, as in steady state.
	// Observing it leaves the observed state one version behind the next op.
	ev, err := f.commit(ctx)
	if err != nil {
		return err
	}
	if _, err := observeEvent(ctx, env, ev); err != nil {
		return err
	}
	if err := f.writeFullManifest(ctx); err != nil {
		return err
	}
	env.Stack.TakeS3Events()
	runtime.GC()
	return nil
}

// commit commits +10/-10 objects on top of the head and returns the head's
// notification. Removed objects are spread over the whole key range (the
// most parts a 20-object change can touch); added objects are new level-0
// append segments.
func (f *fixture) commit(ctx context.Context) (localaws.HeldEvent, error) {
	build := func(ctx context.Context, base publisher.Snapshot) (publisher.Change, error) {
		ch := publisher.Change{Origin: contract.Origin{Kind: contract.OriginCutover, RequestID: fmt.Sprintf("bench-%d", base.Head.Version+1)}}
		for len(ch.Removed) < changeSize {
			i := f.rng.IntN(benchObjects)
			if f.removed[i] {
				continue
			}
			f.removed[i] = true
			ch.Removed = append(ch.Removed, f.syn.Object(i))
		}
		version := base.Head.Version + 1
		seq := base.Root.NextSeq
		for n := range changeSize {
			key := contract.AppendSegmentKey(benchCollection, 1, version, n)
			docs := int64(2000 + n)
			sum := contract.Checksum([]byte(key))
			ts := base.Root.CommitTsUnixMs + int64(n)
			ch.Added = append(ch.Added, contract.ObjectEntry{Key: key, Size: 4 << 20, Checksum: sum, Tier: contract.TierHot, Level: 0,
				DocCount: docs, DeleteCount: docs / 10, MinTsUnixMs: ts, MaxTsUnixMs: ts + 1000, MinSeq: seq, MaxSeq: seq + uint64(docs) - 1,
				MinRecordKey: "doc-000000000000", MaxRecordKey: "doc-999999999999"})
			seq += uint64(docs)
			ch.Seqs += uint64(docs)
		}
		return ch, nil
	}
	head, err := f.env.Publisher.Commit(ctx, benchCollection, build)
	if err != nil {
		return localaws.HeldEvent{}, err
	}
	var found *localaws.HeldEvent
	for _, ev := range f.env.Stack.TakeS3Events() {
		if bytes.Contains(ev.Payload, []byte(url.QueryEscape(contract.HeadKey(benchCollection)))) {
			found = &ev
		}
	}
	if found == nil {
		return localaws.HeldEvent{}, fmt.Errorf("no head notification for %s v%d", benchCollection, head.Version)
	}
	return *found, nil
}

// observeEvent invokes the observer function with ev, checks that it
// advanced and returns what it says it enqueued.
func observeEvent(ctx context.Context, env *localenv.Env, ev localaws.HeldEvent) (string, error) {
	out, err := env.Stack.Invoke(ctx, ev.Function, ev.Payload)
	if err != nil {
		return "", err
	}
	var resp struct {
		Results []struct {
			Outcome string          `json:"outcome"`
			Tasks   json.RawMessage `json:"tasks"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return "", err
	}
	if len(resp.Results) != 1 || resp.Results[0].Outcome != string(observe.OutcomeAdvanced) {
		return "", fmt.Errorf("observer did not advance: %s", out)
	}
	return string(resp.Results[0].Tasks), nil
}

// fullManifest is the baseline's single-document manifest: the root fields
// and every object, no parts.
type fullManifest struct {
	SchemaVersion  int                    `json:"schema_version"`
	Collection     string                 `json:"collection"`
	Version        uint64                 `json:"version"`
	ParentVersion  uint64                 `json:"parent_version"`
	CommitTsUnixMs int64                  `json:"commit_ts_unix_ms"`
	NextSeq        uint64                 `json:"next_seq"`
	Objects        []contract.ObjectEntry `json:"objects"`
}

// writeFullManifest encodes the same 1,000,000 objects once with
// encoding/json as one manifest, stores it and a head naming it.
func (f *fixture) writeFullManifest(ctx context.Context) error {
	m := fullManifest{SchemaVersion: contract.SchemaVersion, Collection: fullCollection, Version: 2, ParentVersion: 1,
		CommitTsUnixMs: time.Now().UnixMilli(), NextSeq: 1 << 40, Objects: make([]contract.ObjectEntry, benchObjects)}
	for i := range m.Objects {
		o := f.syn.Object(i)
		o.Key = contract.DataPrefix(fullCollection) + o.Key[len(contract.DataPrefix(benchCollection)):]
		m.Objects[i] = o
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	m.Objects = nil
	sum := contract.Checksum(body)
	head := contract.Head{SchemaVersion: contract.SchemaVersion, Collection: fullCollection, Version: 2,
		ManifestKey: contract.ManifestKey(fullCollection, 1, 2, sum), ManifestChecksum: sum, CommittedAtUnixMs: m.CommitTsUnixMs}
	if _, err := f.env.Bucket.Put(ctx, head.ManifestKey, body); err != nil {
		return err
	}
	hb, err := contract.Encode(head)
	if err != nil {
		return err
	}
	if _, err := f.env.Bucket.Put(ctx, contract.HeadKey(fullCollection), hb); err != nil {
		return err
	}
	f.fullHead, f.fullSize = contract.HeadKey(fullCollection), len(body)
	return nil
}

// fullObserver is the baseline: the observer's work when a version is one
// manifest listing the whole set. It re-reads the head, reads and verifies
// the manifest, decodes it strictly, derives the compaction debt from the
// objects and makes the same conditional state write and enqueue as the
// real observer (through the same awsio adapters and counted SDK clients).
// It does not diff against the previous manifest (which a full-manifest
// observer would need for GC debt), so it is a lower bound on that path.
// fullManifestReadLimit bounds the baseline's one read of the full manifest.
const fullManifestReadLimit = 4 << 30

type fullObserver struct {
	bucket *awsio.Bucket
	state  *awsio.ObservedTable
	queue  *awsio.FIFOQueues
	cfg    policy.Compaction
}

func (o *fullObserver) observe(ctx context.Context, version uint64) (int, error) {
	hb, err := o.bucket.Get(ctx, contract.HeadKey(fullCollection))
	if err != nil {
		return 0, err
	}
	head, err := contract.DecodeHead(contract.HeadKey(fullCollection), hb)
	if err != nil {
		return 0, err
	}
	// The whole set is one document, far past the coordinator's read cap
	// (awsio.MaxGetBytes): a full-manifest observer has to read it all.
	body, err := o.bucket.GetLimited(ctx, head.ManifestKey, fullManifestReadLimit)
	if err != nil {
		return 0, err
	}
	if err := contract.VerifyChecksum(head.ManifestKey, body, head.ManifestChecksum); err != nil {
		return 0, err
	}
	var m fullManifest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return 0, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("trailing data after manifest")
	}
	// Validate order and derive the per-level summary the debt needs.
	levels := map[int]int64{}
	var docs, dels int64
	for i := range m.Objects {
		ob := &m.Objects[i]
		if i > 0 && m.Objects[i-1].Key >= ob.Key {
			return 0, fmt.Errorf("objects not sorted at %q", ob.Key)
		}
		if !contract.IsDataKey(fullCollection, ob.Key) || ob.DeleteCount > ob.DocCount {
			return 0, fmt.Errorf("object %q invalid", ob.Key)
		}
		levels[ob.Level]++
		docs += ob.DocCount
		dels += ob.DeleteCount
	}
	d := observe.Debt{Objects: int64(len(m.Objects))}
	for l, n := range levels {
		if l < contract.MaxLevel && n > d.MaxFanOut {
			d.MaxFanOut = n
		}
	}
	if docs > 0 {
		d.DeleteDensity = float64(dels) / float64(docs)
	}
	d.CompactionDue = d.MaxFanOut >= int64(o.cfg.MergeFactor) || d.DeleteDensity >= o.cfg.DeleteDensityThreshold
	now := time.Now().UnixMilli()
	st := observe.Observed{Collection: fullCollection, Version: version, Checksum: head.ManifestChecksum, CommitTsUnixMs: m.CommitTsUnixMs,
		ObservedAtUnixMs: now, Debt: d}
	if _, err := o.state.Advance(ctx, st); err != nil {
		return 0, err
	}
	if !d.CompactionDue {
		return 0, nil
	}
	tasks := []contract.Task{contract.NewTask(contract.KindCompaction, fullCollection, version, head.ManifestChecksum, 0, now)}
	return len(tasks), o.queue.Enqueue(ctx, tasks)
}

// probe accumulates per-op CPU, allocation and peak heap.
type probe struct {
	ops          int
	cpu          time.Duration
	alloc        uint64
	peak         uint64
	calls, maxCl int
}

// measure runs fn once with the benchmark timer running: CPU from
// getrusage, bytes allocated, and the HeapInuse peak (sampled every
// millisecond and at the end) above the heap left by a forced GC.
func (p *probe) measure(b *testing.B, fn func()) {
	mp := memprobe.Start()
	b.StartTimer()
	fn()
	b.StopTimer()
	res := mp.Stop()
	p.ops++
	p.cpu += res.CPU
	p.alloc += res.Allocated
	p.peak = max(p.peak, res.PeakHeapInuse)
}

func (p *probe) report(b *testing.B) {
	if p.ops == 0 {
		return
	}
	b.ReportMetric(float64(p.cpu.Microseconds())/1000/float64(p.ops), "cpu-ms/op")
	b.ReportMetric(float64(p.alloc)/(1<<20)/float64(p.ops), "alloc-MB/op")
	b.ReportMetric(float64(p.peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(p.maxCl), "aws-calls/op")
}

// BenchmarkObserveCommit: the observer function handles the head
// notification of a +10/-10 commit on a 1,000,000-object collection.
func BenchmarkObserveCommit(b *testing.B) {
	b.Run(fmt.Sprintf("objects=%d", benchObjects), func(b *testing.B) {
		f := load(b)
		ctx := context.Background()
		var p probe
		b.StopTimer()
		b.ResetTimer()
		for range b.N {
			ev, err := f.commit(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var calls map[string]int
			var tasks string
			p.measure(b, func() {
				before := f.env.Stack.Counter().Snapshot()
				tasks, err = observeEvent(ctx, f.env, ev)
				calls = f.env.Stack.Counter().Since(before)
			})
			if err != nil {
				b.Fatal(err)
			}
			n := localaws.Total(calls)
			p.maxCl = max(p.maxCl, n)
			if p.ops == 1 {
				b.Logf("observer calls for one head: %v (tasks %s)", calls, tasks)
			}
		}
		p.report(b)
	})
}

// BenchmarkObserveCommitBaseline: the full-manifest observer on the same
// 1,000,000 objects, against the same embedded stack.
func BenchmarkObserveCommitBaseline(b *testing.B) {
	b.Run(fmt.Sprintf("objects=%d", benchObjects), func(b *testing.B) {
		f := load(b)
		ctx := context.Background()
		cl := f.env.Clients // counted
		o := &fullObserver{
			bucket: awsio.NewBucket(cl.S3, f.env.Config.Bucket),
			state:  awsio.NewObservedTable(cl.Dynamo, f.env.Config.Table),
			queue:  awsio.NewFIFOQueues(cl.SQS, f.env.Config.QueueURLs),
			cfg:    f.env.Config.Policy.Compaction,
		}
		var p probe
		b.StopTimer()
		b.ResetTimer()
		b.SetBytes(int64(f.fullSize))
		for range b.N {
			f.version++
			var calls map[string]int
			var err error
			var tasks int
			p.measure(b, func() {
				before := f.env.Stack.Counter().Snapshot()
				tasks, err = o.observe(ctx, f.version)
				calls = f.env.Stack.Counter().Since(before)
			})
			if err != nil {
				b.Fatal(err)
			}
			p.maxCl = max(p.maxCl, localaws.Total(calls))
			if p.ops == 1 {
				b.Logf("full-manifest observer calls for one head: %v (tasks %d, manifest %d MB)", calls, tasks, f.fullSize>>20)
			}
		}
		p.report(b)
	})
}
