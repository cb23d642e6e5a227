package ccs

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// The lifetime fence of a collection release intent (review2526 D6; SYSTEM
// rule 8): a release is irreversible, and once it is recorded no cleanup of
// that lifetime is owed any more. A release intent is one caller's word
// (the handoff's role), so CCS, the owner at the moment of effect, sees
// for itself that the lifetime is gone before it records one: the head
// pointer no longer names the incarnation (the publisher retired it), and
// a listing of the collection's prefix finds no key of it
// (contract.OfLifetime: its manifest keys, its tasks' rewrite outputs, its
// append segments). Without a view of the data bucket it records no
// release at all. events/CCS.md and docs/safety.md state this as the
// contract for a real CCS.

// Bucket is what CCS reads of the data bucket to judge a release: the head
// pointer and the keys under a collection's prefix.
type Bucket interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Keys(ctx context.Context, prefix string, fn func(keys []string) error) error
}

// SetBucket gives CCS its read view of the data bucket.
func (s *Service) SetBucket(b Bucket) { s.bucket = b }

// errFound ends a listing at the first key of the lifetime.
var errFound = errors.New("a key of the lifetime found")

// lifetimeLeft says why lifetime inc of collection c is not gone yet (""
// when it is).
func (s *Service) lifetimeLeft(ctx context.Context, c string, inc uint64) (string, error) {
	if s.SkipRemainsCheck {
		return "", nil
	}
	if s.bucket == nil {
		return "CCS has no view of the data bucket: it cannot see that the lifetime is gone", nil
	}
	b, err := s.bucket.Get(ctx, contract.HeadKey(c))
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return "", fmt.Errorf("read the head of %s: %w", c, err)
	default:
		h, err := contract.DecodeHead(contract.HeadKey(c), b)
		if err != nil {
			return fmt.Sprintf("the head of %s is unreadable (%v): the lifetime may still be live", c, err), nil
		}
		if h.Inc() == inc {
			return fmt.Sprintf("the head of %s still names incarnation %d (v%d): not retired", c, inc, h.Version), nil
		}
	}
	var first string
	err = s.bucket.Keys(ctx, contract.CollectionPrefix(c), func(keys []string) error {
		for _, k := range keys {
			if contract.OfLifetime(c, inc, k) {
				first = k
				return errFound
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return "", fmt.Errorf("list what is left of %s incarnation %d: %w", c, inc, err)
	}
	if first != "" {
		return fmt.Sprintf("the bucket still holds keys of %s incarnation %d (%s)", c, inc, first), nil
	}
	return "", nil
}
