package publisher

// BulkLoad's layout test, and the publisher's own per-commit cost at
// 1,000,000 objects: BenchmarkCommit rewrites only the parts a +10/-10
// change touches; BenchmarkCommitBaseline is the full-manifest publisher,
// which reads, verifies and decodes the whole manifest, applies the change
// and encodes, hashes and writes it again. Both run against an in-memory
// bucket, so the figures are the publisher's own work. Metrics: cpu-ms/op
// (getrusage user+sys), alloc-MB/op, peak-heap-MB (HeapInuse peak above the
// heap after a forced GC), parts-written/op and MB-written/op. No timing is
// asserted.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/testkit/memprobe"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// memObjects is an in-memory bucket with S3's conditional writes.
type memObjects struct {
	mu      sync.Mutex
	m       map[string][]byte
	etags   map[string]string
	n       int
	puts    int
	putSize int64
}

func newMem() *memObjects { return &memObjects{m: map[string][]byte{}, etags: map[string]string{}} }

func (s *memObjects) Get(ctx context.Context, key string) ([]byte, error) {
	b, _, err := s.GetWithETag(ctx, key)
	return b, err
}

func (s *memObjects) GetWithETag(_ context.Context, key string) ([]byte, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return nil, "", fmt.Errorf("get %s: %w", key, store.ErrNotFound)
	}
	return bytes.Clone(b), s.etags[key], nil
}

func (s *memObjects) put(key string, body []byte, ok func(exists bool, etag string) bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, exists := s.m[key]
	if !ok(exists, s.etags[key]) {
		return "", fmt.Errorf("put %s: %w", key, store.ErrPreconditionFailed)
	}
	s.n++
	s.puts++
	s.putSize += int64(len(body))
	s.m[key], s.etags[key] = bytes.Clone(body), strconv.Itoa(s.n)
	return s.etags[key], nil
}

func (s *memObjects) Put(_ context.Context, key string, body []byte) (string, error) {
	return s.put(key, body, func(bool, string) bool { return true })
}

func (s *memObjects) PutIfMatch(_ context.Context, key string, body []byte, etag string) (string, error) {
	return s.put(key, body, func(exists bool, cur string) bool { return exists && cur == etag })
}

func (s *memObjects) PutIfAbsent(_ context.Context, key string, body []byte) (string, error) {
	return s.put(key, body, func(exists bool, _ string) bool { return !exists })
}

func (s *memObjects) Size(_ context.Context, key string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return 0, store.ErrNotFound
	}
	return int64(len(b)), nil
}

func (s *memObjects) writes() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.putSize
}

func readAll(t testing.TB, ctx context.Context, objs Objects, root contract.Manifest) []contract.ObjectEntry {
	t.Helper()
	var out []contract.ObjectEntry
	for _, ref := range root.Parts {
		b, err := objs.Get(ctx, ref.Key)
		if err != nil {
			t.Fatal(err)
		}
		p, err := contract.DecodePart(ref, b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Objects...)
	}
	return out
}

func TestBulkLoadLayout(t *testing.T) {
	ctx := context.Background()
	objs := newMem()
	p := New(objs, time.Now, Options{MaxPartObjects: 64}, nil)
	if _, err := p.Create(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	syn := Synthetic{Collection: "c", Objects: 1000}
	head, err := p.BulkLoad(ctx, "c", syn.Objects, syn.Object)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.Read(ctx, "c") // strict decode and validation of the root
	if err != nil {
		t.Fatal(err)
	}
	if snap.Head != head || len(snap.Root.Parts) != 16 || len(snap.Root.Change.Added) != 1000 || snap.Root.Summary.Objects != 1000 {
		t.Fatalf("bulk root: %d parts, %d added, summary %+v", len(snap.Root.Parts), len(snap.Root.Change.Added), snap.Root.Summary)
	}
	for i, ref := range snap.Root.Parts {
		if want := min(64, 1000-64*i); ref.ObjectCount != want {
			t.Fatalf("part %d holds %d objects, want %d", i, ref.ObjectCount, want)
		}
	}
	got := readAll(t, ctx, objs, snap.Root) // every part verified and strictly decoded
	levels := map[int]int{}
	for i, o := range got {
		if o != syn.Object(i) {
			t.Fatalf("object %d: %+v, want %+v", i, o, syn.Object(i))
		}
		levels[o.Level]++
	}
	if levels[0] == 0 || levels[1] == 0 || levels[2] == 0 {
		t.Fatalf("levels %v: want objects at l0, l1 and l2", levels)
	}
	// An ordinary commit on top rewrites only what it touches.
	rem := []contract.ObjectEntry{syn.Object(5), syn.Object(500)}
	add := []contract.ObjectEntry{{Key: contract.AppendSegmentKey("c", 1, 3, 0), Size: 1, Checksum: contract.Checksum([]byte("x")), Tier: contract.TierHot,
		DocCount: 1, MinSeq: snap.Root.NextSeq, MaxSeq: snap.Root.NextSeq}}
	h3, err := p.Commit(ctx, "c", func(context.Context, Snapshot) (Change, error) {
		return Change{Added: add, Removed: rem, Origin: contract.Origin{Kind: contract.OriginAppend}, Seqs: 1}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s3, err := p.Read(ctx, "c")
	if err != nil || s3.Head != h3 {
		t.Fatal(err)
	}
	shared := 0
	for _, r := range s3.Root.Parts {
		if slices.ContainsFunc(snap.Root.Parts, func(o contract.PartRef) bool { return o.Key == r.Key && o.Checksum == r.Checksum }) {
			shared++
		}
	}
	if shared < 13 || len(readAll(t, ctx, objs, s3.Root)) != 999 {
		t.Fatalf("v3 shares %d of v2's 16 parts; want at least 13 (a change touching 2 parts)", shared)
	}
}

const commitObjects = 1_000_000

type commitFixture struct {
	objs    *memObjects
	p       *Publisher
	syn     Synthetic
	rng     *rand.Rand
	removed map[int]bool
	full    []byte // the full-manifest baseline's current manifest
	fullSum string
	err     error
}

var (
	commitOnce sync.Once
	commitFix  *commitFixture
)

func loadCommit(b *testing.B) *commitFixture {
	b.Helper()
	commitOnce.Do(func() {
		start := time.Now()
		f := &commitFixture{objs: newMem(), syn: Synthetic{Collection: "bench", Objects: commitObjects}, rng: rand.New(rand.NewPCG(3, 3)), removed: map[int]bool{}}
		f.p = New(f.objs, time.Now, Options{}, nil)
		commitFix, f.err = f, f.build()
		if f.err == nil {
			fmt.Printf("publisher bench fixture: %d objects, full manifest %d MB, built in %s\n", commitObjects, len(f.full)>>20, time.Since(start).Round(time.Millisecond))
		}
	})
	if commitFix.err != nil {
		b.Fatal(commitFix.err)
	}
	return commitFix
}

func (f *commitFixture) build() error {
	ctx := context.Background()
	if _, err := f.p.Create(ctx, "bench"); err != nil {
		return err
	}
	if _, err := f.p.BulkLoad(ctx, "bench", commitObjects, f.syn.Object); err != nil {
		return err
	}
	// One ordinary commit so that the head's root is small.
	if _, err := f.p.Commit(ctx, "bench", f.change); err != nil {
		return err
	}
	head, objects := readAllB(ctx, f)
	m := fullManifest{SchemaVersion: contract.SchemaVersion, Collection: "bench", Version: head.Version, Objects: objects}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	f.full, f.fullSum = body, contract.Checksum(body)
	runtime.GC()
	return nil
}

func readAllB(ctx context.Context, f *commitFixture) (contract.Head, []contract.ObjectEntry) {
	s, err := f.p.Read(ctx, "bench")
	if err != nil {
		panic(err)
	}
	var out []contract.ObjectEntry
	for _, ref := range s.Root.Parts {
		p, err := f.p.loadPart(ctx, ref)
		if err != nil {
			panic(err)
		}
		out = append(out, p.Objects...)
	}
	return s.Head, out
}

// change removes 10 objects spread over the key range and adds 10 level-0
// segments.
func (f *commitFixture) change(_ context.Context, base Snapshot) (Change, error) {
	ch := Change{Origin: contract.Origin{Kind: contract.OriginCutover, RequestID: fmt.Sprintf("bench-%d", base.Head.Version+1)}}
	for len(ch.Removed) < 10 {
		i := f.rng.IntN(commitObjects)
		if !f.removed[i] {
			f.removed[i] = true
			ch.Removed = append(ch.Removed, f.syn.Object(i))
		}
	}
	seq := base.Root.NextSeq
	for n := range 10 {
		key := contract.AppendSegmentKey("bench", 1, base.Head.Version+1, n)
		ch.Added = append(ch.Added, contract.ObjectEntry{Key: key, Size: 4 << 20, Checksum: contract.Checksum([]byte(key)), Tier: contract.TierHot,
			DocCount: 1000, MinTsUnixMs: base.Root.CommitTsUnixMs, MaxTsUnixMs: base.Root.CommitTsUnixMs + 1, MinSeq: seq, MaxSeq: seq + 999})
		seq += 1000
		ch.Seqs += 1000
	}
	return ch, nil
}

type fullManifest struct {
	SchemaVersion int                    `json:"schema_version"`
	Collection    string                 `json:"collection"`
	Version       uint64                 `json:"version"`
	Objects       []contract.ObjectEntry `json:"objects"`
}

// fullCommit is the baseline publisher: read, verify and strictly decode
// the whole manifest, apply the change, encode, hash and write it.
func (f *commitFixture) fullCommit(ctx context.Context) error {
	body := bytes.Clone(f.full) // the GetObject body
	if err := contract.VerifyChecksum("full", body, f.fullSum); err != nil {
		return err
	}
	var m fullManifest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	ch, _ := f.change(ctx, Snapshot{Head: contract.Head{Version: m.Version}, Root: contract.Manifest{NextSeq: 1 << 40}})
	byKey := func(o contract.ObjectEntry, k string) int { return cmp.Compare(o.Key, k) }
	for _, r := range ch.Removed {
		j, ok := slices.BinarySearchFunc(m.Objects, r.Key, byKey)
		if !ok {
			return fmt.Errorf("remove %s: absent", r.Key)
		}
		m.Objects = slices.Delete(m.Objects, j, j+1)
	}
	for _, a := range ch.Added {
		j, ok := slices.BinarySearchFunc(m.Objects, a.Key, byKey)
		if ok {
			return fmt.Errorf("add %s: present", a.Key)
		}
		m.Objects = slices.Insert(m.Objects, j, a)
	}
	m.Version++
	out, err := json.Marshal(m)
	if err != nil {
		return err
	}
	sum := contract.Checksum(out)
	// One key for every version keeps the in-memory bucket from growing by
	// a full manifest per op; the write itself is the same.
	if _, err := f.objs.Put(ctx, "collections/bench/manifests/full.json", out); err != nil {
		return err
	}
	f.full, f.fullSum = out, sum
	return nil
}

// measureOps runs op b.N times (timer running only around op) and reports
// CPU, allocation, peak heap and writes per op.
func measureOps(b *testing.B, f *commitFixture, op func() error) {
	var cpu time.Duration
	var alloc, peakAll uint64
	puts0, size0 := f.objs.writes()
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		mp := memprobe.Start()
		b.StartTimer()
		err := op()
		b.StopTimer()
		res := mp.Stop()
		if err != nil {
			b.Fatal(err)
		}
		cpu += res.CPU
		alloc += res.Allocated
		peakAll = max(peakAll, res.PeakHeapInuse)
	}
	puts, size := f.objs.writes()
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
	b.ReportMetric(float64(alloc)/(1<<20)/n, "alloc-MB/op")
	b.ReportMetric(float64(peakAll)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(puts-puts0)/n, "puts/op")
	b.ReportMetric(float64(size-size0)/(1<<20)/n, "MB-written/op")
}

// BenchmarkCommit: Publisher.Commit of a +10/-10 change on 1,000,000 objects.
func BenchmarkCommit(b *testing.B) {
	f := loadCommit(b)
	ctx := context.Background()
	measureOps(b, f, func() error {
		_, err := f.p.Commit(ctx, "bench", f.change)
		return err
	})
}

// BenchmarkCommitBaseline: the same change applied by rewriting one full
// manifest of the same objects.
func BenchmarkCommitBaseline(b *testing.B) {
	f := loadCommit(b)
	ctx := context.Background()
	measureOps(b, f, func() error { return f.fullCommit(ctx) })
}
