package awsio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/contract"
)

// S3API is the part of the S3 client the adapter uses.
type S3API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var _ MultipartAPI = (*s3.Client)(nil)

// Bucket is one S3 bucket.
type Bucket struct {
	api    S3API
	name   string
	budget *PrefixBudget // nil: not paced
	parts  *partPool     // part buffers of streaming uploads, reused
}

// NewBucket adapts api to bucket name.
func NewBucket(api S3API, name string) *Bucket {
	return &Bucket{api: api, name: name, parts: newPartPool()}
}

// WithRequestBudget returns the bucket with every object request (reads,
// writes, deletes; not listings) paced by pb, per prefix, fleet-wide: the
// executors' bulk paths (GC deletes, compaction reads and writes).
func (b *Bucket) WithRequestBudget(pb *PrefixBudget) *Bucket {
	c := *b
	c.budget = pb
	return &c
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.name }

// MaxGetBytes bounds what Get and GetWithETag read of one object: every
// document the coordinator reads whole has a documented limit far below
// (contract.Max*Bytes; readers that know the document pass it to
// GetLimited). Segments are read by range, never whole.
const MaxGetBytes = 64 << 20

// Get reads a whole object of at most MaxGetBytes.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	return b.GetLimited(ctx, key, MaxGetBytes)
}

// GetLimited reads a whole object of at most limit bytes: a larger object
// is refused (contract.ErrTooLarge) from its Content-Length, or after
// reading limit+1 bytes when the length is not given.
func (b *Bucket) GetLimited(ctx context.Context, key string, limit int64) ([]byte, error) {
	body, _, err := b.getLimited(ctx, key, limit)
	return body, err
}

// GetWithETag reads a whole object of at most MaxGetBytes and its ETag.
func (b *Bucket) GetWithETag(ctx context.Context, key string) ([]byte, string, error) {
	return b.getLimited(ctx, key, MaxGetBytes)
}

func (b *Bucket) getLimited(ctx context.Context, key string, limit int64) ([]byte, string, error) {
	if err := b.budget.Take(ctx, false, key, 1); err != nil {
		return nil, "", err
	}
	out, err := b.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	if err != nil {
		return nil, "", translate("get", b.name+"/"+key, err, false)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > limit {
		return nil, "", fmt.Errorf("get %s/%s: %w", b.name, key, contract.TooLarge("object", key, n, int(limit)))
	}
	body, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s/%s: %w", b.name, key, err)
	}
	if int64(len(body)) > limit {
		return nil, "", fmt.Errorf("get %s/%s: %w", b.name, key, contract.TooLarge("object", key, -1, int(limit)))
	}
	return body, strings.Trim(aws.ToString(out.ETag), `"`), nil
}

// Checksum streams key's bytes and returns their contract checksum
// ("sha256:<hex>"), in bounded memory whatever the object's size.
func (b *Bucket) Checksum(ctx context.Context, key string) (string, error) {
	sum, _, err := b.ChecksumAt(ctx, key)
	return sum, err
}

// ChecksumAt is Checksum with the LastModified S3 gave the object read.
func (b *Bucket) ChecksumAt(ctx context.Context, key string) (string, time.Time, error) {
	if err := b.budget.Take(ctx, false, key, 1); err != nil {
		return "", time.Time{}, err
	}
	out, err := b.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	if err != nil {
		return "", time.Time{}, translate("get", b.name+"/"+key, err, false)
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		return "", time.Time{}, fmt.Errorf("read %s/%s: %w", b.name, key, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), aws.ToTime(out.LastModified), nil
}

// ReadRange fills p with the len(p) bytes of key at off, with one ranged
// GET read straight into p (no intermediate buffer: a segment block costs
// its own size once). A body shorter than p is io.ErrUnexpectedEOF; an
// answer that is not the requested range is an error, never misplaced bytes.
func (b *Bucket) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	end := off + int64(len(p)) - 1
	if err := b.budget.Take(ctx, false, key, 1); err != nil {
		return 0, err
	}
	out, err := b.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.name), Key: aws.String(key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, end))})
	if err != nil {
		return 0, translate("get range", b.name+"/"+key, err, false)
	}
	defer out.Body.Close()
	if cr := aws.ToString(out.ContentRange); !strings.HasPrefix(cr, fmt.Sprintf("bytes %d-", off)) {
		return 0, fmt.Errorf("get range %s/%s: asked bytes %d-%d, got content range %q", b.name, key, off, end, cr)
	}
	n, err := io.ReadFull(out.Body, p)
	if err != nil {
		return n, fmt.Errorf("read %s/%s at %d: got %d of %d bytes: %w", b.name, key, off, n, len(p), io.ErrUnexpectedEOF)
	}
	return n, nil
}

// Size returns an object's size.
func (b *Bucket) Size(ctx context.Context, key string) (int64, error) {
	if err := b.budget.Take(ctx, false, key, 1); err != nil {
		return 0, err
	}
	out, err := b.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	if err != nil {
		return 0, translate("head", b.name+"/"+key, err, false)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// Put writes an object unconditionally and returns its ETag.
func (b *Bucket) Put(ctx context.Context, key string, body []byte) (string, error) {
	return b.put(ctx, key, body, nil, nil)
}

// PutIfMatch writes only if the object's current ETag is etag (a CAS).
func (b *Bucket) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	return b.put(ctx, key, body, aws.String(`"`+etag+`"`), nil)
}

// PutIfAbsent writes only if no object exists at key.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, body []byte) (string, error) {
	return b.put(ctx, key, body, nil, aws.String("*"))
}

func (b *Bucket) put(ctx context.Context, key string, body []byte, ifMatch, ifNoneMatch *string) (string, error) {
	return b.putWith(ctx, key, body, ifMatch, ifNoneMatch, nil)
}

// putWith is put with the input adjusted by in (nil: as is) and the
// request by opts.
func (b *Bucket) putWith(ctx context.Context, key string, body []byte, ifMatch, ifNoneMatch *string, adjust func(*s3.PutObjectInput), opts ...func(*s3.Options)) (string, error) {
	if err := b.budget.Take(ctx, true, key, 1); err != nil {
		return "", err
	}
	in := &s3.PutObjectInput{Bucket: aws.String(b.name), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))), IfMatch: ifMatch, IfNoneMatch: ifNoneMatch}
	if adjust != nil {
		adjust(in)
	}
	out, err := b.api.PutObject(ctx, in, opts...)
	if err != nil {
		return "", translate("put", b.name+"/"+key, err, true)
	}
	return strings.Trim(aws.ToString(out.ETag), `"`), nil
}

// Listed is one object seen by a listing.
type Listed struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// List pages through every key under prefix. Listing only ever proposes
// candidates; it is never the truth about what is live.
func (b *Bucket) List(ctx context.Context, prefix string) ([]Listed, error) {
	var out []Listed
	err := b.ListPages(ctx, prefix, func(page []Listed) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// Keys calls fn with the keys of each page under prefix (ListPages
// without the sizes and dates).
func (b *Bucket) Keys(ctx context.Context, prefix string, fn func([]string) error) error {
	return b.ListPages(ctx, prefix, func(page []Listed) error {
		keys := make([]string, len(page))
		for i, l := range page {
			keys[i] = l.Key
		}
		return fn(keys)
	})
}

// WrittenAt returns the LastModified S3 gave each of keys that exists (a
// missing key is absent). It lists the keys' folders (the part up to the
// last '/'), each once and only until every key of it was seen: a rewrite
// task's outputs share one folder below its task id, so dating them costs
// one listing, under the s3:ListBucket grant every function has. It dates
// keys the caller names; it never decides what exists beyond them.
func (b *Bucket) WrittenAt(ctx context.Context, keys []string) (map[string]time.Time, error) {
	folders := map[string]map[string]bool{}
	var order []string
	for _, k := range keys {
		dir := k // a key without a folder is listed as its own prefix
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			dir = k[:i+1]
		}
		if folders[dir] == nil {
			folders[dir] = map[string]bool{}
			order = append(order, dir)
		}
		folders[dir][k] = true
	}
	out := make(map[string]time.Time, len(keys))
	for _, dir := range order {
		want := folders[dir]
		err := b.ListPages(ctx, dir, func(page []Listed) error {
			for _, l := range page {
				if want[l.Key] {
					out[l.Key] = l.LastModified
					delete(want, l.Key)
				}
			}
			if len(want) == 0 {
				return errListedEnough
			}
			return nil
		})
		if err != nil && !errors.Is(err, errListedEnough) {
			return out, err
		}
	}
	return out, nil
}

// errListedEnough ends a listing once every key it was for was seen.
var errListedEnough = errors.New("every key listed")

// ListPages calls fn with each page (up to 1,000 keys, ascending) of the
// keys under prefix, so that memory holds one page; an error from fn ends
// the listing and is returned.
func (b *Bucket) ListPages(ctx context.Context, prefix string, fn func([]Listed) error) error {
	p := s3.NewListObjectsV2Paginator(b.api, &s3.ListObjectsV2Input{Bucket: aws.String(b.name), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return translate("list", b.name+"/"+prefix, err, false)
		}
		out := make([]Listed, 0, len(page.Contents))
		for _, o := range page.Contents {
			out = append(out, Listed{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
		if err := fn(out); err != nil {
			return err
		}
	}
	return nil
}
