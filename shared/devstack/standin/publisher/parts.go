package publisher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/searchfabric/bcc/shared/contract"
)

// ErrChange: a change does not apply to its base (removing an absent object,
// adding a present one).
var ErrChange = errors.New("change does not apply")

// partLoader reads and verifies one part.
type partLoader func(ctx context.Context, ref contract.PartRef) (contract.Part, error)

// newParts is the outcome of applying a change to a base's parts.
type newParts struct {
	refs    []contract.PartRef
	bodies  map[string][]byte // key -> bytes, parts to write
	summary contract.Summary
}

// applyChange rewrites only the parts whose key ranges the change touches;
// every other part is reused by reference.
// applyChange computes the parts of version (base.Version+1 normally)
// from base's parts and a change.
func applyChange(ctx context.Context, base contract.Manifest, version uint64, load partLoader, added, removed []contract.ObjectEntry, maxPart int) (newParts, error) {
	touched := map[int][]contract.ObjectEntry{} // part index -> objects after the change
	loadTouched := func(i int) error {
		if _, ok := touched[i]; ok || i < 0 {
			return nil
		}
		p, err := load(ctx, base.Parts[i])
		if err != nil {
			return err
		}
		touched[i] = slices.Clone(p.Objects)
		return nil
	}
	var fresh []contract.ObjectEntry // adds when the base has no parts
	for _, r := range removed {
		i := base.PartFor(r.Key)
		if err := loadTouched(i); err != nil {
			return newParts{}, err
		}
		if i < 0 {
			return newParts{}, fmt.Errorf("%w: remove %s: not in v%d", ErrChange, r.Key, base.Version)
		}
		objs := touched[i]
		j, found := slices.BinarySearchFunc(objs, r.Key, func(o contract.ObjectEntry, k string) int { return cmp.Compare(o.Key, k) })
		if !found || objs[j].Checksum != r.Checksum {
			return newParts{}, fmt.Errorf("%w: remove %s: not in v%d with checksum %s", ErrChange, r.Key, base.Version, r.Checksum)
		}
		touched[i] = slices.Delete(objs, j, j+1)
	}
	for _, a := range added {
		i := insertionPart(base.Parts, a.Key)
		if i < 0 {
			fresh = append(fresh, a)
			continue
		}
		if err := loadTouched(i); err != nil {
			return newParts{}, err
		}
		objs := touched[i]
		j, found := slices.BinarySearchFunc(objs, a.Key, func(o contract.ObjectEntry, k string) int { return cmp.Compare(o.Key, k) })
		if found {
			return newParts{}, fmt.Errorf("%w: add %s: already in v%d", ErrChange, a.Key, base.Version)
		}
		touched[i] = slices.Insert(objs, j, a)
	}
	out := newParts{bodies: map[string][]byte{}, summary: summarize(base.Summary, added, removed)}
	for i, ref := range base.Parts {
		objs, ok := touched[i]
		if !ok {
			out.refs = append(out.refs, ref)
			continue
		}
		if err := out.addChunks(base.Collection, base.Inc(), version, objs, maxPart); err != nil {
			return newParts{}, err
		}
	}
	slices.SortFunc(fresh, func(a, b contract.ObjectEntry) int { return cmp.Compare(a.Key, b.Key) })
	if err := out.addChunks(base.Collection, base.Inc(), version, fresh, maxPart); err != nil {
		return newParts{}, err
	}
	slices.SortFunc(out.refs, func(a, b contract.PartRef) int { return cmp.Compare(a.FirstKey, b.FirstKey) })
	return out, nil
}

// insertionPart is the part an added key belongs to: the first whose last
// key is >= key, else the last part; -1 when there are no parts.
func insertionPart(parts []contract.PartRef, key string) int {
	if len(parts) == 0 {
		return -1
	}
	i, _ := slices.BinarySearchFunc(parts, key, func(p contract.PartRef, k string) int { return cmp.Compare(p.LastKey, k) })
	return min(i, len(parts)-1)
}

// addChunks splits objs into parts of at most maxPart objects (half-full
// after a split, so the next adds do not split again at once).
func (n *newParts) addChunks(collection string, incarnation, version uint64, objs []contract.ObjectEntry, maxPart int) error {
	if len(objs) == 0 {
		return nil
	}
	size := len(objs)
	if size > maxPart {
		size = max(maxPart/2, 1)
	}
	for start := 0; start < len(objs); start += size {
		chunk := objs[start:min(start+size, len(objs))]
		body, err := contract.Encode(contract.Part{SchemaVersion: contract.SchemaVersion, Collection: collection, Objects: chunk})
		if err != nil {
			return err
		}
		sum := contract.Checksum(body)
		ref := contract.PartRef{Key: contract.PartKey(collection, incarnation, version, sum), Checksum: sum, ObjectCount: len(chunk),
			FirstKey: chunk[0].Key, LastKey: chunk[len(chunk)-1].Key}
		ref.MinObjectMaxTsUnixMs, ref.Tiers, ref.TierMinMaxTsUnixMs = contract.PartTierStats(chunk)
		for _, o := range chunk {
			ref.Bytes += o.Size
		}
		n.refs = append(n.refs, ref)
		n.bodies[ref.Key] = body
	}
	return nil
}

func summarize(base contract.Summary, added, removed []contract.ObjectEntry) contract.Summary {
	levels := map[int]contract.LevelSummary{}
	for _, l := range base.Levels {
		levels[l.Level] = l
	}
	apply := func(o contract.ObjectEntry, sign int64) {
		l := levels[o.Level]
		l.Level = o.Level
		l.Objects += sign
		l.Bytes += sign * o.Size
		l.DocCount += sign * o.DocCount
		l.DeleteCount += sign * o.DeleteCount
		levels[o.Level] = l
	}
	for _, o := range removed {
		apply(o, -1)
	}
	for _, o := range added {
		apply(o, 1)
	}
	var s contract.Summary
	for _, lv := range slices.Sorted(maps.Keys(levels)) {
		l := levels[lv]
		if l.Objects == 0 {
			continue
		}
		s.Levels = append(s.Levels, l)
		s.Objects += l.Objects
		s.Bytes += l.Bytes
		s.DocCount += l.DocCount
		s.DeleteCount += l.DeleteCount
	}
	return s
}
