// Package handoff is the handoff use case: it turns executor completions
// into the next owner's action. A rewrite (compaction, lifecycle transition)
// becomes a cutover candidate for the Manifest Publisher; a finished
// tombstone cleanup becomes a CCS release intent. Neither is ever decided
// from coordinator state: the publisher's head CAS and CCS's idempotent
// intent identity are the fences, and the committed head is re-read before
// every decision.
//
// Rules:
//   - A rewrite's work counts from the earlier of its task's claimed start
//     (one claimed after the handoff's clock counts from now) and the
//     earliest LastModified S3 gave the outputs it adds, read by the
//     handoff itself (written.go; guard cutover_from_written). The
//     cutover's not_after is that + CutoverDeadline, so it always passes
//     before GC's never-committed reclaim of those outputs (their
//     LastModified + cutover deadline + 2 x skew), whatever a completion
//     claims; an output that is not in the bucket rejects the result
//     (rejected, as the publisher would: nothing is submitted).
//   - A rewrite older than the maximum task lifetime is dropped: GC may
//     already be reclaiming its never-committed outputs.
//   - The coordinator never rebases a result: every request names its
//     base and its exact coverage. If the head moved since the base and the
//     publisher has the conflict check (Config.ConflictChecked, rebase.go)
//     and proved it (an earlier answer echoed conflict_check v1; guard
//     conflict_check_proven: a declaration is not a proof; an instance
//     without the proof first probes for it with a request that cannot take
//     effect, rebase.go probe, and until the proof the result is judged as
//     without the capability), the request
//     is submitted as it is, asking for the check: the
//     publisher alone may apply it on its current head, at its CAS, when it
//     proves it conflict-free there (events/PUBLISHER.md); the handoff
//     first checks the head is of the result's lifetime and the coverage
//     applies to the base. Without the capability the result is dropped
//     (stale) and fresh work comes from the new head; if a version since
//     the base added delete markers over an input's key range, it is
//     rejected as a delete gain (checked first).
//   - Before a candidate is submitted, its coverage is checked against the
//     base: every removed object is in the base with exactly the base's
//     entry, no key appears twice, no added key is already there. A
//     mismatch is rejected (rejected_coverage) without asking the
//     publisher, whatever the publisher would have done with it.
//   - A cutover whose outcome is unknown (timeout, 5xx) is resolved by
//     re-reading the head: our request id in the lineage since the base
//     means accepted; the head still at the base means resubmit (the
//     publisher is idempotent by request id); anything else is stale. The
//     handoff never blindly retries and never cleans up.
//   - A task is also stale when CCS facts it depends on changed: right
//     before every cutover submission (resubmissions included) and every
//     release intent, the current facts are read and their digest for the
//     task kind (contract.FactsDigest) compared with the completion's. A
//     mismatch drops the result (stale_facts): a transition under a policy
//     that no longer asks for it, a rewrite of a tombstoned collection, or a
//     release of a tombstone that is no longer the one cleaned up would
//     each act on facts the task was not planned for. Facts that cannot be
//     read hand off nothing (fail closed) and the completion is retried: an
//     owner that cannot be asked is never assumed to agree.
//   - Outputs of a dropped result are left for GC's never-committed reclaim.
//   - A release intent is requested only when the cleanup reports every
//     dependency confirmed, with a deterministic intent id.
//   - Duplicate completions are harmless on every path.
package handoff
