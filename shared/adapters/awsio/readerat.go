package awsio

import (
	"context"
	"fmt"
	"io"
)

// ReaderAt reads one object with ranged GETs, so a segment reader pulls one
// block at a time instead of the whole object.
type ReaderAt struct {
	ctx    context.Context
	bucket *Bucket
	key    string
	size   int64
}

// ReaderAt returns an io.ReaderAt over key of size bytes.
func (b *Bucket) ReaderAt(ctx context.Context, key string, size int64) io.ReaderAt {
	return &ReaderAt{ctx: ctx, bucket: b, key: key, size: size}
}

// ReadAt implements io.ReaderAt: one ranged GET read straight into p.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s at %d: negative offset", r.key, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-off)
	got, err := r.bucket.ReadRange(r.ctx, r.key, off, p[:n])
	if err != nil {
		return got, err
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}
