package compact

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/store"
	"github.com/searchfabric/bcc/shared/testkit/memprobe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/guard"
)

const benchCollection = "bench"

// benchInput encodes one input segment of about size bytes: keys i, i+n,
// i+2n... so the inputs interleave, seqs disjoint per input.
func benchInput(i, inputs int, size int64) []byte {
	const payload = 100
	per := int(size / (payload + 40))
	var buf bytes.Buffer
	w := segment.NewWriter(&buf, segment.WriterOptions{})
	body := make([]byte, payload)
	for j := range per {
		body[0], body[1] = byte(i), byte(j)
		r := segment.Record{Key: fmt.Sprintf("k%010d", j*inputs+i), Seq: uint64(i*per + j + 1), Delete: j%50 == 0, TsUnixMs: int64(j), Payload: body}
		if err := w.Add(r); err != nil {
			panic(err)
		}
	}
	if _, err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func benchEntry(key string, b []byte, seg *segment.Reader) contract.ObjectEntry {
	return seg.Footer().Entry(key, int64(len(b)), contract.Checksum(b), contract.TierHot, 0)
}

func benchTask() contract.Task {
	return contract.NewTask(contract.KindCompaction, benchCollection, 9, "sha256:"+fmt.Sprintf("%064d", 9), 0, 0)
}

// benchMerge runs the executor's merge path (segment iterators over the
// objects' ReaderAt, outputs PUT under the task's keys, heartbeat per output).
func benchMerge(b *testing.B, objects Objects, inputs []contract.ObjectEntry) segment.MergeStats {
	ctx := context.Background()
	e := NewExecutor(objects, benchLeases{}, nil, nil, time.Now,
		ExecConfig{Policy: Policy{TargetObjectBytes: 16 << 20}, LeaseDuration: time.Minute, Guards: guard.All()}, nil, nil)
	task := benchTask()
	ls, err := e.leases.Acquire(ctx, task, fmt.Sprintf("bench-%d", time.Now().UnixNano()), time.Now(), time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	job := Job{Tier: contract.TierHot, Inputs: inputs, OutputLevel: 1, DropDeletes: true}
	keep, err := lease.NewKeeper(e.leases, ls, task, time.Now, time.Now(), time.Minute, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	_, stats, err := e.merge(ctx, task, keep, job)
	if err != nil {
		b.Fatal(err)
	}
	return stats
}

// benchLeases grants every lease: the benchmark measures the merge.
type benchLeases struct{}

func (benchLeases) Acquire(_ context.Context, t contract.Task, holder string, now time.Time, d time.Duration) (contract.Lease, error) {
	return contract.Lease{TaskID: t.TaskID, Kind: t.Kind, Collection: t.Collection, BaseManifestVersion: t.BaseManifestVersion,
		BaseManifestChecksum: t.BaseManifestChecksum, Holder: holder, LeaseEpoch: 1, LeaseExpiryUnixMs: now.Add(d).UnixMilli()}, nil
}

func (benchLeases) Extend(_ context.Context, l contract.Lease, now time.Time, d time.Duration) (contract.Lease, error) {
	l.LeaseExpiryUnixMs = now.Add(d).UnixMilli()
	return l, nil
}

func (benchLeases) Complete(context.Context, contract.Lease, time.Time) error { return nil }

var benchTotals = []int64{4 << 20, 16 << 20, 64 << 20}

const benchInputs = 4

// BenchmarkExecutorMergeS3 measures the executor's merge through the S3
// Bucket adapter on the embedded stack (ranged GETs per block, PUT per
// output) and reports its time as a ratio to a raw copy (GET + PUT of every
// input through the same adapter) measured in the same run.
func BenchmarkExecutorMergeS3(b *testing.B) {
	stack, err := localaws.Start(localaws.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer stack.Close()
	cl := stack.Clients()
	ctx := context.Background()
	if _, err := cl.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	bucket := awsio.NewBucket(cl.S3, "bench")
	for _, total := range benchTotals {
		b.Run(fmt.Sprintf("in=%dMiB", total>>20), func(b *testing.B) {
			var inputs []contract.ObjectEntry
			var size int64
			for i := range benchInputs {
				body := benchInput(i, benchInputs, total/benchInputs)
				key := contract.AppendSegmentKey(benchCollection, 1, uint64(total>>20), i)
				if _, err := bucket.Put(ctx, key, body); err != nil {
					b.Fatal(err)
				}
				r, err := segment.Open(bytes.NewReader(body), int64(len(body)))
				if err != nil {
					b.Fatal(err)
				}
				inputs = append(inputs, benchEntry(key, body, r))
				size += int64(len(body))
			}
			rawStart := time.Now()
			for _, in := range inputs {
				body, err := bucket.Get(ctx, in.Key)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bucket.Put(ctx, "copy/"+in.Key, body); err != nil {
					b.Fatal(err)
				}
			}
			raw := time.Since(rawStart)
			b.SetBytes(size)
			b.ResetTimer()
			var stats segment.MergeStats
			for b.Loop() {
				stats = benchMerge(b, bucket, inputs)
			}
			b.StopTimer()
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(raw), "merge/rawcopy")
			b.ReportMetric(float64(stats.BytesWritten)/float64(size), "out/in")
		})
	}
}

// fileObjects serves objects from files, so the heap measured is the
// merge's own (an in-process S3 keeps every object on the heap).
type fileObjects struct{ dir string }

func (f fileObjects) path(key string) string { return filepath.Join(f.dir, filepath.FromSlash(key)) }

func (f fileObjects) Get(_ context.Context, key string) ([]byte, error) {
	return os.ReadFile(f.path(key))
}

func (f fileObjects) ReaderAt(_ context.Context, key string, _ int64) io.ReaderAt {
	fh, err := os.Open(f.path(key))
	if err != nil {
		return errReaderAt{err}
	}
	return fh // closed with the process; benchmark only
}

func (f fileObjects) Put(_ context.Context, key string, body []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(f.path(key)), 0o755); err != nil {
		return "", err
	}
	return "", os.WriteFile(f.path(key), body, 0o644)
}

// streamingFiles also implements Streamer: outputs go to their file as
// they are written, as multipart uploads go to S3.
type streamingFiles struct{ fileObjects }

func (f streamingFiles) Create(_ context.Context, key string) (store.Upload, error) {
	if err := os.MkdirAll(filepath.Dir(f.path(key)), 0o755); err != nil {
		return nil, err
	}
	fh, err := os.Create(f.path(key) + ".part")
	if err != nil {
		return nil, err
	}
	return &fileUpload{f: fh, w: bufio.NewWriterSize(fh, 1<<20), final: f.path(key)}, nil
}

type fileUpload struct {
	f     *os.File
	w     *bufio.Writer
	final string
}

func (u *fileUpload) Write(p []byte) (int, error) { return u.w.Write(p) }

func (u *fileUpload) Close() error {
	if err := u.w.Flush(); err != nil {
		return err
	}
	if err := u.f.Close(); err != nil {
		return err
	}
	return os.Rename(u.f.Name(), u.final)
}

func (u *fileUpload) Abort() error { u.f.Close(); return os.Remove(u.f.Name()) }

type errReaderAt struct{ err error }

func (e errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, e.err }

// BenchmarkExecutorMergeHeap reports the merge path's peak heap above the
// starting heap for inputs of growing size (inputs on disk), with outputs
// streamed (as to S3, through multipart uploads): inputs hold one block
// each and outputs a write buffer, so the peak must not grow with the input
// or output size. BenchmarkExecutorMergeHeapBaselineBuffered is the same
// merge into a store that cannot stream, where each output is buffered whole
// (bounded by the 16 MiB target object size).
func BenchmarkExecutorMergeHeap(b *testing.B) { mergeHeap(b, true) }

// BenchmarkExecutorMergeHeapBaselineBuffered: see BenchmarkExecutorMergeHeap.
func BenchmarkExecutorMergeHeapBaselineBuffered(b *testing.B) { mergeHeap(b, false) }

func mergeHeap(b *testing.B, streamed bool) {
	for _, total := range benchTotals {
		b.Run(fmt.Sprintf("in=%dMiB", total>>20), func(b *testing.B) {
			files := fileObjects{dir: b.TempDir()}
			var objs Objects = files
			if streamed {
				objs = streamingFiles{files}
			}
			var inputs []contract.ObjectEntry
			var size int64
			for i := range benchInputs {
				body := benchInput(i, benchInputs, total/benchInputs)
				key := contract.AppendSegmentKey(benchCollection, 1, 1, i)
				if _, err := files.Put(context.Background(), key, body); err != nil {
					b.Fatal(err)
				}
				r, _ := segment.Open(bytes.NewReader(body), int64(len(body)))
				inputs = append(inputs, benchEntry(key, body, r))
				size += int64(len(body))
			}
			b.SetBytes(size)
			probe := memprobe.Start()
			b.ResetTimer()
			for b.Loop() {
				benchMerge(b, objs, inputs)
			}
			b.StopTimer()
			b.ReportMetric(float64(probe.Stop().PeakHeapAlloc)/(1<<20), "peak-heap-MiB")
		})
	}
}
