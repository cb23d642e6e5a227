package awsio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// uploadS3 records what a streaming upload sends; UploadPart waits on
// gate when set (a part in flight for as long as the test wants).
type uploadS3 struct {
	S3API
	mu       sync.Mutex
	puts     []*s3.PutObjectInput
	putBody  []byte
	parts    map[int32][]byte
	inFlight int
	maxIn    int
	gate     chan struct{}
	failPart int32
	aborted  bool
	complete *s3.CompleteMultipartUploadInput
}

func (f *uploadS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	body, _ := io.ReadAll(in.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts, f.putBody = append(f.puts, in), body
	return &s3.PutObjectOutput{ETag: aws.String(`"e"`)}, nil
}

func (f *uploadS3) CreateMultipartUpload(context.Context, *s3.CreateMultipartUploadInput, ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	return &s3.CreateMultipartUploadOutput{UploadId: aws.String("u1")}, nil
}

func (f *uploadS3) UploadPart(_ context.Context, in *s3.UploadPartInput, _ ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	f.mu.Lock()
	f.inFlight++
	f.maxIn = max(f.maxIn, f.inFlight)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	body := make([]byte, aws.ToInt64(in.ContentLength))
	_, _ = io.ReadFull(in.Body, body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	if aws.ToInt32(in.PartNumber) == f.failPart {
		return nil, errors.New("part refused")
	}
	if f.parts == nil {
		f.parts = map[int32][]byte{}
	}
	f.parts[aws.ToInt32(in.PartNumber)] = body
	return &s3.UploadPartOutput{ETag: aws.String(`"p"`)}, nil
}

func (f *uploadS3) CompleteMultipartUpload(_ context.Context, in *s3.CompleteMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.complete = in
	return &s3.CompleteMultipartUploadOutput{}, nil
}

func (f *uploadS3) AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborted = true
	return &s3.AbortMultipartUploadOutput{}, nil
}

func contractSum(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// An object below one part is one PutObject carrying the writer's SHA-256
// as its S3 checksum (S3 verifies the bytes against the value the manifest
// records; the SDK computes no checksum of its own).
func TestUploadOfOnePartCarriesTheWritersChecksum(t *testing.T) {
	f := &uploadS3{}
	b := NewBucket(f, "b")
	body := bytes.Repeat([]byte("x"), 1000)
	up, err := b.Create(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write(body); err != nil {
		t.Fatal(err)
	}
	up.(*Upload).ExpectChecksum(contractSum(body))
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	raw := sha256.Sum256(body)
	if len(f.puts) != 1 || aws.ToString(f.puts[0].ChecksumSHA256) != base64.StdEncoding.EncodeToString(raw[:]) || !bytes.Equal(f.putBody, body) {
		t.Fatalf("puts %d, checksum %q, body %d bytes", len(f.puts), aws.ToString(f.puts[0].ChecksumSHA256), len(f.putBody))
	}
	// Without a checksum (or a malformed one) the put carries none.
	up, _ = b.Create(context.Background(), "k2")
	_, _ = up.Write(body)
	up.(*Upload).ExpectChecksum("md5:abc")
	if err := up.Close(); err != nil || f.puts[1].ChecksumSHA256 != nil {
		t.Fatalf("put without a usable checksum: %v, checksum %v", err, f.puts[1].ChecksumSHA256)
	}
}

// A larger object sends its parts in the background, one at a time,
// while the next part fills: Write returns while a part is in flight,
// the upload holds at most UploadBuffers part buffers, and they go back
// to the bucket's pool for the next upload.
func TestUploadSendsPartsInTheBackgroundFromReusedBuffers(t *testing.T) {
	f := &uploadS3{gate: make(chan struct{})}
	b := NewBucket(f, "b")
	want := make([]byte, 2*PartSize+12345)
	for i := range want {
		want[i] = byte(i * 7)
	}
	up, _ := b.Create(context.Background(), "k")
	// Part 1 fills and goes out; its UploadPart waits on the gate, and
	// Write still returns: the merge goes on filling part 2.
	if _, err := up.Write(want[:PartSize+100]); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { // part 2 fills: it waits for part 1
		_, err := up.Write(want[PartSize+100:])
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a second part was sent while the first was in flight (%v)", err)
	default:
	}
	close(f.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for n := int32(1); n <= int32(len(f.parts)); n++ {
		got = append(got, f.parts[n]...)
	}
	if !bytes.Equal(got, want) || len(f.complete.MultipartUpload.Parts) != 3 || f.maxIn != 1 {
		t.Fatalf("parts %d (%d bytes, equal %v), completed %d, at most %d in flight", len(f.parts), len(got), bytes.Equal(got, want), len(f.complete.MultipartUpload.Parts), f.maxIn)
	}
	if n := len(b.parts.free); n < UploadBuffers {
		t.Fatalf("%d part buffers back in the pool, want %d", n, UploadBuffers)
	}
	// The next upload takes its buffers from the pool: it allocates far
	// less than one part (the fake's copies of the bodies aside, measured
	// by TotalAlloc around the upload alone).
	f.parts = nil
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	up, _ = b.Create(context.Background(), "k")
	_, _ = up.Write(want[:PartSize+1])
	_ = up.Close()
	runtime.ReadMemStats(&after)
	// The fake copies each part body (one part); a buffer of the
	// upload's own would be one part more.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > PartSize+PartSize/2 {
		t.Fatalf("an upload with pooled buffers allocated %d bytes (a part is %d)", grew, PartSize)
	}
}

// A part that fails fails the upload at the next Write or at Close, and
// the multipart upload is aborted: nothing becomes visible.
func TestUploadPartFailureAbortsTheUpload(t *testing.T) {
	f := &uploadS3{failPart: 1}
	b := NewBucket(f, "b")
	up, _ := b.Create(context.Background(), "k")
	data := make([]byte, PartSize+10)
	if _, err := up.Write(data); err != nil {
		t.Fatalf("the first part's failure is the background's: %v", err)
	}
	if err := up.Close(); err == nil || !f.aborted || f.complete != nil {
		t.Fatalf("close after a failed part: %v, aborted %v, completed %v", err, f.aborted, f.complete != nil)
	}
}
