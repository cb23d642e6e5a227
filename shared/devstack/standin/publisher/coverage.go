package publisher

import (
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
)

// The coverage check of a cutover (review2526 D7; issue 25 "no single role
// can publish a wipe"): a cutover is a rewrite, and the caller's word that
// it is one is not taken. The handoff checks a rewrite's provenance before
// it submits (handoff_provenance), but a holder of the handoff's role can
// submit whatever it likes, so the publisher, at the moment of effect,
// applies only a coverage that can be a rewrite of its base: every added
// key an output of one rewrite task of the request's collection,
// incarnation and base version (contract.RewriteTask), and the outputs
// able to hold what the inputs held (contract.CoverageConserved: a
// removal of records that adds nothing, a transition that is no copy, a
// merge whose records or key ranges are not conserved, is refused as
// rejected). events/PUBLISHER.md and docs/safety.md state this as the
// contract for a real publisher.

// coverage says why req's coverage cannot be a rewrite of its base (""
// when it can).
func (p *Publisher) coverage(req contract.CutoverRequest) string {
	if p.opts.Unconserved {
		return ""
	}
	c := req.Collection
	taskID, transition, ok := contract.RewriteTask(c, req.Added)
	if !ok && len(req.Added) > 0 {
		return fmt.Sprintf("the added objects are not the outputs of one rewrite task of %s (first %s)", c, req.Added[0].Key)
	}
	if ok {
		kind := contract.KindCompaction
		if transition {
			kind = contract.KindLifecycleTransition
		}
		inc, base, _ := contract.ParseTaskID(kind, c, taskID)
		if inc != contract.Lifetime(req.Incarnation) || base != req.BaseVersion {
			return fmt.Sprintf("the outputs are task %s's, of incarnation %d v%d, not of the request's base (incarnation %d v%d)",
				taskID, inc, base, contract.Lifetime(req.Incarnation), req.BaseVersion)
		}
	}
	return contract.CoverageConserved(c, taskID, transition, req.Removed, req.Added)
}
