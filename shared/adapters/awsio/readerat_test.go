package awsio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// rangeS3 serves GetObject ranges of one object from memory. Other
// methods are not used by ReaderAt.
type rangeS3 struct {
	S3API
	obj         []byte
	ignoreRange bool // answer the whole object, as a server without range support would
	short       int  // drop this many bytes from each body
}

func (f *rangeS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	var start, end int64
	if _, err := fmt.Sscanf(aws.ToString(in.Range), "bytes=%d-%d", &start, &end); err != nil || f.ignoreRange {
		return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(f.obj)), ContentLength: aws.Int64(int64(len(f.obj)))}, nil
	}
	end = min(end, int64(len(f.obj))-1)
	body := f.obj[start : end+1-int64(f.short)]
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: aws.Int64(int64(len(body))),
		ContentRange: aws.String(fmt.Sprintf("bytes %d-%d/%d", start, end, len(f.obj)))}, nil
}

// A ranged read goes straight into the caller's buffer: reading a 4 MiB
// block allocates far less than 4 MiB (io.ReadAll plus a copy allocated
// about twice the block).
func TestReaderAtReadsIntoTheCallersBuffer(t *testing.T) {
	obj := make([]byte, 8<<20)
	for i := range obj {
		obj[i] = byte(i * 7)
	}
	b := NewBucket(&rangeS3{obj: obj}, "b")
	r := b.ReaderAt(context.Background(), "k", int64(len(obj)))
	p := make([]byte, 4<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := r.ReadAt(p, 1<<20)
	runtime.ReadMemStats(&after)
	if err != nil || n != len(p) || !bytes.Equal(p, obj[1<<20:5<<20]) {
		t.Fatalf("read %d, %v", n, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
		t.Fatalf("reading %d bytes allocated %d bytes", len(p), alloc)
	}

	// At the end of the object: the bytes there, then io.EOF.
	n, err = r.ReadAt(p[:100], int64(len(obj)-40))
	if n != 40 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:40], obj[len(obj)-40:]) {
		t.Fatalf("tail read %d, %v", n, err)
	}
	if _, err := r.ReadAt(p[:1], int64(len(obj))); !errors.Is(err, io.EOF) {
		t.Fatalf("read past the end: %v", err)
	}

	// A server that ignores the range, or a short body, is an error, never
	// misplaced or missing bytes.
	if _, err := NewBucket(&rangeS3{obj: obj, ignoreRange: true}, "b").ReaderAt(context.Background(), "k", int64(len(obj))).ReadAt(p[:10], 5); err == nil {
		t.Fatal("a whole-object answer to a ranged read was accepted")
	}
	if _, err := NewBucket(&rangeS3{obj: obj, short: 1}, "b").ReaderAt(context.Background(), "k", int64(len(obj))).ReadAt(p[:10], 5); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v", err)
	}
}
