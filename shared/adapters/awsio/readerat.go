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

// ReadAt implements io.ReaderAt.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-off)
	b, err := r.bucket.GetRange(r.ctx, r.key, off, n)
	if err != nil {
		return 0, err
	}
	if int64(len(b)) != n {
		return copy(p, b), fmt.Errorf("read %s at %d: got %d of %d bytes: %w", r.key, off, len(b), n, io.ErrUnexpectedEOF)
	}
	copy(p, b)
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}
