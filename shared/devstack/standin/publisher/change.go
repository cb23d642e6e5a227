package publisher

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/searchfabric/bcc/shared/contract"
)

// changeWriter builds a version's change: inline when it is small
// (contract.MaxInlineChange entries in all), otherwise in change parts of
// at most maxPart entries of one kind, each written as soon as it is full
// (memory: one part).
type changeWriter struct {
	collection  string
	incarnation uint64
	version     uint64
	maxPart     int
	put         PutFunc
	change      contract.Change
	chunk       []contract.ObjectEntry
	kind        string
}

func newChangeWriter(collection string, incarnation, version uint64, maxPart int, put PutFunc) *changeWriter {
	return &changeWriter{collection: collection, incarnation: incarnation, version: version, maxPart: min(max(maxPart, 1), contract.MaxPartObjects), put: put,
		change: contract.Change{Added: []contract.ObjectEntry{}, Removed: []contract.ObjectEntry{}}}
}

// inlineChange builds a change from complete lists when it fits in the
// root (at most maxInline entries); ok is false when it does not (write it
// with a changeWriter instead).
func inlineChange(added, removed []contract.ObjectEntry, maxInline int) (contract.Change, bool) {
	if len(added)+len(removed) > maxInline {
		return contract.Change{}, false
	}
	c := contract.Change{Added: nonNil(slices.Clone(added)), Removed: nonNil(slices.Clone(removed)),
		AddedObjects: int64(len(added)), RemovedObjects: int64(len(removed))}
	for _, o := range removed {
		c.RemovedBytes += o.Size
	}
	return c, true
}

// add appends entries of kind, in strictly increasing key order within the
// kind (all of one kind before the other).
func (w *changeWriter) add(ctx context.Context, kind string, o contract.ObjectEntry) error {
	if kind != w.kind {
		if err := w.flush(ctx); err != nil {
			return err
		}
		w.kind = kind
	}
	w.chunk = append(w.chunk, o)
	if kind == contract.ChangeAdded {
		w.change.AddedObjects++
	} else {
		w.change.RemovedObjects++
		w.change.RemovedBytes += o.Size
	}
	if len(w.chunk) == w.maxPart {
		return w.flush(ctx)
	}
	return nil
}

func (w *changeWriter) flush(ctx context.Context) error {
	if len(w.chunk) == 0 {
		return nil
	}
	body, err := contract.Encode(contract.ChangePart{SchemaVersion: contract.SchemaVersion, Collection: w.collection, Version: w.version, Kind: w.kind, Objects: w.chunk})
	if err != nil {
		return err
	}
	sum := contract.Checksum(body)
	ref := contract.ChangePartRef{Key: contract.ChangePartKey(w.collection, w.incarnation, w.version, sum), Checksum: sum, Kind: w.kind, ObjectCount: len(w.chunk),
		FirstKey: w.chunk[0].Key, LastKey: w.chunk[len(w.chunk)-1].Key}
	if err := w.put(ctx, ref.Key, body); err != nil {
		return fmt.Errorf("write change part %s: %w", ref.Key, err)
	}
	w.change.Parts = append(w.change.Parts, ref)
	w.chunk = w.chunk[:0]
	return nil
}

// done returns the change (its parts all written).
func (w *changeWriter) done(ctx context.Context) (contract.Change, error) {
	err := w.flush(ctx)
	return w.change, err
}

// buildChange is the change of a commit: inline when small, else written
// in change parts (sorted copies of added and removed).
func buildChange(ctx context.Context, collection string, incarnation, version uint64, added, removed []contract.ObjectEntry, maxInline, maxPart int, put PutFunc) (contract.Change, error) {
	if c, ok := inlineChange(added, removed, maxInline); ok {
		return c, nil
	}
	w := newChangeWriter(collection, incarnation, version, maxPart, put)
	for _, kind := range []string{contract.ChangeAdded, contract.ChangeRemoved} {
		list := added
		if kind == contract.ChangeRemoved {
			list = removed
		}
		sorted := slices.SortedFunc(slices.Values(list), func(a, b contract.ObjectEntry) int { return cmp.Compare(a.Key, b.Key) })
		for _, o := range sorted {
			if err := w.add(ctx, kind, o); err != nil {
				return contract.Change{}, err
			}
		}
	}
	return w.done(ctx)
}
