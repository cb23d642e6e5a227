package gc

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/searchfabric/bcc/shared/contract"
)

// A sweep lists twice: the incarnation's roots (read phase: roots above
// the head, their write times) and the data prefix (existence of the
// candidates, never-committed outputs). A collection whose keys fit one
// page of a listing is listed once instead, in the read phase: that page
// answers both (memory stays one page). A larger one costs one page more
// (the first page of the collection prefix, abandoned) and is listed as
// before.

// onePage lists c's whole prefix if it fits one page (nil when it does
// not, or without a lister).
func (pl planner) onePage(ctx context.Context, c string) ([]Listed, error) {
	if pl.ports.Lister == nil {
		return nil, nil
	}
	var keys []Listed
	pages := 0
	err := pl.ports.Lister.List(ctx, contract.CollectionPrefix(c), func(page []Listed) error {
		if pages++; pages > 1 {
			keys = nil
			return ErrStopListing
		}
		keys = slices.Clone(page)
		return nil
	})
	if errors.Is(err, ErrStopListing) {
		return nil, nil
	}
	if keys == nil && err == nil {
		keys = []Listed{}
	}
	return keys, err
}

// pageLister answers listings under its collection's prefix from the one
// page that holds all of it.
type pageLister struct{ page []Listed }

func (p pageLister) List(_ context.Context, prefix string, fn func([]Listed) error) error {
	var out []Listed
	for _, l := range p.page {
		if strings.HasPrefix(l.Key, prefix) {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil
	}
	err := fn(out)
	if errors.Is(err, ErrStopListing) {
		return err // as a real listing stopped by its callback
	}
	return err
}

// lister is the lister a sweep's listings use: the one page when the read
// phase found the whole collection on it, else the port.
func (pl planner) lister(v *view) Lister {
	if v != nil && v.page != nil {
		return pageLister{page: v.page}
	}
	return pl.ports.Lister
}
