package awsio

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/store"
)

// MultipartAPI is the part of the S3 client a streaming upload uses.
type MultipartAPI interface {
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, opts ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, opts ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, opts ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, opts ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

// PartSize is the buffer a streaming upload holds: at least S3's multipart
// minimum part size (awslimit.S3MultipartMinPartBytes) for every part but
// the last.
const PartSize = 8 << 20

var _ [PartSize - awslimit.S3MultipartMinPartBytes]struct{} // PartSize >= the minimum

// Upload streams one object to S3 holding at most PartSize bytes: an
// object that fits in one part is a single PutObject, a larger one a
// multipart upload. Nothing is visible under the key until Close succeeds;
// Abort (or a failed Close) leaves no object.
type Upload struct {
	ctx      context.Context
	api      MultipartAPI
	bucket   *Bucket
	key      string
	buf      bytes.Buffer
	uploadID string
	parts    []s3types.CompletedPart
	err      error
}

// Create starts a streaming upload to key. The bucket's client must also
// implement MultipartAPI (the SDK's does).
func (b *Bucket) Create(ctx context.Context, key string) (store.Upload, error) {
	api, ok := b.api.(MultipartAPI)
	if !ok {
		return nil, fmt.Errorf("stream %s: the S3 client has no multipart API", key)
	}
	return &Upload{ctx: ctx, api: api, bucket: b, key: key}, nil
}

// Write buffers p, uploading a part whenever PartSize bytes are buffered.
func (u *Upload) Write(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	n, _ := u.buf.Write(p)
	for u.buf.Len() >= PartSize {
		if err := u.flushPart(u.buf.Next(PartSize)); err != nil {
			u.err = err
			return n, err
		}
	}
	return n, nil
}

func (u *Upload) flushPart(part []byte) error {
	if err := u.bucket.budget.Take(u.ctx, true, u.key, 1); err != nil {
		return err
	}
	if u.uploadID == "" {
		out, err := u.api.CreateMultipartUpload(u.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(u.bucket.name), Key: aws.String(u.key)})
		if err != nil {
			return translate("create multipart upload", u.bucket.name+"/"+u.key, err, true)
		}
		u.uploadID = aws.ToString(out.UploadId)
	}
	num := int32(len(u.parts) + 1)
	out, err := u.api.UploadPart(u.ctx, &s3.UploadPartInput{Bucket: aws.String(u.bucket.name), Key: aws.String(u.key),
		UploadId: aws.String(u.uploadID), PartNumber: aws.Int32(num), Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part)))})
	if err != nil {
		return translate("upload part", u.bucket.name+"/"+u.key, err, true)
	}
	u.parts = append(u.parts, s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	return nil
}

// Close makes the object visible: one PutObject when it never reached
// PartSize, otherwise the last part and CompleteMultipartUpload.
func (u *Upload) Close() error {
	if u.err != nil {
		return errors.Join(u.err, u.Abort())
	}
	if u.uploadID == "" {
		_, err := u.bucket.Put(u.ctx, u.key, u.buf.Bytes())
		return err
	}
	if u.buf.Len() > 0 {
		if err := u.flushPart(u.buf.Bytes()); err != nil {
			return errors.Join(err, u.Abort())
		}
	}
	_, err := u.api.CompleteMultipartUpload(u.ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(u.bucket.name), Key: aws.String(u.key),
		UploadId: aws.String(u.uploadID), MultipartUpload: &s3types.CompletedMultipartUpload{Parts: u.parts}})
	if err != nil {
		return translate("complete multipart upload", u.bucket.name+"/"+u.key, err, true)
	}
	return nil
}

// Abort discards the upload; nothing becomes visible.
func (u *Upload) Abort() error {
	if u.uploadID == "" {
		return nil
	}
	_, err := u.api.AbortMultipartUpload(context.WithoutCancel(u.ctx), &s3.AbortMultipartUploadInput{Bucket: aws.String(u.bucket.name),
		Key: aws.String(u.key), UploadId: aws.String(u.uploadID)})
	return translate("abort multipart upload", u.bucket.name+"/"+u.key, err, true)
}
