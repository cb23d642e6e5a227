package sim

import (
	"context"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// retirePort is the tombstone cleanup's HeadRetirer: the real stand-in
// publisher's Retire (a conditional delete on the head's ETag through the
// shipped S3 adapter over memaws, with memaws's faults) behind a transport
// that may time out before or after the publisher acted (both are
// store.ErrAmbiguous to the caller, which asks again on its next run).
// While it runs, a head delete is the owner's (invariant head-owner).
type retirePort struct{ w *World }

func (p retirePort) Retire(ctx context.Context, req contract.RetireRequest) (contract.RetireAnswer, error) {
	w := p.w
	if req.Collection == w.ownerDown {
		return contract.RetireAnswer{}, fmt.Errorf("retire %s: publisher unreachable for %s (connection refused): %w", req.RequestID, req.Collection, store.ErrAmbiguous)
	}
	f := w.fault("publisher-retire", req.Collection, true)
	if f == FaultAmbiguousLost || f == FaultThrottle {
		w.count("retire-timeout-before")
		return contract.RetireAnswer{}, fmt.Errorf("retire %s: %w", req.RequestID, store.ErrAmbiguous)
	}
	w.retiring++
	ans, err := w.pub.Retire(ctx, req)
	w.retiring--
	if err == nil {
		w.count("retire-" + ans.Status)
	}
	w.afterWrite("publisher-retire", req.Collection)
	if f == FaultAmbiguousDone {
		w.count("retire-timeout-after")
		return contract.RetireAnswer{}, fmt.Errorf("retire %s: %w", req.RequestID, store.ErrAmbiguous)
	}
	return ans, err
}
