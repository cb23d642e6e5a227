package naive

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// Objects reads objects.
type Objects interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// LenientLineage reads heads and roots the way a reader that ignores what
// it does not understand would: fields unknown to this build are dropped
// silently (checksums are still verified). It satisfies gc.Lineage; parts
// are read by the strict reader.
type LenientLineage struct {
	*lineage.Reader
	objects Objects
}

// NewLenientLineage returns a lenient reader over objects.
func NewLenientLineage(objects Objects) *LenientLineage {
	return &LenientLineage{Reader: lineage.New(objects, 64), objects: objects}
}

// Head decodes the head without rejecting unknown fields.
func (l *LenientLineage) Head(ctx context.Context, c string) (contract.Head, error) {
	var h contract.Head
	b, err := l.objects.Get(ctx, contract.HeadKey(c))
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

// WalkFrom follows parent links from the head, decoding roots leniently.
func (l *LenientLineage) WalkFrom(ctx context.Context, c string, floor uint64) (lineage.Walk, error) {
	var w lineage.Walk
	var err error
	if w.Head, err = l.Head(ctx, c); err != nil {
		return w, err
	}
	key, sum := w.Head.ManifestKey, w.Head.ManifestChecksum
	for key != "" {
		b, err := l.objects.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) && len(w.Roots) > 0 {
			return w, nil
		}
		if err != nil {
			return w, err
		}
		if err := contract.VerifyChecksum(key, b, sum); err != nil {
			return w, err
		}
		var m contract.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return w, err
		}
		w.Roots = append(w.Roots, m)
		if m.ParentVersion == 0 {
			w.Complete = true
			return w, nil
		}
		if m.ParentVersion < floor {
			return w, nil
		}
		key, sum = m.ParentKey, m.ParentChecksum
	}
	return w, nil
}
