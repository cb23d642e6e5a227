package lineage_test

// Full streaming read of a collection's object set (issue 7): Reader.Each
// reads, verifies (sha256 against the root's pin) and strictly decodes one
// part at a time. Its peak heap must not grow with the collection, so it
// runs at 250,000 and 1,000,000 objects.
//
// Baselines, measured in the same run on the same bytes:
//
//	BenchmarkEachBaseline              plain encoding/json decoding of the
//	                                   same part bodies, read the same way,
//	                                   without checksum, strictness or
//	                                   validation;
//	BenchmarkEachBaselineFullManifest  plain encoding/json decoding of the
//	                                   same objects as one manifest document
//	                                   (the full-manifest format).
//
// The objects live in a file, not on the heap (as S3 objects would not be
// in a function), and every Get allocates a fresh buffer for the body, as
// an S3 GetObject does. Metrics: MB/s (bytes decoded), objects/s, and
// peak-heap-MB (HeapInuse peak above the heap after a forced GC, sampled
// every millisecond) and peak-live-MB (the largest live heap a GC cycle
// marked during the run, above the live heap at start). No timing is
// asserted.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/testkit/memprobe"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/store"
)

var streamSizes = []int{250_000, 1_000_000}

const streamCollection = "bench"

// fileObjects keeps object bodies in one append-only file.
type fileObjects struct {
	f   *os.File
	mu  sync.Mutex
	idx map[string][2]int64 // key -> offset, length
	end int64
}

func (s *fileObjects) put(_ context.Context, key string, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.WriteAt(body, s.end); err != nil {
		return err
	}
	s.idx[key] = [2]int64{s.end, int64(len(body))}
	s.end += int64(len(body))
	return nil
}

func (s *fileObjects) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	at, ok := s.idx[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, store.ErrNotFound)
	}
	b := make([]byte, at[1])
	if _, err := s.f.ReadAt(b, at[0]); err != nil {
		return nil, err
	}
	return b, nil
}

// streamFixture is one collection's parts and its full manifest.
type streamFixture struct {
	objects   *fileObjects
	root      contract.Manifest // parts and summary only
	partBytes int64
	fullKey   string
	fullBytes int64
}

var (
	streamMu  sync.Mutex
	streamFix = map[int]*streamFixture{}
	streamDir string
)

func loadStream(b *testing.B, n int) *streamFixture {
	b.Helper()
	streamMu.Lock()
	defer streamMu.Unlock()
	if f, ok := streamFix[n]; ok {
		return f
	}
	if streamDir == "" {
		d, err := os.MkdirTemp("", "lineage-bench-")
		if err != nil {
			b.Fatal(err)
		}
		streamDir = d // removed by TestMain
	}
	start := time.Now()
	f, err := buildStream(n)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("lineage bench fixture: %d objects in %d parts (%d MB), full manifest %d MB, built in %s\n",
		n, len(f.root.Parts), f.partBytes>>20, f.fullBytes>>20, time.Since(start).Round(time.Millisecond))
	streamFix[n] = f
	runtime.GC()
	return f
}

func buildStream(n int) (*streamFixture, error) {
	ctx := context.Background()
	file, err := os.Create(filepath.Join(streamDir, fmt.Sprintf("objects-%d", n)))
	if err != nil {
		return nil, err
	}
	objs := &fileObjects{f: file, idx: map[string][2]int64{}}
	syn := publisher.Synthetic{Collection: streamCollection, Objects: n}
	var partBytes int64
	put := func(ctx context.Context, key string, body []byte) error {
		partBytes += int64(len(body))
		return objs.put(ctx, key, body)
	}
	refs, summary, err := publisher.BuildParts(ctx, streamCollection, 2, n, syn.Object, 4096, put)
	if err != nil {
		return nil, err
	}
	f := &streamFixture{objects: objs, partBytes: partBytes,
		root: contract.Manifest{SchemaVersion: contract.SchemaVersion, Collection: streamCollection, Version: 2, Parts: refs, Summary: summary}}
	// The same objects as one manifest, encoded once with encoding/json.
	full := fullManifest{SchemaVersion: contract.SchemaVersion, Collection: streamCollection, Version: 2, ParentVersion: 1,
		CommitTsUnixMs: time.Now().UnixMilli(), NextSeq: 1 << 40, Objects: make([]contract.ObjectEntry, n)}
	for i := range full.Objects {
		full.Objects[i] = syn.Object(i)
	}
	body, err := json.Marshal(full)
	if err != nil {
		return nil, err
	}
	f.fullKey, f.fullBytes = contract.ManifestKey(streamCollection, 1, 2, contract.Checksum(body)), int64(len(body))
	return f, objs.put(ctx, f.fullKey, body)
}

// fullManifest is the single-document format of the baseline.
type fullManifest struct {
	SchemaVersion  int                    `json:"schema_version"`
	Collection     string                 `json:"collection"`
	Version        uint64                 `json:"version"`
	ParentVersion  uint64                 `json:"parent_version"`
	CommitTsUnixMs int64                  `json:"commit_ts_unix_ms"`
	NextSeq        uint64                 `json:"next_seq"`
	Objects        []contract.ObjectEntry `json:"objects"`
}

func TestMain(m *testing.M) {
	code := m.Run()
	if streamDir != "" {
		os.RemoveAll(streamDir)
	}
	os.Exit(code)
}

// sink consumes objects so decoding cannot be skipped.
type sink struct {
	objects int64
	bytes   int64
}

func (s *sink) add(o contract.ObjectEntry) error {
	s.objects++
	s.bytes += o.Size
	return nil
}

// runStream runs one read of the whole set per op at every size; full says
// the op decodes the single-document manifest (for MB/s).
func runStream(b *testing.B, full bool, one func(f *streamFixture, s *sink) error) {
	for _, n := range streamSizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			f := loadStream(b, n)
			b.SetBytes(f.partBytes)
			if full {
				b.SetBytes(f.fullBytes)
			}
			probe := memprobe.Start()
			b.ResetTimer()
			for range b.N {
				var s sink
				if err := one(f, &s); err != nil {
					b.Fatal(err)
				}
				if s.objects != int64(n) || s.bytes != f.root.Summary.Bytes {
					b.Fatalf("read %d objects (%d bytes), want %d (%d)", s.objects, s.bytes, n, f.root.Summary.Bytes)
				}
			}
			b.StopTimer()
			res := probe.Stop()
			peak, live := res.PeakHeapInuse, res.PeakLive
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "objects/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(live)/(1<<20), "peak-live-MB")
		})
	}
}

// BenchmarkEach streams the whole set through lineage.Reader.Each, every
// part verified against its checksum and strictly decoded.
func BenchmarkEach(b *testing.B) {
	ctx := context.Background()
	runStream(b, false, func(f *streamFixture, s *sink) error {
		r := lineage.New(f.objects, 0)
		return r.Each(ctx, &f.root, nil, s.add)
	})
}

// BenchmarkEachBaseline decodes the same part bodies with plain
// encoding/json: no checksum, no unknown-field check, no validation.
func BenchmarkEachBaseline(b *testing.B) {
	ctx := context.Background()
	runStream(b, false, func(f *streamFixture, s *sink) error {
		for _, ref := range f.root.Parts {
			body, err := f.objects.Get(ctx, ref.Key)
			if err != nil {
				return err
			}
			var p contract.Part
			if err := json.Unmarshal(body, &p); err != nil {
				return err
			}
			for _, o := range p.Objects {
				_ = s.add(o)
			}
		}
		return nil
	})
}

// BenchmarkEachBaselineFullManifest decodes the same objects as one
// manifest document with plain encoding/json.
func BenchmarkEachBaselineFullManifest(b *testing.B) {
	ctx := context.Background()
	runStream(b, true, func(f *streamFixture, s *sink) error {
		body, err := f.objects.Get(ctx, f.fullKey)
		if err != nil {
			return err
		}
		var m fullManifest
		if err := json.Unmarshal(body, &m); err != nil {
			return err
		}
		for _, o := range m.Objects {
			_ = s.add(o)
		}
		return nil
	})
}
