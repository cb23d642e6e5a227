package fidelity

import (
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// versioned is a bucket with versioning enabled, as the stack creates the
// data bucket (issue 25 item 3).
func versioned(t *testing.T, b backend) string {
	t.Helper()
	bk := bucket(t, b)
	if _, err := b.c.S3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bk),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	return bk
}

func body(t *testing.T, b backend, bk, key, version string) (string, error) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String(key)}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := b.c.S3.GetObject(ctx, in)
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	v, err := io.ReadAll(out.Body)
	return string(v), err
}

// S3 on a versioned bucket (the data bucket the stack creates): the
// conditional writes the product relies on behave as on an unversioned
// one — If-None-Match: * creates only (PutObject and
// CompleteMultipartUpload), a stale If-Match is 412, DeleteObject with
// If-Match (the publisher's head retirement) deletes only the named ETag
// and a missing key answers 404 — and a deleted key reads 404 and may be
// created again with If-None-Match (a re-created name), while its previous
// version stays readable by version id and can be restored by copying it
// back (docs/operations.md, "Restoring deleted objects").
func TestS3ConditionalWritesOnAVersionedBucket(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := versioned(t, b)
		absent := func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }
		e1, err := put(b, bk, "head", "v1", absent)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if _, err := put(b, bk, "head", "again", absent); code(err) != "PreconditionFailed" {
			t.Fatalf("If-None-Match over an object: %v, want PreconditionFailed", err)
		}
		e2, err := put(b, bk, "head", "v2", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(e1) })
		if err != nil {
			t.Fatalf("If-Match with the current ETag: %v", err)
		}
		if _, err := put(b, bk, "head", "v3", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(e1) }); code(err) != "PreconditionFailed" {
			t.Fatalf("If-Match with a stale ETag: %v, want PreconditionFailed", err)
		}
		if err := deleteIfMatch(b, bk, "head", e1); code(err) != "PreconditionFailed" {
			t.Fatalf("conditional delete with a stale ETag: %v, want PreconditionFailed", err)
		}
		if got, err := body(t, b, bk, "head", ""); err != nil || got != "v2" {
			t.Fatalf("after the refused delete: %q %v", got, err)
		}
		if err := deleteIfMatch(b, bk, "head", e2); err != nil {
			t.Fatalf("conditional delete with the current ETag: %v", err)
		}
		if _, err := body(t, b, bk, "head", ""); code(err) != "NoSuchKey" {
			t.Fatalf("GET after the delete: %v, want NoSuchKey", err)
		}
		if _, err := b.c.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bk), Key: aws.String("head")}); code(err) != "NotFound" {
			t.Fatalf("HEAD after the delete: %v, want NotFound", err)
		}
		if err := deleteIfMatch(b, bk, "head", e2); code(err) != "NoSuchKey" && err != nil {
			t.Fatalf("conditional delete again: %v, want NoSuchKey (or done)", err)
		}
		// What GC deleted is still there, by version: list and restore.
		vs, err := b.c.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bk), Prefix: aws.String("head")})
		if err != nil {
			t.Fatal(err)
		}
		var prev string
		for _, v := range vs.Versions {
			if aws.ToString(v.ETag) == e2 {
				prev = aws.ToString(v.VersionId)
			}
		}
		if prev == "" || len(vs.DeleteMarkers) == 0 {
			t.Fatalf("versions after the delete: %d versions (v2's id %q), %d delete markers", len(vs.Versions), prev, len(vs.DeleteMarkers))
		}
		if got, err := body(t, b, bk, "head", prev); err != nil || got != "v2" {
			t.Fatalf("the deleted version by id: %q %v", got, err)
		}
		// A deleted key is absent to If-None-Match: a re-created name's
		// first head is written.
		if _, err := put(b, bk, "head", "reborn", absent); err != nil {
			t.Fatalf("If-None-Match over a delete marker: %v", err)
		}
		if got, _ := body(t, b, bk, "head", ""); got != "reborn" {
			t.Fatalf("after the re-create: %q", got)
		}
		// Restore: copy the previous version back over the key.
		if _, err := b.c.S3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bk), Key: aws.String("restored"),
			CopySource: aws.String(bk + "/head?versionId=" + prev)}); err != nil {
			t.Fatalf("restore by copy: %v", err)
		}
		if got, err := body(t, b, bk, "restored", ""); (err != nil || got != "v2") && !diverges(t, b, "s3-copy-source-version") {
			t.Fatalf("restored: %q %v", got, err)
		}
		// Multipart outputs: If-None-Match on CompleteMultipartUpload.
		if err := multipart(b, bk, "out", 'a', true); err != nil {
			t.Fatalf("first complete: %v", err)
		}
		if err := multipart(b, bk, "out", 'b', true); code(err) != "PreconditionFailed" {
			t.Fatalf("second complete: %v, want PreconditionFailed", err)
		}
	})
}
