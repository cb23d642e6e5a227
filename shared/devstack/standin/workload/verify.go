package workload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/core/segment"
)

// SegmentSource opens a segment for reading.
type SegmentSource interface {
	Size(ctx context.Context, key string) (int64, error)
	ReaderAt(ctx context.Context, key string, size int64) io.ReaderAt
}

// Read resolves every key of the committed head: for each key the record
// with the highest seq across all segments of the head's manifest, absent
// when that record is a delete marker.
func Read(ctx context.Context, lin *lineage.Reader, src SegmentSource, collection string) (map[string][]byte, contract.Head, error) {
	head, root, err := lin.HeadRoot(ctx, collection)
	if err != nil {
		return nil, head, err
	}
	type latest struct {
		seq     uint64
		deleted bool
		payload []byte
	}
	best := map[string]latest{}
	err = lin.Each(ctx, &root, nil, func(o contract.ObjectEntry) error {
		size, err := src.Size(ctx, o.Key)
		if err != nil {
			return fmt.Errorf("committed object %s is missing: %w", o.Key, err)
		}
		r, err := segment.Open(src.ReaderAt(ctx, o.Key, size), size)
		if err != nil {
			return fmt.Errorf("open %s: %w", o.Key, err)
		}
		it := r.Iter()
		for it.Next() {
			rec := it.Record()
			if cur, ok := best[rec.Key]; !ok || rec.Seq > cur.seq {
				best[rec.Key] = latest{seq: rec.Seq, deleted: rec.Delete, payload: bytes.Clone(rec.Payload)}
			}
		}
		return it.Err()
	})
	if err != nil {
		return nil, head, err
	}
	out := map[string][]byte{}
	for k, l := range best {
		if !l.deleted {
			out[k] = l.payload
		}
	}
	return out, head, nil
}

// Diff describes how got differs from want (empty when equal).
func Diff(want, got map[string][]byte) []string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			d = append(d, "missing "+k)
		case !bytes.Equal(g, want[k]):
			d = append(d, "wrong value for "+k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			d = append(d, "unexpected (resurrected?) "+k)
		}
	}
	return d
}
