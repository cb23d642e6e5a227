package publisher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// This file builds large collections quickly for benchmarks and scale tests.
// Parts are produced by the same applyChange code path a commit uses, so
// their encoding, checksums, key ranges and summary are exactly what the
// stand-in publisher writes; only the work of growing the set one commit at
// a time is skipped.

// PutFunc stores one part body under key.
type PutFunc func(ctx context.Context, key string, body []byte) error

// BuildParts splits n objects, produced by object(0..n-1) in strictly
// increasing key order, into parts of maxPart objects (the last may be
// smaller), passing each part to put as soon as it is encoded: memory holds
// one part at a time. It returns the part references and the summary of the
// whole set.
// version is the version whose root will reference the parts (their writer).
func BuildParts(ctx context.Context, collection string, version uint64, n int, object func(i int) contract.ObjectEntry, maxPart int, put PutFunc) ([]contract.PartRef, contract.Summary, error) {
	return BuildPartsIn(ctx, collection, 1, version, n, object, maxPart, put)
}

// BuildPartsIn is BuildParts for a collection's incarnation (its part keys
// carry the incarnation tag).
func BuildPartsIn(ctx context.Context, collection string, incarnation, version uint64, n int, object func(i int) contract.ObjectEntry, maxPart int, put PutFunc) ([]contract.PartRef, contract.Summary, error) {
	if maxPart <= 0 {
		maxPart = 4096
	}
	var (
		refs    []contract.PartRef
		summary contract.Summary
		last    string
		chunk   = make([]contract.ObjectEntry, 0, maxPart)
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		// A base with no parts: applyChange encodes the chunk as fresh parts
		// and carries the running summary forward.
		base := contract.Manifest{Collection: collection, Incarnation: incarnation, Summary: summary}
		np, err := applyChange(ctx, base, version, nil, chunk, nil, maxPart)
		if err != nil {
			return err
		}
		for _, ref := range np.refs {
			if err := put(ctx, ref.Key, np.bodies[ref.Key]); err != nil {
				return fmt.Errorf("write part %s: %w", ref.Key, err)
			}
		}
		refs = append(refs, np.refs...)
		summary = np.summary
		chunk = chunk[:0]
		return nil
	}
	for i := range n {
		o := object(i)
		if i > 0 && o.Key <= last {
			return nil, contract.Summary{}, fmt.Errorf("%w: bulk object %d key %q is not after %q", ErrChange, i, o.Key, last)
		}
		last = o.Key
		chunk = append(chunk, o)
		if len(chunk) == maxPart {
			if err := flush(); err != nil {
				return nil, contract.Summary{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, contract.Summary{}, err
	}
	if refs == nil {
		refs = []contract.PartRef{}
	}
	return refs, summary, nil
}

// BulkLoad commits, on top of collection's current head, which must be an
// empty version (as Create leaves it), one append version adding n objects
// produced by object(0..n-1) in strictly increasing key order. Parts are
// full (Options.MaxPartObjects objects each). The root's change lists every
// added object, as any commit's does: inline when there are few, otherwise
// in change parts written as the objects stream by (memory: one part of
// each), so the root stays small however large the load.
func (p *Publisher) BulkLoad(ctx context.Context, collection string, n int, object func(i int) contract.ObjectEntry) (contract.Head, error) {
	base, err := p.Read(ctx, collection)
	if err != nil {
		return contract.Head{}, err
	}
	if len(base.Root.Parts) != 0 || base.Root.Summary.Objects != 0 {
		return contract.Head{}, fmt.Errorf("bulk load %s: v%d is not empty (%d objects)", collection, base.Head.Version, base.Root.Summary.Objects)
	}
	version := base.Head.Version + 1
	var inline []contract.ObjectEntry
	cw := newChangeWriter(collection, base.Root.Incarnation, version, p.opts.MaxPartObjects, p.putPart)
	nextSeq := base.Root.NextSeq
	var cerr error
	collect := func(i int) contract.ObjectEntry {
		o := object(i)
		nextSeq = max(nextSeq, o.MaxSeq+1)
		if n <= p.opts.MaxInlineChange {
			inline = append(inline, o)
		} else if err := cw.add(ctx, contract.ChangeAdded, o); err != nil && cerr == nil {
			cerr = err
		}
		return o
	}
	refs, summary, err := BuildPartsIn(ctx, collection, base.Root.Incarnation, version, n, collect, p.opts.MaxPartObjects, p.putPart)
	if err == nil {
		err = cerr
	}
	if err != nil {
		return contract.Head{}, err
	}
	change, ok := inlineChange(inline, nil, p.opts.MaxInlineChange)
	if !ok || n > p.opts.MaxInlineChange {
		if change, err = cw.done(ctx); err != nil {
			return contract.Head{}, err
		}
	}
	root := contract.Manifest{
		SchemaVersion: contract.SchemaVersion, Collection: collection, Incarnation: base.Root.Incarnation, Version: version,
		ParentVersion: base.Head.Version, ParentKey: base.Head.ManifestKey, ParentChecksum: base.Head.ManifestChecksum,
		CommitTsUnixMs: max(p.now().UnixMilli(), base.Root.CommitTsUnixMs+1), NextSeq: nextSeq,
		Origin: contract.Origin{Kind: contract.OriginAppend},
		Change: change, Parts: refs, Summary: summary,
	}
	head, body, err := p.writeRoot(ctx, root)
	if err != nil {
		return head, err
	}
	if _, err := p.objects.PutIfMatch(ctx, contract.HeadKey(collection), body, base.etag); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return head, fmt.Errorf("bulk load %s from v%d: %w", collection, base.Head.Version, ErrConflict)
		}
		return head, fmt.Errorf("bulk load %s: cas head: %w", collection, err)
	}
	return head, nil
}

// Synthetic is a deterministic, realistic object set of one collection for
// benchmarks: Object(i) is the same entry on every call and keys increase
// strictly with i. About 1% of the objects are level-0 append segments, 9%
// level-1 and the rest level-2 rewrite outputs (64 per task), with sizes,
// counts, timestamps, sequence ranges and record-key ranges that grow with
// the level.
type Synthetic struct {
	Collection string
	Objects    int
	BaseTsMs   int64 // min timestamp of the oldest object (default 2026-01-01)
}

func (s Synthetic) split() (l0, l1 int) {
	l0 = max(s.Objects/100, 1)
	l1 = s.Objects * 9 / 100
	return l0, l1
}

// splitmix64 is a small deterministic mixer.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Object returns the i-th object (0 <= i < Objects).
func (s Synthetic) Object(i int) contract.ObjectEntry {
	base := s.BaseTsMs
	if base == 0 {
		base = 1767225600000 // 2026-01-01T00:00:00Z
	}
	r := splitmix64(uint64(i))
	l0, l1 := s.split()
	var key, tier string
	var level int
	var size int64
	switch {
	case i < l0:
		level, tier = 0, contract.TierHot
		key = contract.AppendSegmentKey(s.Collection, 1, uint64(1_000_000+i/4), i%4)
		size = 1<<20 + int64(r%(7<<20)) // 1..8 MiB
	case i < l0+l1:
		j := i - l0
		level, tier = 1, contract.TierHot
		key = contract.RewriteOutputKey(s.Collection, 1, fmt.Sprintf("compaction-%s-v%07d-%016x", s.Collection, 1_000_000+j/64, splitmix64(uint64(j/64))), j%64)
		size = 16<<20 + int64(r%(48<<20)) // 16..64 MiB
	default:
		j := i - l0 - l1
		level, tier = 2, contract.TierWarm
		if r%10 == 0 {
			tier = contract.TierCold
		}
		key = contract.RewriteOutputKey(s.Collection, 2, fmt.Sprintf("compaction-%s-v%07d-%016x", s.Collection, 1_000_000+j/64, splitmix64(uint64(j/64)+1<<40)), j%64)
		size = 64<<20 + int64(r%(64<<20)) // 64..128 MiB
	}
	sum := sha256.Sum256([]byte(key))
	docs := size / 256
	dels := int64(r>>20) % (docs/20 + 1)
	// Timestamps and sequences: older objects (deeper levels, lower index)
	// cover earlier, longer ranges.
	age := int64(s.Objects - i)
	minTs := base + int64(i)*1000
	maxTs := minTs + 1000 + int64(r%60_000) + age%1000
	minSeq := uint64(i)*1_000 + 1
	maxSeq := minSeq + uint64(docs%1_000)
	rk := r % 1_000_000_000
	return contract.ObjectEntry{
		Key: key, Size: size, Checksum: "sha256:" + hex.EncodeToString(sum[:]), Tier: tier, Level: level,
		DocCount: docs, DeleteCount: dels, MinTsUnixMs: minTs, MaxTsUnixMs: maxTs, MinSeq: minSeq, MaxSeq: maxSeq,
		MinRecordKey: fmt.Sprintf("doc-%012d", rk), MaxRecordKey: fmt.Sprintf("doc-%012d", rk+uint64(docs)),
	}
}
