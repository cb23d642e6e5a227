package publisher

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
)

// The CCS facts fence of a cutover (issue 18). The coordinator's handoff
// reads CCS facts right before it submits a cutover, but the facts may
// change between that read and the head CAS, or while a queued request
// waits. A request carrying ccs_facts is therefore judged again by the
// owner at the moment of effect: right before the head CAS the publisher
// re-reads the collection's CCS facts and applies nothing when they changed
// what the task kind depends on (contract.FactsFence.Changed), answering
// stale_facts. Unreadable facts apply nothing either: the request fails
// (outcome unknown to the caller, who re-reads the head and may resend).

// FactsSource reads a collection's current CCS facts.
type FactsSource interface {
	Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
}

// ErrStaleFacts: the CCS facts a cutover was judged under changed before
// its head CAS; nothing became visible.
var ErrStaleFacts = errors.New("CCS facts changed since the cutover was judged")

// SetFacts sets the CCS the publisher re-reads facts from (before any
// cutover carrying ccs_facts is served).
func (p *Publisher) SetFacts(src FactsSource) { p.facts = src }

// recheckFacts re-reads c's CCS facts for a change judged under fence
// (nil: no check asked for).
func (p *Publisher) recheckFacts(ctx context.Context, c string, fence *contract.FactsFence) error {
	if fence == nil || p.opts.SkipFactsRecheck {
		return nil
	}
	if p.facts == nil {
		return fmt.Errorf("cas head of %s: the cutover carries ccs_facts and this publisher has no CCS to check them against", c)
	}
	f, err := p.facts.Facts(ctx, c)
	if err != nil {
		return fmt.Errorf("cas head of %s: re-read CCS facts: %w", c, err)
	}
	if why := fence.Changed(f); why != "" {
		p.log.Info("cutover refused at the head CAS: CCS facts changed", "collection", c, "reason", why)
		return fmt.Errorf("cas head of %s: %w: %s", c, ErrStaleFacts, why)
	}
	return nil
}
