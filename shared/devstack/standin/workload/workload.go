package workload

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/devstack/standin/ccs"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/store"
)

// Objects is where segments are written (and a lost attempt's segment
// removed again, only while it is exactly what that attempt wrote).
type Objects interface {
	Put(ctx context.Context, key string, body []byte) (string, error)
	DeleteIfMatch(ctx context.Context, key, etag string) error
}

// Write is one put or delete of a key.
type Write struct {
	Key     string
	Delete  bool
	Payload []byte
}

// Options shape generated appends.
type Options struct {
	RecordsPerCommit int
	KeySpace         int
	DeleteFraction   float64
	PayloadBytes     int
}

// Generator commits appends and remembers what each key must read as.
type Generator struct {
	pub     *publisher.Publisher
	ccs     *ccs.Service
	objects Objects
	now     func() time.Time
	rng     *rand.Rand
	opts    Options
	mu      sync.Mutex
	want    map[string]map[string]Write // collection -> key -> last write
}

// New returns a generator seeded with seed.
func New(pub *publisher.Publisher, ccsSvc *ccs.Service, objects Objects, now func() time.Time, seed uint64, opts Options) *Generator {
	return &Generator{pub: pub, ccs: ccsSvc, objects: objects, now: now, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		opts: opts, want: map[string]map[string]Write{}}
}

// Create registers a collection with CCS and commits its version 1.
func (g *Generator) Create(ctx context.Context, collection string, lifecycle contract.Lifecycle) error {
	inc := uint64(1)
	if g.ccs != nil {
		f, err := g.ccs.Create(ctx, collection, "", lifecycle)
		switch {
		case errors.Is(err, ccs.ErrReserved) && !f.Tombstoned:
			// The name's current lifetime is alive: the publisher says
			// whether its head exists (ErrExists).
		case err != nil:
			return err
		}
		inc = f.Inc()
	}
	if _, err := g.pub.CreateIncarnation(ctx, collection, inc); err != nil {
		return err
	}
	g.mu.Lock()
	g.want[collection] = map[string]Write{}
	g.mu.Unlock()
	return nil
}

// Random returns a random batch of writes.
func (g *Generator) Random() []Write {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := make([]Write, 0, g.opts.RecordsPerCommit)
	for range g.opts.RecordsPerCommit {
		k := fmt.Sprintf("doc-%06d", g.rng.IntN(max(g.opts.KeySpace, 1)))
		if g.rng.Float64() < g.opts.DeleteFraction {
			ws = append(ws, Write{Key: k, Delete: true})
			continue
		}
		p := make([]byte, g.opts.PayloadBytes)
		for i := range p {
			p[i] = byte('a' + g.rng.IntN(26))
		}
		ws = append(ws, Write{Key: k, Payload: p})
	}
	return ws
}

// Append commits writes as one new segment and returns the committed head.
// Within one batch the last write of a key wins.
//
// A segment is named for the version its attempt would create; an attempt
// that loses the head CAS (to a cutover, another writer) is retried on the
// new head under the next version's name, and the writer removes the
// segment of each lost attempt once the append committed (a writer's
// never-committed upload is its own: GC never deletes it, and a dropped
// collection's release would leave it behind for good). Only with
// If-Match on what that attempt wrote: the key is never another write's.
func (g *Generator) Append(ctx context.Context, collection string, writes []Write) (contract.Head, error) {
	batch := lastPerKey(writes)
	type written struct{ key, etag string }
	var attempts []written
	head, err := g.pub.Commit(ctx, collection, func(ctx context.Context, base publisher.Snapshot) (publisher.Change, error) {
		ch, etag, err := g.writeSegment(ctx, collection, base, batch)
		if err == nil {
			attempts = append(attempts, written{ch.Added[0].Key, etag})
		}
		return ch, err
	})
	if err != nil {
		return head, fmt.Errorf("append to %s: %w", collection, err)
	}
	for _, a := range attempts[:max(len(attempts)-1, 0)] {
		if a.key == attempts[len(attempts)-1].key {
			continue
		}
		if err := g.objects.DeleteIfMatch(ctx, a.key, a.etag); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrPreconditionFailed) {
			return head, fmt.Errorf("append to %s committed v%d; remove the lost attempt's segment %s: %w", collection, head.Version, a.key, err)
		}
	}
	g.mu.Lock()
	for _, w := range batch {
		g.want[collection][w.Key] = w
	}
	g.mu.Unlock()
	return head, nil
}

func (g *Generator) writeSegment(ctx context.Context, collection string, base publisher.Snapshot, batch []Write) (publisher.Change, string, error) {
	var buf bytes.Buffer
	w := segment.NewWriter(&buf, segment.WriterOptions{})
	ts := g.now().UnixMilli()
	for i, wr := range batch {
		rec := segment.Record{Key: wr.Key, Seq: base.Root.NextSeq + uint64(i), Delete: wr.Delete, TsUnixMs: ts, Payload: wr.Payload}
		if err := w.Add(rec); err != nil {
			return publisher.Change{}, "", err
		}
	}
	f, err := w.Close()
	if err != nil {
		return publisher.Change{}, "", err
	}
	key := contract.AppendSegmentKey(collection, base.Head.Inc(), base.Head.Version+1, 0)
	body := buf.Bytes()
	etag, err := g.objects.Put(ctx, key, body)
	if err != nil {
		return publisher.Change{}, "", fmt.Errorf("write segment %s: %w", key, err)
	}
	entry := f.Entry(key, int64(len(body)), contract.Checksum(body), contract.TierHot, 0)
	return publisher.Change{Added: []contract.ObjectEntry{entry}, Seqs: uint64(len(batch)), Origin: contract.Origin{Kind: contract.OriginAppend}}, etag, nil
}

func lastPerKey(writes []Write) []Write {
	last := map[string]Write{}
	for _, w := range writes {
		last[w.Key] = w
	}
	out := make([]Write, 0, len(last))
	for _, w := range last {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b Write) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Expected returns what every key of collection must read as: its payload,
// or absent when its last write was a delete.
func (g *Generator) Expected(collection string) map[string][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string][]byte{}
	for k, w := range g.want[collection] {
		if !w.Delete {
			out[k] = w.Payload
		}
	}
	return out
}
