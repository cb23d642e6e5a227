package handoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Remains lists the keys under a prefix, a page at a time (the data
// bucket). The handoff uses it for one thing: to see for itself, before a
// release intent, that nothing of the dropped lifetime is left.
type Remains interface {
	Keys(ctx context.Context, prefix string, page func(keys []string) error) error
}

// WithRemains gives the handoff its bucket listing (guard
// release_rederived: without one no release intent is requested).
func (h *Handoff) WithRemains(r Remains) *Handoff {
	h.remains = r
	return h
}

// errEnough ends a listing at the first key of the lifetime.
var errEnough = errors.New("a key of the lifetime found")

// rederived derives a collection release's dependencies again from durable
// truth, whatever the cleanup completion says (guard release_rederived;
// rules 8, 16, 17): CCS's reservation horizon has passed by the handoff's
// own clock, CCS
// declares no precondition pending, and a listing of the collection's
// prefix finds no key of the lifetime (ofLifetime): no manifest key tagged
// with it, no rewrite output of its tasks, no append segment tagged with
// it, no control artifact CCS names. A completion is one role's word (a GC role's
// "confirmed" is only a claim); what is left in the bucket and the clock
// are not. It returns why the release is not owed yet ("" when it is).
func (h *Handoff) rederived(ctx context.Context, c contract.Completion, f contract.CollectionFacts) (string, error) {
	// The mutations of release_dependencies and release_horizon switch
	// off this half too (the cleanup's wait is the other), so that each
	// is proven on its own.
	g := h.cfg.Guards
	if !g.ReleaseRederived || !g.ReleaseDependencies {
		return "", nil
	}
	if f.Collection == "" {
		var err error
		if f, err = h.ccs.Facts(ctx, c.Collection); err != nil {
			return "", fmt.Errorf("release intent for %s: read CCS facts: %w: %w", c.Collection, ErrFactsUnavailable, err)
		}
	}
	now := h.now()
	// The cleanup waits for horizon + skew by GC's clock, which runs at
	// most the skew ahead of ours: the horizon itself by our clock is what
	// that wait guarantees here (CCS, the owner, checks its own).
	if at := time.UnixMilli(f.ReservationHorizonUnixMs); g.ReleaseHorizon && now.Before(at) {
		return fmt.Sprintf("the reservation horizon passes at %s, %s from now by the handoff's clock",
			at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second)), nil
	}
	if len(f.PendingPreconditions) > 0 {
		return fmt.Sprintf("CCS preconditions pending: %v", f.PendingPreconditions), nil
	}
	if h.remains == nil {
		return "no bucket listing configured: what is left of the lifetime cannot be seen", nil
	}
	inc := c.Inc()
	artifact := map[string]bool{}
	for _, k := range f.ControlArtifacts {
		artifact[k] = true
	}
	var first string
	n := 0
	err := h.remains.Keys(ctx, contract.CollectionPrefix(c.Collection), func(keys []string) error {
		for _, k := range keys {
			if ofLifetime(c.Collection, inc, k) || artifact[k] {
				first, n = k, n+1
				return errEnough
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return "", fmt.Errorf("release intent for %s: list what is left of incarnation %d: %w", c.Collection, inc, err)
	}
	if n > 0 {
		return fmt.Sprintf("the bucket still holds keys of incarnation %d (%s)", inc, first), nil
	}
	return "", nil
}

// ofLifetime reports whether key is one of collection c's lifetime inc
// that the cleanup must delete before the release (contract.OfLifetime,
// what the tombstone cleanup's own last listing counts): a manifest root,
// part or change part tagged with it, a rewrite output of one of its
// tasks, or an append segment tagged with it. A committed segment left
// after its manifests went (a GC role that deleted the manifests first,
// a root the cleanup never read) would never be deleted after the
// release, so it keeps the release waiting (rules 8, 17); a writer's
// never-committed segment is the writer's to remove (the stand-in writer
// removes a lost attempt's), and the release waits for that too.
func ofLifetime(c string, inc uint64, key string) bool {
	return contract.OfLifetime(c, inc, key)
}
