package segment

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/testkit/memprobe"
)

// benchSizes are total input sizes (four inputs each): the merge's peak heap
// must stay flat across them while the bytes grow 16x.
var benchSizes = []int64{4 << 20, 16 << 20, 64 << 20}

const benchInputs = 4

// benchFiles writes benchInputs segments totalling about total bytes into
// files (so the inputs are not on the heap, as S3 objects would not be). A
// quarter of each input's keys also appear in the next input.
func benchFiles(b *testing.B, total int64) ([]*os.File, int64) {
	b.Helper()
	const payload = 100
	per := int(total / benchInputs / (payload + recordHeader + 11))
	dir := b.TempDir()
	files := make([]*os.File, benchInputs)
	var size int64
	for i := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("in-%d.seg", i)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		w := NewWriter(f, WriterOptions{})
		body := make([]byte, payload)
		for j := 0; j < per; j++ {
			body[0], body[1] = byte(i), byte(j)
			r := Record{Key: fmt.Sprintf("k%010d", j*3+i), Seq: uint64(i*per + j + 1), Delete: j%50 == 0, TsUnixMs: int64(j), Payload: body}
			if err := w.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		ft, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		size += ft.Size
		files[i] = f
	}
	return files, size
}

func rawCopy(b *testing.B, files []*os.File) {
	for _, f := range files {
		st, err := f.Stat()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, io.NewSectionReader(f, 0, st.Size())); err != nil {
			b.Fatal(err)
		}
	}
}

func mergeFiles(b *testing.B, files []*os.File) MergeStats {
	its := make([]*Iterator, len(files))
	for i, f := range files {
		st, err := f.Stat()
		if err != nil {
			b.Fatal(err)
		}
		r, err := Open(f, st.Size())
		if err != nil {
			b.Fatal(err)
		}
		its[i] = r.Iter()
	}
	out := OutputFuncs{New: func(int) (io.Writer, error) { return io.Discard, nil }}
	stats, err := Merge(context.Background(), its, out, MergeOptions{DropDeletes: true, TargetObjectBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	return stats
}

// BenchmarkMerge reports merge throughput over the input bytes, the ratio of
// its time to a raw copy of the same bytes through the same ReaderAt measured
// in the same run, and the peak heap above the starting heap.
func BenchmarkMerge(b *testing.B) {
	for _, total := range benchSizes {
		b.Run(fmt.Sprintf("in=%dMiB", total>>20), func(b *testing.B) {
			files, size := benchFiles(b, total)
			rawStart := time.Now()
			rawCopy(b, files)
			raw := time.Since(rawStart)
			b.SetBytes(size)
			probe := memprobe.Start()
			b.ResetTimer()
			var stats MergeStats
			for b.Loop() {
				stats = mergeFiles(b, files)
			}
			b.StopTimer()
			peak := probe.Stop().PeakHeapAlloc
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(raw), "x-rawcopy")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(stats.RecordsOut), "records-out")
		})
	}
}

// BenchmarkRawCopy copies the same input bytes through the same ReaderAt
// with io.Copy: the floor the merge is compared to.
func BenchmarkRawCopy(b *testing.B) {
	for _, total := range benchSizes {
		b.Run(fmt.Sprintf("in=%dMiB", total>>20), func(b *testing.B) {
			files, size := benchFiles(b, total)
			b.SetBytes(size)
			probe := memprobe.Start()
			b.ResetTimer()
			for b.Loop() {
				rawCopy(b, files)
			}
			b.StopTimer()
			b.ReportMetric(float64(probe.Stop().PeakHeapAlloc)/(1<<20), "peak-heap-MiB")
		})
	}
}
