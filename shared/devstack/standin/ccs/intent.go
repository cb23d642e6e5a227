package ccs

import (
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
)

// The facts fence of a collection release intent (issue 18, at the owner).
// The coordinator's handoff re-reads the facts right before it asks for a
// release, but the tombstone may be replaced (a new drop, a new horizon)
// between that read and the record. A release is irreversible and belongs
// to one tombstone, so CCS records a collection intent only while its
// facts are still the version the request carries (the version the
// cleanup ran under and the handoff judged): otherwise it answers
// stale_facts and records nothing. A repeat of an intent already recorded
// is answered already_recorded before this check (idempotent by id).

// staleFacts says why req no longer matches f ("" when it does).
func (s *Service) staleFacts(req contract.ReleaseIntentRequest, f contract.CollectionFacts) string {
	if s.SkipFactsCheck || req.FactsVersion == f.FactsVersion {
		return ""
	}
	return fmt.Sprintf("%s facts are v%d, the release was judged under v%d", req.Collection, f.FactsVersion, req.FactsVersion)
}
