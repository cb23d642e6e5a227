package fidelity

import (
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func deleteIfMatch(b backend, bk, key, etag string) error {
	_, err := b.c.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String(key), IfMatch: aws.String(etag)})
	return err
}

// S3 (general purpose buckets): DeleteObject with If-Match deletes only
// while the object's ETag is the one named: another ETag answers 412
// PreconditionFailed and keeps the object, a missing key 404 NoSuchKey (the
// answer the SDK's retry of an applied conditional delete meets). The
// publisher retires a head this way; gofakes3 ignores the header, the
// embedded stack serves it itself. Racing a create on the same key
// (If-None-Match, a re-created name's v1) the delete never removes the new
// object.
func TestS3ConditionalDelete(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := bucket(t, b)
		e1, err := put(b, bk, "head", "v1", nil)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := put(b, bk, "head", "v2", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(e1) })
		if err != nil {
			t.Fatal(err)
		}
		if err := deleteIfMatch(b, bk, "head", e1); code(err) != "PreconditionFailed" {
			t.Fatalf("delete with a stale ETag: %v, want PreconditionFailed (412)", err)
		}
		if _, err := b.c.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bk), Key: aws.String("head")}); err != nil {
			t.Fatalf("the object after a refused conditional delete: %v", err)
		}
		if err := deleteIfMatch(b, bk, "head", e2); err != nil {
			t.Fatalf("delete with the current ETag: %v", err)
		}
		if err := deleteIfMatch(b, bk, "head", e2); code(err) != "NoSuchKey" {
			t.Fatalf("conditional delete of a missing key: %v, want NoSuchKey (404)", err)
		}
		// Deletes with the old ETag racing creates of the key: whatever
		// the order, no created object is ever deleted.
		for i := range 20 {
			e, err := put(b, bk, "k"+strconv.Itoa(i), "old", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := deleteIfMatch(b, bk, "k"+strconv.Itoa(i), e); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = put(b, bk, "k"+strconv.Itoa(i), "new"+strconv.Itoa(i), func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
			}()
			go func() {
				defer wg.Done()
				_ = deleteIfMatch(b, bk, "k"+strconv.Itoa(i), e)
			}()
			wg.Wait()
			if _, err := b.c.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bk), Key: aws.String("k" + strconv.Itoa(i))}); err != nil {
				t.Fatalf("round %d: the created object is gone: %v", i, err)
			}
		}
	})
}
