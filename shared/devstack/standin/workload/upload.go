package workload

import (
	"bytes"
	"context"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
)

// Upload is a segment another writer (an ingest, a snapshot import, a bulk
// load) stored under data/ for a commit that has not landed yet.
type Upload struct {
	Collection string
	Entry      contract.ObjectEntry
	Writes     []Write
}

// Upload writes writes as one segment under key without committing it:
// the commit lands later (CommitUpload), or never. Its records take
// sequence numbers from the head it was built on.
func (g *Generator) Upload(ctx context.Context, collection, key string, level int, writes []Write) (Upload, error) {
	batch := lastPerKey(writes)
	base, err := g.pub.Read(ctx, collection)
	if err != nil {
		return Upload{}, err
	}
	var buf bytes.Buffer
	w := segment.NewWriter(&buf, segment.WriterOptions{})
	ts := g.now().UnixMilli()
	for i, wr := range batch {
		if err := w.Add(segment.Record{Key: wr.Key, Seq: base.Root.NextSeq + uint64(i), Delete: wr.Delete, TsUnixMs: ts, Payload: wr.Payload}); err != nil {
			return Upload{}, err
		}
	}
	f, err := w.Close()
	if err != nil {
		return Upload{}, err
	}
	body := buf.Bytes()
	if _, err := g.objects.Put(ctx, key, body); err != nil {
		return Upload{}, fmt.Errorf("upload %s: %w", key, err)
	}
	return Upload{Collection: collection, Entry: f.Entry(key, int64(len(body)), contract.Checksum(body), contract.TierHot, level), Writes: batch}, nil
}

// CommitUpload commits an earlier upload as an append. The head's next
// sequence number moves past the upload's records.
func (g *Generator) CommitUpload(ctx context.Context, u Upload) (contract.Head, error) {
	head, err := g.pub.Commit(ctx, u.Collection, func(_ context.Context, base publisher.Snapshot) (publisher.Change, error) {
		var seqs uint64
		if u.Entry.MaxSeq >= base.Root.NextSeq {
			seqs = u.Entry.MaxSeq + 1 - base.Root.NextSeq
		}
		return publisher.Change{Added: []contract.ObjectEntry{u.Entry}, Seqs: seqs, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
	})
	if err != nil {
		return head, fmt.Errorf("commit upload %s to %s: %w", u.Entry.Key, u.Collection, err)
	}
	g.mu.Lock()
	for _, w := range u.Writes {
		g.want[u.Collection][w.Key] = w
	}
	g.mu.Unlock()
	return head, nil
}

// Reset replaces what collection must read as (after its head was put
// back to an older version: what that version reads is the truth again).
func (g *Generator) Reset(collection string, reads map[string][]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	want := map[string]Write{}
	for k, v := range reads {
		want[k] = Write{Key: k, Payload: v}
	}
	g.want[collection] = want
}
