package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/store"
)

// Fault is what the fault plan decides for one storage call.
type Fault int

// Faults a call can suffer.
const (
	FaultNone          Fault = iota
	FaultAmbiguousDone       // applied, but the caller sees store.ErrAmbiguous
	FaultAmbiguousLost       // not applied, and the caller sees store.ErrAmbiguous
	FaultThrottle            // not applied; store.ErrThrottled
	FaultCrash               // the calling function dies here (panics with Crash)
)

// Crash is panicked by a port to kill the calling function at that point;
// the simulator recovers it and treats the invocation as lost.
type Crash struct{ Where string }

// FaultPlan decides a fault for (op, key); nil means no faults.
type FaultPlan func(op, key string) Fault

type object struct {
	body     []byte
	etag     string
	modified time.Time
}

// MemBucket is an in-memory S3 bucket with S3's semantics where the
// coordinator relies on them: ETags, If-Match / If-None-Match (412, and 404
// for If-Match on a missing key), DeleteObjects reporting missing keys as
// deleted, lexicographic listing. It has the method set of awsio.Bucket.
type MemBucket struct {
	mu      sync.Mutex
	objects map[string]object
	now     func() time.Time
	Faults  FaultPlan
	// Applied, when set, is called after a write or delete of key took
	// effect (outside the lock; body is nil for deletes). The simulator
	// uses it for bookkeeping (head notifications, delete-time invariant
	// checks) and may panic Crash from it to kill the caller just after a
	// write.
	Applied func(op, key string, body []byte)
	deleted map[string]time.Time // key -> when deleted (for invariant reports)
}

// NewMemBucket returns an empty bucket using now for LastModified.
func NewMemBucket(now func() time.Time) *MemBucket {
	return &MemBucket{objects: map[string]object{}, now: now, deleted: map[string]time.Time{}}
}

func etagOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:16])
}

func (m *MemBucket) fault(op, key string) Fault {
	if m.Faults == nil {
		return FaultNone
	}
	f := m.Faults(op, key)
	if f == FaultCrash {
		panic(Crash{Where: op + " " + key})
	}
	return f
}

// Get reads an object.
func (m *MemBucket) Get(ctx context.Context, key string) ([]byte, error) {
	b, _, err := m.GetWithETag(ctx, key)
	return b, err
}

// GetWithETag reads an object and its ETag.
func (m *MemBucket) GetWithETag(_ context.Context, key string) ([]byte, string, error) {
	if f := m.fault("get", key); f == FaultThrottle || f == FaultAmbiguousLost || f == FaultAmbiguousDone {
		return nil, "", fmt.Errorf("get %s: %w", key, store.ErrThrottled)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if !ok {
		return nil, "", fmt.Errorf("get %s: %w", key, store.ErrNotFound)
	}
	return slices.Clone(o.body), o.etag, nil
}

// GetRange reads n bytes at off.
func (m *MemBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := m.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if off > int64(len(b)) {
		return nil, io.EOF
	}
	return b[off:min(off+n, int64(len(b)))], nil
}

// ReaderAt reads an object with ranged reads.
func (m *MemBucket) ReaderAt(ctx context.Context, key string, size int64) io.ReaderAt {
	return readerAt{ctx: ctx, m: m, key: key}
}

type readerAt struct {
	ctx context.Context
	m   *MemBucket
	key string
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	b, err := r.m.GetRange(r.ctx, r.key, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	n := copy(p, b)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Size returns an object's size.
func (m *MemBucket) Size(_ context.Context, key string) (int64, error) {
	if f := m.fault("head", key); f != FaultNone {
		return 0, fmt.Errorf("head %s: %w", key, store.ErrThrottled)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if !ok {
		return 0, fmt.Errorf("head %s: %w", key, store.ErrNotFound)
	}
	return int64(len(o.body)), nil
}

// Exists reports whether key exists (for invariant checks; never faulted).
func (m *MemBucket) Exists(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objects[key]
	return ok
}

// Put writes unconditionally.
func (m *MemBucket) Put(_ context.Context, key string, body []byte) (string, error) {
	return m.write("put", key, body, func(object, bool) error { return nil })
}

// PutIfMatch writes only if the current ETag is etag.
func (m *MemBucket) PutIfMatch(_ context.Context, key string, body []byte, etag string) (string, error) {
	return m.write("put-if-match", key, body, func(o object, ok bool) error {
		switch {
		case !ok:
			return fmt.Errorf("put %s: %w", key, store.ErrNotFound)
		case o.etag != etag:
			return fmt.Errorf("put %s: %w", key, store.ErrPreconditionFailed)
		}
		return nil
	})
}

// PutIfAbsent writes only if key does not exist.
func (m *MemBucket) PutIfAbsent(_ context.Context, key string, body []byte) (string, error) {
	return m.write("put-if-absent", key, body, func(_ object, ok bool) error {
		if ok {
			return fmt.Errorf("put %s: %w", key, store.ErrPreconditionFailed)
		}
		return nil
	})
}

func (m *MemBucket) write(op, key string, body []byte, check func(object, bool) error) (string, error) {
	f := m.fault(op, key)
	if f == FaultThrottle {
		return "", fmt.Errorf("%s %s: %w", op, key, store.ErrThrottled)
	}
	if f == FaultAmbiguousLost {
		return "", fmt.Errorf("%s %s: %w", op, key, store.ErrAmbiguous)
	}
	m.mu.Lock()
	cur, ok := m.objects[key]
	if err := check(cur, ok); err != nil {
		m.mu.Unlock()
		return "", err
	}
	o := object{body: slices.Clone(body), etag: etagOf(body), modified: m.now()}
	m.objects[key] = o
	delete(m.deleted, key)
	m.mu.Unlock()
	if m.Applied != nil {
		m.Applied(op, key, body)
	}
	if f == FaultAmbiguousDone {
		return "", fmt.Errorf("%s %s: %w", op, key, store.ErrAmbiguous)
	}
	return o.etag, nil
}

// Delete removes a key (missing is fine).
func (m *MemBucket) Delete(_ context.Context, key string) error {
	_, err := m.DeleteBatch(context.Background(), []string{key})
	return err
}

// DeleteBatch deletes up to 1000 keys; a fault plan may fail single keys.
func (m *MemBucket) DeleteBatch(_ context.Context, keys []string) (awsio.DeleteResult, error) {
	res := awsio.DeleteResult{Failed: map[string]string{}}
	if len(keys) > 1000 {
		return res, fmt.Errorf("delete batch of %d keys: at most 1000", len(keys))
	}
	batchFault := m.fault("delete-batch", "")
	if batchFault == FaultThrottle || batchFault == FaultAmbiguousLost {
		return res, fmt.Errorf("delete batch: %w", store.ErrAmbiguous)
	}
	for _, k := range keys {
		if f := m.fault("delete", k); f == FaultThrottle || f == FaultAmbiguousLost {
			res.Failed[k] = "InternalError: injected"
			continue
		}
		m.mu.Lock()
		_, existed := m.objects[k]
		if existed {
			m.deleted[k] = m.now()
		}
		delete(m.objects, k)
		m.mu.Unlock()
		res.Deleted = append(res.Deleted, k)
		if existed && m.Applied != nil {
			m.Applied("delete", k, nil)
		}
	}
	if batchFault == FaultAmbiguousDone {
		return awsio.DeleteResult{Failed: map[string]string{}}, fmt.Errorf("delete batch: %w", store.ErrAmbiguous)
	}
	return res, nil
}

// List returns every key under prefix, sorted.
func (m *MemBucket) List(_ context.Context, prefix string) ([]awsio.Listed, error) {
	if f := m.fault("list", prefix); f != FaultNone {
		return nil, fmt.Errorf("list %s: %w", prefix, store.ErrThrottled)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []awsio.Listed
	for k, o := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, awsio.Listed{Key: k, Size: int64(len(o.body)), LastModified: o.modified})
		}
	}
	slices.SortFunc(out, func(a, b awsio.Listed) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// DeletedAt reports when key was deleted, if it was.
func (m *MemBucket) DeletedAt(key string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.deleted[key]
	return t, ok
}

// Keys returns every key under prefix, sorted (for invariant checks; never
// faulted).
func (m *MemBucket) Keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Peek reads an object without faults or hooks (for invariant checks).
func (m *MemBucket) Peek(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	return o.body, ok
}
