package handoff

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Conflict-checked cutovers (issue 26; SYSTEM rule 2 as revised). With a
// publisher that has the conflict-check capability (Config.ConflictChecked,
// policy publisher_conflict_check), a result whose base the head moved past
// is not dropped here: the coordinator never rebases, so the request stays
// pinned to its base and names its exact coverage, and asks the publisher
// to judge it (conflict_check v1). Only the owner, at its head CAS, may
// apply it on a newer head, when its check proves it conflict-free there
// (events/PUBLISHER.md). The handoff still checks what it can know alone:
// the head is of the result's lifetime, and the coverage applies to the
// base it names.

// lifetime is the lifetime a rewrite completion's task ran in (completions
// reported before rewrites carried it: the task identity's).
func lifetime(c contract.Completion) uint64 {
	if c.Incarnation != 0 {
		return c.Inc()
	}
	return contract.TaskIncarnation(c.Collection, c.TaskID)
}

// judgeMoved decides a result whose base the head moved past when the
// publisher checks conflicts: stale when the head is another lifetime's
// or the base manifest cannot be reopened, rejected_coverage when the
// coverage does not apply to the base, otherwise submit (empty Outcome).
func (h *Handoff) judgeMoved(ctx context.Context, c contract.Completion, head contract.Head, res Result) (Result, error) {
	inc := lifetime(c)
	if head.Inc() != inc {
		res.Outcome, res.Reason = OutcomeStale, fmt.Sprintf("head is incarnation %d v%d, the result's base is incarnation %d v%d", head.Inc(), head.Version, inc, c.BaseManifestVersion)
		return res, nil
	}
	key := contract.ManifestKey(c.Collection, inc, c.BaseManifestVersion, c.BaseManifestChecksum)
	base, err := h.lin.Root(ctx, key, c.BaseManifestChecksum)
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, contract.ErrChecksumMismatch):
		res.Outcome, res.Reason = OutcomeStale, fmt.Sprintf("head is v%d and the base v%d cannot be reopened: %v", head.Version, c.BaseManifestVersion, err)
		return res, nil
	case err != nil:
		return res, fmt.Errorf("reopen the base v%d of %s: %w", c.BaseManifestVersion, c.TaskID, err)
	}
	reason, err := h.coverageMismatch(ctx, &base, c.Coverage)
	if err != nil {
		return res, fmt.Errorf("check coverage of %s against v%d: %w", c.TaskID, base.Version, err)
	}
	if reason != "" {
		res.Outcome, res.Reason = OutcomeRejectedCoverage, reason
	}
	return res, nil
}

// conflictChecked fills in what a request tells a conflict-checking
// publisher: the base's lifetime and, with the capability declared, the
// check it asks for.
func (h *Handoff) conflictChecked(req *contract.CutoverRequest, c contract.Completion) {
	if inc := lifetime(c); inc > 1 {
		req.Incarnation = inc
	}
	if h.cfg.ConflictChecked {
		req.ConflictCheck = contract.ConflictCheckV1
	}
}

// checkProven says whether a result whose base the head moved past may be
// handed to the publisher's conflict check: only once the publisher proved
// it runs the check (guard conflict_check_proven). A declaration in the
// policy is not a proof: a publisher without the check that accepts a
// moved head would apply the stale result (rules 2, 7).
func (h *Handoff) checkProven() bool {
	return !h.cfg.Guards.ConflictCheckProven || h.proven.Load()
}

// probeRequestID is the request id of the probe of the cutover reqID.
func probeRequestID(reqID string) string { return reqID + "-probe" }

// probe asks the publisher to prove its conflict check, for a handoff that
// holds a result whose base the head moved past and has no proof yet (a
// cold instance: the proof is learned per instance, and on a hot
// collection every result's base has moved by the handoff's look, so no
// submission would ever prove it). The probe is the result's own request
// under another id, asking for the check, with a not_after long past (1 ms
// after the epoch, on any publisher clock): every publisher on the
// contract refuses it as expired, checked or not, moved head or not, and
// one with the capability echoes conflict_check v1 on that answer too.
// The echo proves the check (checkProven); anything else (no echo, an
// error, an unknown outcome) leaves the result judged as without it. A
// probe the publisher applied anyway broke the contract twice (an expired
// request applied; a moved head rebased): the change is in the head, so
// the result is taken as accepted (applied: true; never submitted again,
// its outputs never reclaimed as never-committed), counted and alarmed as
// an unchecked rebase when it was not echoed, and the proof is forgotten.
func (h *Handoff) probe(ctx context.Context, c contract.Completion, req contract.CutoverRequest, res Result) (Result, bool) {
	p := req
	p.RequestID, p.NotAfterUnixMs, p.ConflictCheck = probeRequestID(req.RequestID), 1, contract.ConflictCheckV1
	ans, err := h.pub.Cutover(ctx, p)
	if err != nil {
		h.log.Warn("conflict-check probe unanswered; the result is judged as without the check", "task", c.TaskID, "collection", c.Collection, "err", err)
		return res, false
	}
	// The answer counts as any answer to a request that asked for the
	// check: an echo proves it, a conflict without one is a declared
	// capability missing, an acceptance is judged for how it was applied.
	// A refusal by a clause is the probe's, not the result's: the result,
	// submitted next, is counted by its own answer (CutoversRefusedByCheck
	// once per result).
	switch {
	case ans.Status == contract.CutoverAccepted:
		// Applied past its not_after, echoed or not: never a checked
		// rebase (CutoversRebased) but the contract violation GC's
		// never-committed reclaim cannot survive (rule 4), alarmed as the
		// unchecked application it is.
		h.metrics.Add("PublisherUncheckedRebase", 1)
	case ans.Status != contract.CutoverConflict || ans.ConflictClause == "":
		h.checkedAnswer(ctx, c, p, ans)
	case ans.ConflictCheck == contract.ConflictCheckV1 && !h.proven.Swap(true):
		h.log.Info("the publisher proved its conflict check (conflict_check v1 echoed on the probe)", "task", c.TaskID, "collection", c.Collection)
	}
	if ans.Status == contract.CutoverAccepted {
		h.log.Error("contract violation: the publisher applied a conflict-check probe past its not_after",
			"task", c.TaskID, "collection", c.Collection, "request", p.RequestID, "version", ans.CommittedVersion, "conflict_check", ans.ConflictCheck)
		h.proven.Store(false)
		// Finished (counted, logged) once, by rewrite, as judge's verdict.
		res.RequestID, res.Outcome, res.Version = p.RequestID, OutcomeAccepted, ans.CommittedVersion
		return res, true
	}
	return res, false
}

// checkedAnswer learns and counts what the publisher's conflict check
// decided. An answer that echoes conflict_check v1 proves the capability
// (checkProven). An acceptance on a newer head (appliedOn) with the echo is
// CutoversRebased; without it the publisher applied a moved-base request
// it never checked: a contract violation (PublisherUncheckedRebase, an
// alarm), never counted as a rebase, and the capability is forgotten. A
// refusal by a clause counts CutoversRefusedByCheck|Clause; a conflict
// without the echo for a request that asked for the check counts
// PublisherConflictCheckMissing (the capability is declared in the policy
// but missing; the result is rebuilt as stale, as without the capability).
func (h *Handoff) checkedAnswer(ctx context.Context, c contract.Completion, req contract.CutoverRequest, ans contract.CutoverAnswer) {
	guarded := h.cfg.Guards.ConflictCheckProven
	if req.ConflictCheck == contract.ConflictCheckV1 && ans.ConflictCheck == contract.ConflictCheckV1 && !h.proven.Swap(true) {
		h.log.Info("the publisher proved its conflict check (conflict_check v1 echoed)", "task", c.TaskID, "collection", c.Collection)
	}
	on, rebased := h.appliedOn(ctx, c, req, ans)
	switch {
	case guarded && rebased && ans.ConflictCheck != contract.ConflictCheckV1:
		h.proven.Store(false)
		h.metrics.Add("PublisherUncheckedRebase", 1)
		h.log.Error("contract violation: the publisher applied a cutover on a head that moved past its base without running the conflict check; a rewrite it never checked may have changed what reads",
			"task", c.TaskID, "collection", c.Collection, "base", req.BaseVersion, "applied_on", on, "version", ans.CommittedVersion,
			"applied_on_version_sent", ans.AppliedOnVersion != 0, "conflict_check_asked", req.ConflictCheck, "runbook", "docs/operations.md#publisheruncheckedrebase")
	case rebased:
		h.metrics.AddDim("CutoversRebased", "Kind", string(c.Kind), 1)
		h.log.Info("cutover applied on a newer head by the publisher's conflict check", "task", c.TaskID, "collection", c.Collection,
			"base", req.BaseVersion, "applied_on", on, "version", ans.CommittedVersion)
	case ans.Status == contract.CutoverConflict && ans.ConflictClause != "":
		h.metrics.AddDim("CutoversRefusedByCheck", "Clause", ans.ConflictClause, 1)
	case ans.Status == contract.CutoverConflict && req.ConflictCheck != "" && ans.ConflictCheck == "":
		h.proven.Store(false)
		h.metrics.Add("PublisherConflictCheckMissing", 1)
		h.log.Warn("the publisher answered conflict without running the conflict check it was asked for; set publisher_conflict_check false for a publisher without the capability",
			"task", c.TaskID, "collection", c.Collection, "reason", ans.Reason)
	}
}

// appliedOn says what an accepted request was applied on (on) and whether
// that was not its base (rebased). A publisher on the contract before
// issue 26 sends no applied_on_version; then the answer and the committed
// root show it: a committed version above base + 1, or a committed root
// whose parent is not the base (version and checksum), was applied on a
// moved head (a lenient publisher's rebase, which without the echo is a
// contract violation). A root that cannot be read leaves it unknown: taken
// as applied on the base, and logged.
func (h *Handoff) appliedOn(ctx context.Context, c contract.Completion, req contract.CutoverRequest, ans contract.CutoverAnswer) (on uint64, rebased bool) {
	switch {
	case ans.Status != contract.CutoverAccepted:
		return 0, false
	case ans.AppliedOnVersion != 0:
		// Below the base too: a head restored below it (no publisher keeping
		// the contract applies there; the incarnation clause refuses it).
		return ans.AppliedOnVersion, ans.AppliedOnVersion != req.BaseVersion
	case ans.CommittedVersion > req.BaseVersion+1:
		return ans.CommittedVersion - 1, true
	case ans.CommittedVersion == 0 || ans.CommittedChecksum == "":
		h.log.Warn("an acceptance names no committed version and checksum and no applied_on_version: what it was applied on is unknown",
			"task", c.TaskID, "collection", c.Collection, "base", req.BaseVersion, "version", ans.CommittedVersion)
		return req.BaseVersion, false
	}
	key := contract.ManifestKey(c.Collection, lifetime(c), ans.CommittedVersion, ans.CommittedChecksum)
	root, err := h.lin.Root(ctx, key, ans.CommittedChecksum)
	if err != nil {
		h.log.Warn("cannot read the committed root of an acceptance without applied_on_version: what it was applied on is unknown",
			"task", c.TaskID, "collection", c.Collection, "base", req.BaseVersion, "version", ans.CommittedVersion, "err", err)
		return req.BaseVersion, false
	}
	return root.ParentVersion, root.ParentVersion != req.BaseVersion || root.ParentChecksum != req.BaseChecksum
}
