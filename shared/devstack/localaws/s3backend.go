package localaws

import (
	"bytes"
	"io"
	"sync"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// replacingBackend makes a PUT replace an object's metadata as S3 does.
// gofakes3's in-memory backend merges the previous object's metadata into
// the new one (gofakes3.MergeMetadata), so an object overwritten without a
// checksum kept answering with the earlier version's x-amz-checksum-crc32
// and every validating GET failed "checksum did not match" (found by
// cmd/workload against make local). The wrapper remembers which metadata
// keys the latest write of each object sent and shows only those.
type replacingBackend struct {
	*s3mem.Backend

	mu   sync.Mutex          // held across a write and its record, so both follow the same order
	sent map[string][]string // bucket + "/" + key -> metadata keys of its latest write
}

func newReplacingBackend(opts ...s3mem.Option) *replacingBackend {
	return &replacingBackend{Backend: s3mem.New(opts...), sent: map[string][]string{}}
}

func objectID(bucket, key string) string { return bucket + "/" + key }

func (b *replacingBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	body, err := gofakes3.ReadAll(input, size) // outside the lock: a slow client must not stall every write
	if err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	res, err := b.Backend.PutObject(bucket, key, meta, bytes.NewReader(body), size, conditions)
	if err == nil {
		b.sent[objectID(bucket, key)] = keys
	}
	return res, err
}

// CopyObject goes through this backend's PutObject (s3mem's own copy would
// call its inner PutObject and leave the record stale).
func (b *replacingBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	return gofakes3.CopyObject(b, srcBucket, srcKey, dstBucket, dstKey, meta)
}

func (b *replacingBackend) GetObject(bucket, key string, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	obj, err := b.Backend.GetObject(bucket, key, rng)
	return b.only(bucket, key, obj), err
}

func (b *replacingBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	obj, err := b.Backend.HeadObject(bucket, key)
	return b.only(bucket, key, obj), err
}

func (b *replacingBackend) only(bucket, key string, obj *gofakes3.Object) *gofakes3.Object {
	if obj == nil {
		return nil
	}
	b.mu.Lock()
	keys, ok := b.sent[objectID(bucket, key)]
	b.mu.Unlock()
	if !ok {
		return obj
	}
	meta := make(map[string]string, len(keys))
	for _, k := range keys {
		if v, ok := obj.Metadata[k]; ok {
			meta[k] = v
		}
	}
	obj.Metadata = meta
	return obj
}
