package fidelity

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// multipart completes a two-part upload of key (5 MiB + 1 byte of b),
// with If-None-Match when absent.
func multipart(b backend, bk, key string, fill byte, absent bool) error {
	up, err := b.c.S3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bk), Key: aws.String(key)})
	if err != nil {
		return err
	}
	var parts []s3types.CompletedPart
	for n, body := range [][]byte{bytes.Repeat([]byte{fill}, 5<<20), {fill}} {
		out, err := b.c.S3.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bk), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(n + 1)), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
		if err != nil {
			return err
		}
		parts = append(parts, s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(n + 1))})
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: aws.String(bk), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}}
	if absent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err = b.c.S3.CompleteMultipartUpload(ctx, in)
	return err
}

// S3: CompleteMultipartUpload with If-None-Match: * makes the object
// visible only where none is: 412 PreconditionFailed, the existing object
// kept, otherwise. Compaction writes its streamed outputs so (a committed
// output is never overwritten in place); gofakes3 ignores the header there,
// the embedded stack serves it itself.
func TestS3CompleteMultipartUploadIfNoneMatch(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		if err := multipart(b, bk, "out", 'a', true); err != nil {
			t.Fatalf("first complete: %v", err)
		}
		if err := multipart(b, bk, "out", 'b', true); code(err) != "PreconditionFailed" {
			t.Fatalf("second complete: %v, want PreconditionFailed (412)", err)
		}
		got, err := b.c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String("out"), Range: aws.String("bytes=0-0")})
		if err != nil {
			t.Fatal(err)
		}
		defer got.Body.Close()
		var buf [1]byte
		if _, err := got.Body.Read(buf[:]); err != nil && buf[0] == 0 || buf[0] != 'a' {
			t.Fatalf("the object after a refused complete starts %q, want the first upload's", buf[:])
		}
		if _, err := put(b, bk, "small", "1", nil); err != nil {
			t.Fatal(err)
		}
		if err := multipart(b, bk, "small", 'c', true); code(err) != "PreconditionFailed" {
			t.Fatalf("complete over a PUT object: %v, want PreconditionFailed", err)
		}
		if err := multipart(b, bk, "plain", 'd', false); err != nil || !strings.Contains(bk, "fid") {
			t.Fatalf("unconditional complete: %v", err)
		}
	})
}
