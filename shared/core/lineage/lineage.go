package lineage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Objects reads objects.
type Objects interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// LimitedObjects reads an object only up to limit bytes: a larger object
// is refused (contract.ErrTooLarge) after reading at most limit+1 bytes.
// Every adapter of the data bucket implements it; GetLimited below falls
// back to Get (and a size check after the fact) for the others.
type LimitedObjects interface {
	GetLimited(ctx context.Context, key string, limit int64) ([]byte, error)
}

// GetLimited reads key from objects with a bounded reader when objects can
// (LimitedObjects), refusing an object above limit as doc at key.
func GetLimited(ctx context.Context, objects Objects, doc, key string, limit int) ([]byte, error) {
	if lo, ok := objects.(LimitedObjects); ok {
		b, err := lo.GetLimited(ctx, key, int64(limit))
		if errors.Is(err, contract.ErrTooLarge) {
			return nil, contract.TooLarge(doc, key, -1, limit)
		}
		return b, err
	}
	b, err := objects.Get(ctx, key)
	if err == nil && len(b) > limit {
		return nil, contract.TooLarge(doc, key, int64(len(b)), limit)
	}
	return b, err
}

// Reader reads lineage with a small cache of verified parts (parts are
// content addressed, so a cached part never goes stale).
type Reader struct {
	objects  Objects
	mu       sync.Mutex
	parts    map[string]contract.Part
	maxParts int
	verified map[string]bool // part keys read and verified by this reader
	changes  map[string]contract.ChangePart
	Reads    int // objects read (for tests and benchmarks)
}

// New returns a reader caching up to maxParts parts.
func New(objects Objects, maxParts int) *Reader {
	return &Reader{objects: objects, parts: map[string]contract.Part{}, maxParts: maxParts, verified: map[string]bool{}, changes: map[string]contract.ChangePart{}}
}

// Verified reports whether this reader read the part at key and it passed
// verification (a cache hit on another key with the same content does not
// count).
func (r *Reader) Verified(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.verified[key]
}

func (r *Reader) markVerified(key string) {
	r.mu.Lock()
	r.verified[key] = true
	r.mu.Unlock()
}

// VerifyPart reads the part at ref.Key and verifies it against ref (no
// cache: the object itself is read).
func (r *Reader) VerifyPart(ctx context.Context, ref contract.PartRef) error {
	b, err := r.get(ctx, "manifest part", ref.Key, contract.MaxPartBytes)
	if err != nil {
		return fmt.Errorf("open part %s: %w", ref.Key, err)
	}
	if _, err := contract.DecodePart(ref, b); err != nil {
		return err
	}
	r.markVerified(ref.Key)
	return nil
}

// VerifyChangePart reads the change part at ref.Key of m and verifies it.
func (r *Reader) VerifyChangePart(ctx context.Context, m *contract.Manifest, ref contract.ChangePartRef) error {
	_, err := r.changePart(ctx, m, ref)
	return err
}

// changePart reads and verifies one change part of m (not cached: a change
// part is read once per sweep, or for one lookup).
func (r *Reader) changePart(ctx context.Context, m *contract.Manifest, ref contract.ChangePartRef) (contract.ChangePart, error) {
	r.mu.Lock()
	p, ok := r.changes[ref.Checksum]
	r.mu.Unlock()
	if ok {
		return p, nil
	}
	b, err := r.get(ctx, "change part", ref.Key, contract.MaxChangePartBytes)
	if err != nil {
		return contract.ChangePart{}, fmt.Errorf("open change part %s: %w", ref.Key, err)
	}
	if p, err = contract.DecodeChangePart(ref, m.Version, b); err != nil {
		return p, err
	}
	r.mu.Lock()
	r.verified[ref.Key] = true
	if len(r.changes) >= 4 {
		clear(r.changes)
	}
	r.changes[ref.Checksum] = p
	r.mu.Unlock()
	return p, nil
}

// EachChange streams the entries of kind (contract.ChangeAdded or
// ChangeRemoved) of m's change: its inline entries, or its change parts of
// that kind one at a time, each verified (memory: one part).
func (r *Reader) EachChange(ctx context.Context, m *contract.Manifest, kind string, fn func(contract.ObjectEntry) error) error {
	inline := m.Change.Added
	if kind == contract.ChangeRemoved {
		inline = m.Change.Removed
	}
	for _, o := range inline {
		if err := fn(o); err != nil {
			return err
		}
	}
	for _, ref := range m.Change.Parts {
		if ref.Kind != kind {
			continue
		}
		p, err := r.changePart(ctx, m, ref)
		if err != nil {
			return err
		}
		for _, o := range p.Objects {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// ChangeHolds reports whether m's change of kind names objectKey, reading
// at most the one change part whose key range covers it.
func (r *Reader) ChangeHolds(ctx context.Context, m *contract.Manifest, kind, objectKey string) (bool, error) {
	inline := m.Change.Added
	if kind == contract.ChangeRemoved {
		inline = m.Change.Removed
	}
	if slices.ContainsFunc(inline, func(o contract.ObjectEntry) bool { return o.Key == objectKey }) {
		return true, nil
	}
	i := m.ChangePartFor(kind, objectKey)
	if i < 0 {
		return false, nil
	}
	p, err := r.changePart(ctx, m, m.Change.Parts[i])
	if err != nil {
		return false, err
	}
	_, found := slices.BinarySearchFunc(p.Objects, objectKey, func(o contract.ObjectEntry, k string) int { return cmp.Compare(o.Key, k) })
	return found, nil
}

func (r *Reader) get(ctx context.Context, doc, key string, limit int) ([]byte, error) {
	r.mu.Lock()
	r.Reads++
	r.mu.Unlock()
	return GetLimited(ctx, r.objects, doc, key, limit)
}

// ErrBadHead wraps every reason a head or its root cannot be trusted: the
// head is missing or does not decode, names another collection, or its root
// is missing, does not match the pinned checksum, does not decode or is
// another version. (A head that could not be read for another reason, such
// as throttling, is not bad: retry.) The original cause stays in the chain.
var ErrBadHead = errors.New("head not usable")

// ReadHead reads and decodes a collection's committed head.
func ReadHead(ctx context.Context, objects Objects, collection string) (contract.Head, error) {
	key := contract.HeadKey(collection)
	b, err := GetLimited(ctx, objects, "head", key, contract.MaxHeadBytes)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return contract.Head{}, fmt.Errorf("%w: %s does not exist: %w", ErrBadHead, key, err)
	case err != nil:
		return contract.Head{}, fmt.Errorf("read head %s: %w", key, err)
	}
	h, err := contract.DecodeHead(key, b)
	if err != nil {
		return h, fmt.Errorf("%w: %w", ErrBadHead, err)
	}
	if h.Collection != collection {
		return h, fmt.Errorf("%w: head %s names collection %q: %w", ErrBadHead, key, h.Collection, contract.ErrInvalid)
	}
	return h, nil
}

// OpenRoot reads a manifest root and verifies it against the checksum that
// names it.
func OpenRoot(ctx context.Context, objects Objects, key, checksum string) (contract.Manifest, error) {
	b, err := GetLimited(ctx, objects, "manifest", key, contract.MaxRootBytes)
	if err != nil {
		return contract.Manifest{}, fmt.Errorf("open manifest %s: %w", key, err)
	}
	if err := contract.VerifyChecksum(key, b, checksum); err != nil {
		return contract.Manifest{}, err
	}
	return contract.DecodeManifest(key, b)
}

// HeadRoot is the one verified head -> root read: the collection's head,
// and the root it names, verified against the head's checksum and checked
// to be that collection's version. Every failure that makes the head
// untrustworthy wraps ErrBadHead.
func HeadRoot(ctx context.Context, objects Objects, collection string) (contract.Head, contract.Manifest, error) {
	h, err := ReadHead(ctx, objects, collection)
	if err != nil {
		return h, contract.Manifest{}, err
	}
	m, err := OpenRoot(ctx, objects, h.ManifestKey, h.ManifestChecksum)
	if err != nil {
		return h, m, fmt.Errorf("%w: %w", ErrBadHead, err)
	}
	if m.Version != h.Version || m.Collection != collection {
		return h, m, fmt.Errorf("%w: root %s is %s v%d, head says %s v%d: %w", ErrBadHead, h.ManifestKey, m.Collection, m.Version, collection, h.Version, contract.ErrInvalid)
	}
	return h, m, nil
}

// Head reads and decodes a collection's committed head (ReadHead).
func (r *Reader) Head(ctx context.Context, collection string) (contract.Head, error) {
	return ReadHead(ctx, counted{r}, collection)
}

// Root opens a root and verifies it against checksum (OpenRoot).
func (r *Reader) Root(ctx context.Context, key, checksum string) (contract.Manifest, error) {
	return OpenRoot(ctx, counted{r}, key, checksum)
}

// HeadRoot reads the head and opens its root (HeadRoot).
func (r *Reader) HeadRoot(ctx context.Context, collection string) (contract.Head, contract.Manifest, error) {
	return HeadRoot(ctx, counted{r}, collection)
}

// counted reads through r, counting reads.
type counted struct{ r *Reader }

func (c counted) Get(ctx context.Context, key string) ([]byte, error) {
	return c.r.get(ctx, "object", key, contract.MaxRootBytes)
}

func (c counted) GetLimited(ctx context.Context, key string, limit int64) ([]byte, error) {
	c.r.mu.Lock()
	c.r.Reads++
	c.r.mu.Unlock()
	return GetLimited(ctx, c.r.objects, "object", key, int(limit))
}

// Part reads and verifies one part (cached).
func (r *Reader) Part(ctx context.Context, ref contract.PartRef) (contract.Part, error) {
	r.mu.Lock()
	p, ok := r.parts[ref.Checksum]
	r.mu.Unlock()
	if ok {
		return p, nil
	}
	b, err := r.get(ctx, "manifest part", ref.Key, contract.MaxPartBytes)
	if err != nil {
		return contract.Part{}, fmt.Errorf("open part %s: %w", ref.Key, err)
	}
	p, err = contract.DecodePart(ref, b)
	if err != nil {
		return p, err
	}
	r.mu.Lock()
	r.verified[ref.Key] = true
	if len(r.parts) >= r.maxParts {
		clear(r.parts)
	}
	r.parts[ref.Checksum] = p
	r.mu.Unlock()
	return p, nil
}

// Lookup reports whether m's full object set holds objectKey, reading at
// most the one part whose key range covers it.
func (r *Reader) Lookup(ctx context.Context, m *contract.Manifest, objectKey string) (contract.ObjectEntry, bool, error) {
	i := m.PartFor(objectKey)
	if i < 0 {
		return contract.ObjectEntry{}, false, nil
	}
	p, err := r.Part(ctx, m.Parts[i])
	if err != nil {
		return contract.ObjectEntry{}, false, err
	}
	j, found := slices.BinarySearchFunc(p.Objects, objectKey, func(o contract.ObjectEntry, k string) int { return cmp.Compare(o.Key, k) })
	if !found {
		return contract.ObjectEntry{}, false, nil
	}
	return p.Objects[j], true, nil
}

// Each streams m's full object set in key order, one verified part at a
// time (memory: one part), calling fn for each object whose part passes keep
// (nil keeps all).
func (r *Reader) Each(ctx context.Context, m *contract.Manifest, keep func(contract.PartRef) bool, fn func(contract.ObjectEntry) error) error {
	for _, ref := range m.Parts {
		if keep != nil && !keep(ref) {
			continue
		}
		b, err := r.get(ctx, "manifest part", ref.Key, contract.MaxPartBytes)
		if err != nil {
			return fmt.Errorf("open part %s: %w", ref.Key, err)
		}
		p, err := contract.DecodePart(ref, b)
		if err != nil {
			return err
		}
		r.markVerified(ref.Key)
		for _, o := range p.Objects {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// Walk is the result of walking a lineage from the head.
type Walk struct {
	Head  contract.Head
	Roots []contract.Manifest // newest first; Roots[0] is the head's root
	// Complete is true when the walk reached version 1; otherwise the parent
	// of the last root is gone (deleted by GC, oldest first).
	Complete bool
}

// WalkFrom reads the head and follows parent links down to floor (inclusive)
// or to the first missing parent.
func (r *Reader) WalkFrom(ctx context.Context, collection string, floor uint64) (Walk, error) {
	h, m, err := r.HeadRoot(ctx, collection)
	if err != nil {
		return Walk{Head: h}, err
	}
	return r.walkParents(ctx, h, m, floor)
}

// WalkFromHead walks as WalkFrom does from a head read before (a dropped
// lifetime's cleanup records the head it asked the publisher to retire,
// and walks the retired lineage from it): its root verified against the
// head's checksum and version, then the parents.
func (r *Reader) WalkFromHead(ctx context.Context, h contract.Head, floor uint64) (Walk, error) {
	m, err := r.Root(ctx, h.ManifestKey, h.ManifestChecksum)
	if err != nil {
		return Walk{Head: h}, err
	}
	if m.Version != h.Version || m.Collection != h.Collection {
		return Walk{Head: h}, fmt.Errorf("%w: root %s is %s v%d, the recorded head says %s v%d: %w", ErrBadHead, h.ManifestKey, m.Collection, m.Version, h.Collection, h.Version, contract.ErrInvalid)
	}
	return r.walkParents(ctx, h, m, floor)
}

// RootAt reads the root at key, which no head names (a root above a
// restored head, a retired lineage's root), and verifies it against its
// key: the checksum prefix the key carries is the document's own (else a
// *contract.ChecksumError: not a root the publisher wrote there), and the
// key names exactly its collection, incarnation and version
// (contract.ManifestKey), as every root the publisher writes.
func (r *Reader) RootAt(ctx context.Context, collection, key string) (contract.Manifest, error) {
	m, _, err := r.RootAtSum(ctx, collection, key)
	return m, err
}

// RootAtSum is RootAt, with the root's checksum.
func (r *Reader) RootAtSum(ctx context.Context, collection, key string) (contract.Manifest, string, error) {
	b, err := GetLimited(ctx, counted{r}, "manifest", key, contract.MaxRootBytes)
	if err != nil {
		return contract.Manifest{}, "", fmt.Errorf("open manifest %s: %w", key, err)
	}
	sum := contract.Checksum(b)
	if hex := strings.TrimPrefix(sum, "sha256:"); !strings.HasSuffix(key, "-"+hex[:16]+".json") {
		return contract.Manifest{}, "", &contract.ChecksumError{Where: key, Expected: "the checksum its key names", Actual: sum}
	}
	m, err := contract.DecodeManifest(key, b)
	if err != nil {
		return m, "", err
	}
	if m.Collection != collection || contract.ManifestKey(collection, m.Inc(), m.Version, sum) != key {
		return m, "", fmt.Errorf("manifest %s is not the root its key names (%s incarnation %d v%d): %w", key, m.Collection, m.Inc(), m.Version, contract.ErrInvalid)
	}
	return m, sum, nil
}

// walkParents follows m's parent links down to floor.
func (r *Reader) walkParents(ctx context.Context, h contract.Head, m contract.Manifest, floor uint64) (Walk, error) {
	w := Walk{Head: h, Roots: []contract.Manifest{m}}
	for m.ParentVersion != 0 && m.ParentVersion >= floor {
		parent, err := r.Root(ctx, m.ParentKey, m.ParentChecksum)
		if errors.Is(err, store.ErrNotFound) {
			return w, nil
		}
		if err != nil {
			return w, err
		}
		w.Roots = append(w.Roots, parent)
		m = parent
	}
	w.Complete = m.ParentVersion == 0
	return w, nil
}
