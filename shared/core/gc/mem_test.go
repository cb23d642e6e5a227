package gc

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// memStore is an in-memory bucket for unit and property tests (the e2e
// tests use the embedded stack).
type memStore struct {
	mu   sync.Mutex
	objs map[string][]byte
	gen  int
}

func newMem() *memStore { return &memStore{objs: map[string][]byte{}} }

func (m *memStore) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, store.ErrNotFound)
	}
	return b, nil
}

func (m *memStore) GetWithETag(ctx context.Context, key string) ([]byte, string, error) {
	b, err := m.Get(ctx, key)
	return b, contract.Checksum(b), err
}

func (m *memStore) Put(_ context.Context, key string, body []byte) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = append([]byte(nil), body...)
	return contract.Checksum(body), nil
}

func (m *memStore) PutIfMatch(_ context.Context, key string, body []byte, etag string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.objs[key]; !ok || contract.Checksum(b) != etag {
		return "", store.ErrPreconditionFailed
	}
	m.objs[key] = append([]byte(nil), body...)
	return contract.Checksum(body), nil
}

func (m *memStore) PutIfAbsent(_ context.Context, key string, body []byte) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		return "", store.ErrPreconditionFailed
	}
	m.objs[key] = append([]byte(nil), body...)
	return contract.Checksum(body), nil
}

func (m *memStore) Size(ctx context.Context, key string) (int64, error) {
	b, err := m.Get(ctx, key)
	return int64(len(b)), err
}

func (m *memStore) List(_ context.Context, prefix string) ([]Listed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Listed
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Listed{Key: k})
		}
	}
	return out, nil
}

func (m *memStore) DeleteBatch(_ context.Context, keys []string) (DeleteResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.objs, k)
	}
	return DeleteResult{Deleted: keys}, nil
}

func (m *memStore) has(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objs[key]
	return ok
}

type staticFacts struct{ f contract.CollectionFacts }

func (s staticFacts) Facts(context.Context, string) (contract.CollectionFacts, error) {
	return s.f, nil
}

type staticWatermark struct {
	safe int64
	err  error
}

func (s staticWatermark) Watermark(context.Context) (contract.Watermark, error) {
	return contract.Watermark{SchemaVersion: 1, GlobalSafeTsUnixMs: s.safe}, s.err
}
