package e2e

// Memory of the observer and of a GC plan at a bulk commit (issue 10 item
// 5), on the embedded stack with the production wiring.
//
// A bulk load commits n objects in one version. Its root's change lists
// every added object: since the change moved into change parts, the root
// stays small and neither the observer (which reads the change's counts)
// nor a GC plan (which streams the removed entries, one change part at a
// time, and verifies the parts one at a time) holds more than one part.
// The baselines measure what the same work cost when the root carried the
// change inline (the contract before): reading and decoding that root,
// and, for GC, indexing its change in memory as the old planner did.
//
// Metrics per op (peak heap is process-wide: it includes the embedded S3
// answering the reads):
//
//	peak-heap-MB  HeapInuse peak above the heap after a forced GC (max over ops)
//	peak-live-MB  peak live heap as GC cycles marked it, above the start
//	cpu-ms/op     process CPU during the op (mean)
//	alloc-MB/op   bytes allocated during the op (mean)
//
// The embedded stack in the same process holds every object of the
// fixtures (hundreds of MB): with the default GC target garbage could pile
// up to that size before a collection, which a function holding only its
// own work never sees. Each op runs with GOGC=5, so the heap peak tracks
// what the work holds (plus 5% of the fixture).
//
// cmd/benchreport compares peak-heap-MB with half the function's memory
// (observer 256 MB, GC 512 MB): at least 2x headroom.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/testkit/memprobe"
)

var bulkSizes = []int{250_000, 1_000_000}

// bulkFixture is one embedded product with a collection bulk-loaded with
// n objects (change in parts) and the same commit as an inline-change root.
type bulkFixture struct {
	env        *localenv.Env
	collection string
	event      localaws.HeldEvent // the bulk version's head notification
	inlineKey  string             // the baseline's root (inline change)
	inlineSize int
	err        error
}

var (
	bulkMu       sync.Mutex
	bulkFixtures = map[int]*bulkFixture{}
	bulkEnv      *localenv.Env
)

func loadBulk(b *testing.B, n int) *bulkFixture {
	b.Helper()
	bulkMu.Lock()
	defer bulkMu.Unlock()
	if f, ok := bulkFixtures[n]; ok {
		if f.err != nil {
			b.Fatal(f.err)
		}
		return f
	}
	start := time.Now()
	f := &bulkFixture{collection: fmt.Sprintf("bulk-%d", n)}
	f.err = f.build(context.Background(), n)
	bulkFixtures[n] = f
	if f.err != nil {
		b.Fatal(f.err)
	}
	b.Logf("bulk fixture: %d objects, inline-change root %d MB, built in %s", n, f.inlineSize>>20, time.Since(start).Round(time.Millisecond))
	return f
}

func (f *bulkFixture) build(ctx context.Context, n int) error {
	if bulkEnv == nil {
		env, err := localenv.Start(ctx, localenv.Options{HoldS3Events: true, NoDelivery: true})
		if err != nil {
			return err
		}
		bulkEnv = env
	}
	f.env = bulkEnv
	syn := publisher.Synthetic{Collection: f.collection, Objects: n}
	if err := f.env.Workload.Create(ctx, f.collection, contract.Lifecycle{}); err != nil {
		return err
	}
	f.env.Stack.TakeS3Events()
	head, err := f.env.Publisher.BulkLoad(ctx, f.collection, n, syn.Object)
	if err != nil {
		return err
	}
	for _, ev := range f.env.Stack.TakeS3Events() {
		if bytes.Contains(ev.Payload, []byte(f.collection+"%2Fmanifest_committed_head.json")) || bytes.Contains(ev.Payload, []byte(f.collection+"/manifest_committed_head.json")) {
			f.event = ev
		}
	}
	if f.event.Payload == nil {
		return fmt.Errorf("no head notification for %s v%d", f.collection, head.Version)
	}
	if err := f.env.Watermark.Publish(ctx, time.Now(), time.Now()); err != nil {
		return err
	}
	return f.writeInlineRoot(ctx, head, syn)
}

// inlineRoot is a root as the contract had it before change parts: the
// whole change inline.
type inlineRoot struct {
	SchemaVersion  int                `json:"schema_version"`
	Collection     string             `json:"collection"`
	Version        uint64             `json:"version"`
	ParentVersion  uint64             `json:"parent_version"`
	ParentKey      string             `json:"parent_key,omitempty"`
	ParentChecksum string             `json:"parent_checksum,omitempty"`
	CommitTsUnixMs int64              `json:"commit_ts_unix_ms"`
	NextSeq        uint64             `json:"next_seq"`
	Origin         contract.Origin    `json:"origin"`
	Change         inlineChange       `json:"change"`
	Parts          []contract.PartRef `json:"parts"`
	Summary        contract.Summary   `json:"summary"`
}

type inlineChange struct {
	Added   []contract.ObjectEntry `json:"added"`
	Removed []contract.ObjectEntry `json:"removed"`
}

func (f *bulkFixture) writeInlineRoot(ctx context.Context, head contract.Head, syn publisher.Synthetic) error {
	_, root, err := f.env.Lineage.HeadRoot(ctx, f.collection)
	if err != nil {
		return err
	}
	r := inlineRoot{SchemaVersion: root.SchemaVersion, Collection: root.Collection, Version: root.Version, ParentVersion: root.ParentVersion,
		ParentKey: root.ParentKey, ParentChecksum: root.ParentChecksum, CommitTsUnixMs: root.CommitTsUnixMs, NextSeq: root.NextSeq,
		Origin: root.Origin, Parts: root.Parts, Summary: root.Summary,
		Change: inlineChange{Added: make([]contract.ObjectEntry, syn.Objects), Removed: []contract.ObjectEntry{}}}
	for i := range r.Change.Added {
		r.Change.Added[i] = syn.Object(i)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f.inlineKey, f.inlineSize = contract.CollectionPrefix(f.collection)+"baseline/inline-root.json", len(body)
	_, err = f.env.Bucket.Put(ctx, f.inlineKey, body)
	return err
}

// bulkProbe accumulates per-op CPU, allocation and peak heap.
type bulkProbe struct {
	ops        int
	cpu        time.Duration
	alloc      uint64
	peak, live uint64
}

func (p *bulkProbe) measure(b *testing.B, fn func() error) {
	old := debug.SetGCPercent(5)
	mp := memprobe.Start()
	b.StartTimer()
	err := fn()
	b.StopTimer()
	res := mp.Stop()
	debug.SetGCPercent(old)
	if err != nil {
		b.Fatal(err)
	}
	p.ops++
	p.cpu += res.CPU
	p.alloc += res.Allocated
	p.peak = max(p.peak, res.PeakHeapInuse)
	p.live = max(p.live, res.PeakLive)
}

func (p *bulkProbe) report(b *testing.B) {
	b.ReportMetric(float64(p.cpu.Microseconds())/1000/float64(p.ops), "cpu-ms/op")
	b.ReportMetric(float64(p.alloc)/(1<<20)/float64(p.ops), "alloc-MB/op")
	b.ReportMetric(float64(p.peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(p.live)/(1<<20), "peak-live-MB")
}

func eachBulk(b *testing.B, run func(b *testing.B, f *bulkFixture, p *bulkProbe)) {
	for _, n := range bulkSizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			f := loadBulk(b, n)
			var p bulkProbe
			b.StopTimer()
			b.ResetTimer()
			for range b.N {
				run(b, f, &p)
			}
			p.report(b)
		})
	}
}

// BenchmarkObserveBulkCommit: the observer function handles the head
// notification of the bulk version (its observed state is forgotten before
// each op, so every op observes the version anew).
func BenchmarkObserveBulkCommit(b *testing.B) {
	eachBulk(b, func(b *testing.B, f *bulkFixture, p *bulkProbe) {
		ctx := context.Background()
		if _, err := f.env.Clients.Dynamo.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.env.Config.Table),
			Key: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "COLL#" + f.collection}, "sk": &ddb.AttributeValueMemberS{Value: "OBSERVED"}}}); err != nil {
			b.Fatal(err)
		}
		p.measure(b, func() error {
			out, err := f.env.Stack.Invoke(ctx, resources.FnObserver, f.event.Payload)
			if err == nil && !bytes.Contains(out, []byte(`"advanced"`)) {
				err = fmt.Errorf("observer did not advance: %s", out)
			}
			return err
		})
	})
}

// BenchmarkObserveBulkCommitBaselineInlineChange: what the observer did
// with the same bulk commit's root carrying its change inline: read it,
// verify its checksum and decode it.
func BenchmarkObserveBulkCommitBaselineInlineChange(b *testing.B) {
	eachBulk(b, func(b *testing.B, f *bulkFixture, p *bulkProbe) {
		bucket := awsio.NewBucket(f.env.Clients.S3, f.env.Config.Bucket)
		p.measure(b, func() error {
			_, err := readInlineRoot(context.Background(), bucket, f.inlineKey)
			return err
		})
	})
}

func readInlineRoot(ctx context.Context, bucket *awsio.Bucket, key string) (inlineRoot, error) {
	var r inlineRoot
	body, err := bucket.GetLimited(ctx, key, 1<<30) // the reader before the limits read the root whole
	if err != nil {
		return r, err
	}
	if err := contract.VerifyChecksum(key, body, contract.Checksum(body)); err != nil {
		return r, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return r, dec.Decode(&r)
}

// BenchmarkGCPlanBulkCommit: a GC plan of the bulk-loaded collection with
// the production read ports (the lineage walk, every part verified, the
// data listing, the roots above the head).
func BenchmarkGCPlanBulkCommit(b *testing.B) {
	eachBulk(b, func(b *testing.B, f *bulkFixture, p *bulkProbe) {
		ports := app.GCReadPorts(f.env.Config, f.env.Clients)
		cfg := gc.ConfigFrom(f.env.Config.Policy, guard.All())
		p.measure(b, func() error {
			pl, err := gc.PlanSweep(context.Background(), ports, cfg, f.collection, time.Now())
			if err == nil && pl.HeadVersion == 0 {
				err = fmt.Errorf("empty plan: %+v", pl)
			}
			return err
		})
	})
}

// BenchmarkGCPlanBulkCommitBaselineInlineChange: what the planner's lineage
// walk did with the same root carrying its change inline: read and decode
// it, and index its change by key (the planner's history map).
func BenchmarkGCPlanBulkCommitBaselineInlineChange(b *testing.B) {
	type history struct {
		removeIdx, addIdx int
		entry             contract.ObjectEntry
		live              bool
	}
	eachBulk(b, func(b *testing.B, f *bulkFixture, p *bulkProbe) {
		bucket := awsio.NewBucket(f.env.Clients.S3, f.env.Config.Bucket)
		p.measure(b, func() error {
			r, err := readInlineRoot(context.Background(), bucket, f.inlineKey)
			if err != nil {
				return err
			}
			hist := map[string]*history{}
			for _, o := range r.Change.Added {
				hist[o.Key] = &history{removeIdx: -1, addIdx: 0, live: true}
			}
			if len(hist) != len(r.Change.Added) {
				return fmt.Errorf("history lost entries")
			}
			return nil
		})
	})
}
