package awsio

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

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

// PartSize is one part buffer of a streaming upload: at least S3's
// multipart minimum part size (awslimit.S3MultipartMinPartBytes) for every
// part but the last.
const PartSize = 8 << 20

var _ [PartSize - awslimit.S3MultipartMinPartBytes]struct{} // PartSize >= the minimum

// UploadBuffers is the most part buffers one upload holds: the part being
// filled and the part being sent.
const UploadBuffers = 2

// pooledParts is how many idle part buffers a Bucket keeps for the next
// uploads (a warm function instance reuses them instead of allocating).
const pooledParts = 4

// partPool recycles part buffers between uploads of one Bucket.
type partPool struct{ free chan []byte }

func newPartPool() *partPool { return &partPool{free: make(chan []byte, pooledParts)} }

func (p *partPool) get() []byte {
	select {
	case b := <-p.free:
		return b[:0]
	default:
		return make([]byte, 0, PartSize)
	}
}

func (p *partPool) put(b []byte) {
	if cap(b) != PartSize {
		return
	}
	select {
	case p.free <- b:
	default:
	}
}

// Upload streams one object to S3 through at most UploadBuffers part
// buffers of PartSize, taken from and returned to the bucket's pool: an
// object that fits in one part is a single PutObject at Close; a larger
// one is a multipart upload whose parts are sent in the background, one
// at a time, while the next part fills. Nothing is visible under the key
// until Close succeeds; Abort (or a failed Close) leaves no object.
type Upload struct {
	ctx      context.Context
	api      MultipartAPI
	bucket   *Bucket
	key      string
	buf      []byte     // the part being filled
	sending  chan error // the part upload in flight; nil: none
	uploadID string     // set by the part upload in flight, read after it
	parts    []s3types.CompletedPart
	checksum string // the writer's contract checksum of the whole object, if it told
	// absent: the object becomes visible only if no object is at key
	// (If-None-Match: * on the PutObject or the CompleteMultipartUpload):
	// an existing object is never replaced (store.ErrPreconditionFailed).
	absent bool
	err    error
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

// CreateIfAbsent is Create of an object that must not replace one: Close
// fails with store.ErrPreconditionFailed, writing nothing, when key exists.
func (b *Bucket) CreateIfAbsent(ctx context.Context, key string) (store.Upload, error) {
	up, err := b.Create(ctx, key)
	if err != nil {
		return nil, err
	}
	up.(*Upload).absent = true
	return up, nil
}

// ExpectChecksum tells the upload the contract checksum ("sha256:<hex>")
// of every byte that will be written, computed by the writer while it
// wrote them. An object sent as one PutObject carries it as its S3
// checksum (x-amz-checksum-sha256) and its signed payload hash: S3
// verifies the stored bytes against the value the manifest will record,
// and the SDK hashes nothing again. A multipart upload's parts carry the
// SDK's per-part checksum instead (S3 has no whole-object SHA-256 for
// multipart uploads).
func (u *Upload) ExpectChecksum(sum string) { u.checksum = sum }

// Write buffers p, sending a part whenever PartSize bytes are buffered.
func (u *Upload) Write(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	n := len(p)
	for len(p) > 0 {
		if u.buf == nil {
			u.buf = u.bucket.parts.get()
		}
		c := copy(u.buf[len(u.buf):cap(u.buf)], p)
		u.buf, p = u.buf[:len(u.buf)+c], p[c:]
		if len(u.buf) == cap(u.buf) {
			if err := u.send(u.buf); err != nil {
				u.err = err
				return n - len(p), err
			}
			u.buf = nil
		}
	}
	return n, nil
}

// send waits for the part in flight, then sends part in the background
// (the upload's first part creates the multipart upload). The buffer goes
// back to the pool once sent.
func (u *Upload) send(part []byte) error {
	if err := u.wait(); err != nil {
		u.bucket.parts.put(part)
		return err
	}
	done := make(chan error, 1)
	u.sending = done
	go func() {
		err := u.sendPart(part)
		u.bucket.parts.put(part)
		done <- err
	}()
	return nil
}

// wait waits for the part in flight, if any.
func (u *Upload) wait() error {
	if u.sending == nil {
		return nil
	}
	err := <-u.sending
	u.sending = nil
	return err
}

func (u *Upload) sendPart(part []byte) error {
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
	if u.sending == nil && u.uploadID == "" {
		body := u.buf
		defer func() {
			u.bucket.parts.put(body)
			u.buf = nil
		}()
		_, err := u.bucket.putChecked(u.ctx, u.key, body, u.checksum, u.absent)
		return err
	}
	if len(u.buf) > 0 {
		part := u.buf
		u.buf = nil
		if err := u.send(part); err != nil {
			return errors.Join(err, u.Abort())
		}
	}
	if err := u.wait(); err != nil {
		return errors.Join(err, u.Abort())
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: aws.String(u.bucket.name), Key: aws.String(u.key),
		UploadId: aws.String(u.uploadID), MultipartUpload: &s3types.CompletedMultipartUpload{Parts: u.parts}}
	if u.absent {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := u.api.CompleteMultipartUpload(u.ctx, in); err != nil {
		err = translate("complete multipart upload", u.bucket.name+"/"+u.key, err, true)
		if errors.Is(err, store.ErrPreconditionFailed) {
			return errors.Join(err, u.Abort()) // nothing became visible: the parts go
		}
		return err
	}
	return nil
}

// Abort discards the upload; nothing becomes visible.
func (u *Upload) Abort() error {
	_ = u.wait() // the part in flight may have created the upload
	if u.buf != nil {
		u.bucket.parts.put(u.buf)
		u.buf = nil
	}
	if u.uploadID == "" {
		return nil
	}
	_, err := u.api.AbortMultipartUpload(context.WithoutCancel(u.ctx), &s3.AbortMultipartUploadInput{Bucket: aws.String(u.bucket.name),
		Key: aws.String(u.key), UploadId: aws.String(u.uploadID)})
	return translate("abort multipart upload", u.bucket.name+"/"+u.key, err, true)
}

// putChecked is Put of body whose contract checksum sum ("sha256:<hex>",
// or "" when unknown) the caller computed: S3 checks the stored bytes
// against it, and the request is signed with it as the payload hash, so
// the SDK computes no checksum of its own.
func (b *Bucket) putChecked(ctx context.Context, key string, body []byte, sum string, absent bool) (string, error) {
	var ifNoneMatch *string
	if absent {
		ifNoneMatch = aws.String("*")
	}
	hexSum, ok := strings.CutPrefix(sum, "sha256:")
	raw, err := hex.DecodeString(hexSum)
	if !ok || err != nil || len(raw) != 32 {
		return b.put(ctx, key, body, nil, ifNoneMatch)
	}
	return b.putWith(ctx, key, body, nil, ifNoneMatch, func(in *s3.PutObjectInput) {
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(raw))
	}, presetPayloadHash(hexSum))
}

// presetPayloadHash signs a request with a payload hash computed by the
// caller (the hex SHA-256 of the body) instead of having the SDK hash the
// body again (it does for an endpoint without TLS).
func presetPayloadHash(hexSum string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("bccPresetPayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, hexSum), in)
				}), "ComputePayloadHash", middleware.Before)
		})
	}
}
