package compact

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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

func benchTask() contract.Task { return benchTaskAt(9) }

// benchTaskAt is a compaction task of the bench collection based on
// version v: its outputs' keys embed its id.
func benchTaskAt(v uint64) contract.Task {
	return contract.NewTask(contract.KindCompaction, benchCollection, v, "sha256:"+fmt.Sprintf("%064d", v), 0, 0)
}

// benchMerge runs the executor's merge path (segment iterators over the
// objects' ReaderAt, outputs PUT under the task's keys, heartbeat per output).
func benchMerge(b *testing.B, objects Objects, task contract.Task, inputs []contract.ObjectEntry) segment.MergeStats {
	ctx := context.Background()
	e := NewExecutor(objects, benchLeases{}, nil, nil, time.Now,
		ExecConfig{Policy: Policy{TargetObjectBytes: 16 << 20}, LeaseDuration: time.Minute, Guards: guard.All()}, nil, nil)
	ls, err := e.leases.Acquire(ctx, task, fmt.Sprintf("bench-%d", time.Now().UnixNano()), time.Now(), time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	job := Job{Tier: contract.TierHot, Inputs: inputs, OutputLevel: 1, DropDeletes: true}
	keep, err := lease.NewKeeper(e.leases, ls, task, time.Now, time.Now(), time.Minute, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	_, stats, err := e.merge(ctx, task, keep, job, nil)
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

// benchLatencies are the fixed per-request delays the embedded S3 adds in
// BenchmarkExecutorMergeS3: none, and about what real S3's first byte
// takes.
var benchLatencies = []time.Duration{0, 10 * time.Millisecond}

// BenchmarkExecutorMergeS3 measures the executor's merge through the S3
// Bucket adapter on the embedded stack against a raw copy of the same
// bytes, without and with a fixed delay per S3 request
// (localaws.Options.S3Latency). Every iteration is one paired round: a
// raw copy (one GET of each input, written back through the same
// streaming upload path the merge's outputs take) and the merge, in
// alternating order, so both see the same machine state. Reported:
//
//	merge-speed/rawcopy  median over rounds of raw copy time ÷ merge time
//	                     (1: as fast as copying the bytes; higher is faster)
//	merge-ms, rawcopy-ms medians of the two
//	GETs/job, GETs/MiB   S3 GETs of one merge (per MiB of input)
//	PUTs/job             S3 write requests of one merge (PUT, parts, completes)
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
	version := uint64(9)
	for _, lat := range benchLatencies {
		for _, total := range benchTotals[1:] {
			b.Run(fmt.Sprintf("lat=%dms/in=%dMiB", lat.Milliseconds(), total>>20), func(b *testing.B) {
				stack.SetS3Latency(0)
				inputs, size := benchPut(b, bucket, total)
				stack.SetS3Latency(lat)
				defer stack.SetS3Latency(0)
				var ratios, merges, raws []float64
				var gets, puts int
				var stats segment.MergeStats
				b.SetBytes(size)
				b.ResetTimer()
				for round := 0; b.Loop(); round++ {
					copyRound := func() {
						t := time.Now()
						rawCopy(b, bucket, inputs)
						raws = append(raws, float64(time.Since(t)))
					}
					if round%2 == 1 {
						copyRound()
					}
					before := stack.Counter().Snapshot()
					t := time.Now()
					// A task of its own per round: outputs are created
					// with If-None-Match, under keys that embed the task
					// id, so a round reusing a task would find the
					// previous round's (or size's) output there.
					version++
					stats = benchMerge(b, bucket, benchTaskAt(version), inputs)
					merges = append(merges, float64(time.Since(t)))
					calls := stack.Counter().Since(before)
					gets, puts = calls["s3:GetObject"], calls["s3:PutObject"]+calls["s3:UploadPart"]+calls["s3:CreateMultipartUpload"]+calls["s3:CompleteMultipartUpload"]
					if round%2 == 0 {
						copyRound()
					}
					ratios = append(ratios, raws[len(raws)-1]/merges[len(merges)-1])
				}
				b.StopTimer()
				b.ReportMetric(median(ratios), "merge-speed/rawcopy")
				b.ReportMetric(median(merges)/1e6, "merge-ms")
				b.ReportMetric(median(raws)/1e6, "rawcopy-ms")
				b.ReportMetric(float64(gets), "GETs/job")
				b.ReportMetric(float64(gets)/(float64(size)/(1<<20)), "GETs/MiB")
				b.ReportMetric(float64(puts), "PUTs/job")
				b.ReportMetric(float64(stats.BytesWritten)/float64(size), "out/in")
			})
		}
	}
}

// benchPut stores the benchmark's inputs of total bytes and returns their
// manifest entries.
func benchPut(b *testing.B, bucket *awsio.Bucket, total int64) ([]contract.ObjectEntry, int64) {
	ctx := context.Background()
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
	return inputs, size
}

// rawCopy is the baseline: one GET of each input, written back through
// the bucket's streaming upload (the path merge outputs take).
func rawCopy(b *testing.B, bucket *awsio.Bucket, inputs []contract.ObjectEntry) {
	ctx := context.Background()
	for _, in := range inputs {
		body, err := bucket.Get(ctx, in.Key)
		if err != nil {
			b.Fatal(err)
		}
		up, err := bucket.Create(ctx, "copy/"+in.Key)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := up.Write(body); err != nil {
			b.Fatal(err)
		}
		if err := up.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
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
// streamed (as to S3, through multipart uploads): inputs hold at most two
// read ranges each (compaction.read_range_bytes) and outputs a write
// buffer, so past two ranges per input the peak must not grow with the
// input or output size. BenchmarkExecutorMergeHeapBaselineBuffered is the same
// merge into a store that cannot stream, where each output is buffered whole
// (bounded by the 16 MiB target object size).
func BenchmarkExecutorMergeHeap(b *testing.B) { mergeHeap(b, true) }

// BenchmarkExecutorMergeHeapBaselineBuffered: see BenchmarkExecutorMergeHeap.
func BenchmarkExecutorMergeHeapBaselineBuffered(b *testing.B) { mergeHeap(b, false) }

// heapTotals are the input sizes of the heap benchmarks: up to 64 MiB
// (16 MiB inputs) an input holds less than two read ranges, from there on
// it holds two whatever its size, so 64 and 256 MiB must peak alike.
var heapTotals = []int64{4 << 20, 16 << 20, 64 << 20, 256 << 20}

func mergeHeap(b *testing.B, streamed bool) {
	for _, total := range heapTotals {
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
				benchMerge(b, objs, benchTask(), inputs)
			}
			b.StopTimer()
			res := probe.Stop()
			b.ReportMetric(float64(res.PeakHeapAlloc)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(res.PeakLive)/(1<<20), "peak-live-MiB")
		})
	}
}
