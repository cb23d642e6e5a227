package gc

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// head has the head pointer, the one key every lifetime of the name
// shares, retired by its owner: the Manifest Publisher (the coordinator
// never writes or deletes a head). With guard.RetireFirst this is the
// cleanup's first phase: the publisher asks CCS itself whether the head's
// incarnation is dropped (guard.RetireTombstoned), so a tombstone answer
// spoofed on GC's own path to CCS gets no further than a refusal, before
// any delete; the cleanup records the head retired and walks the lineage
// from it. The head is re-read every time; only a
// head naming the dropped incarnation is asked for (guard.IncarnationFence),
// and the request names exactly the head read (incarnation, version,
// manifest checksum), so the publisher's conditional delete on the head's
// ETag fails if anything was written in between (a re-created name's first
// head): the window between this read and the removal is closed by the
// owner, at the moment of effect. A head of another incarnation is a new
// lifetime's and is never asked for.
func (r *tombRun) head(ctx context.Context) error {
	if err := r.spend(); err != nil {
		return err
	}
	c := r.task.Collection
	if r.e.beforeHeadDelete != nil {
		r.e.beforeHeadDelete()
	}
	h, err := r.e.lin.Head(ctx, c)
	switch {
	case errors.Is(err, store.ErrNotFound):
		r.p.Phase = r.afterHead()
		return nil
	case err != nil && !errors.Is(err, lineage.ErrBadHead):
		return fmt.Errorf("re-read head of %s before its retirement: %w", c, err)
	case err != nil:
		return fmt.Errorf("head of dropped %s is unreadable; not asking for its retirement: %w", c, err)
	}
	if r.e.beforeHeadRetire != nil {
		r.e.beforeHeadRetire()
	}
	if r.e.cfg.Guards.IncarnationFence && h.Inc() != r.p.Incarnation {
		r.otherIncarnation(h.Inc())
		return nil
	}
	pinned := r.p.HeadVersion
	sum := r.p.HeadChecksum
	if r.e.cfg.Guards.RetireFirst {
		pinned, sum = r.rd.headVersion, r.rd.headChecksum // the head the gates were judged on
	}
	if r.e.cfg.Guards.DroppedHeadPinned && h.Inc() == r.p.Incarnation && (h.Version != pinned || h.ManifestChecksum != sum) {
		return r.lineageMoved(h.Version) // a late commit: its objects are not cleaned yet
	}
	if !r.e.usable(r.rd.factsAt) {
		if err := r.rereadFacts(ctx); err != nil {
			return err
		}
	}
	if r.e.ports.Heads == nil {
		return fmt.Errorf("tombstone cleanup of %s: no publisher configured to retire its head", c)
	}
	return r.retire(ctx, h)
}

// retire asks the publisher to retire exactly the head read, and reads its
// answer: accepted (gone), a conflict (another lifetime's head: not ours;
// the dropped lineage moved: clean again from its new head), or a refusal.
func (r *tombRun) retire(ctx context.Context, h contract.Head) error {
	c := r.task.Collection
	ans, err := r.e.ports.Heads.Retire(ctx, contract.NewRetireRequest(h))
	r.retires++
	if err != nil {
		// Outcome unknown (rule 6): the next run re-reads the head and
		// sends the same request again (same id; the publisher answers
		// from the head).
		return fmt.Errorf("retire head of dropped %s incarnation %d v%d: %w", c, r.p.Incarnation, h.Version, err)
	}
	switch ans.Status {
	case contract.RetireAccepted:
		r.e.metrics.Add("TombstoneHeadsRetired", 1)
		r.p.HeadDeleted = true
		if r.e.cfg.Guards.RetireFirst {
			// The lineage is cleaned from exactly this head from now on.
			r.p.HeadVersion, r.p.HeadChecksum, r.p.HeadKey, r.p.HeadCommittedAtUnixMs = h.Version, h.ManifestChecksum, h.ManifestKey, r.rd.headCommit
			r.p.CursorVersion, r.p.CursorUnit, r.p.CursorOffset = h.Version, 0, 0
		}
		r.p.Phase = r.afterHead()
		return nil
	case contract.RetireConflict:
		if contract.Lifetime(ans.HeadIncarnation) != r.p.Incarnation {
			r.otherIncarnation(contract.Lifetime(ans.HeadIncarnation))
			return nil
		}
		// The dropped lineage itself moved (a late commit of the dropped
		// incarnation): clean from the new head again.
		r.e.log.Warn("dropped lineage moved before its head was retired; cleaning from the new head", "collection", c,
			"incarnation", r.p.Incarnation, "read_version", h.Version, "head_version", ans.HeadVersion)
		r.p.Phase, r.p.HeadVersion, r.p.HeadChecksum = r.firstPhase(), 0, ""
		return errBudget
	default:
		return fmt.Errorf("publisher refused to retire the head of dropped %s incarnation %d v%d (%s): %s: %w",
			c, r.p.Incarnation, h.Version, ans.Status, ans.Reason, ErrUnconfirmed)
	}
}

// otherIncarnation ends the head phase at a head of another lifetime: it is
// not this cleanup's to retire, and this incarnation's head is gone.
func (r *tombRun) otherIncarnation(inc uint64) {
	r.e.metrics.Add("TombstoneHeadOfOtherIncarnation", 1)
	r.e.log.Warn("head names another incarnation; not retiring it", "collection", r.task.Collection, "head_incarnation", inc, "incarnation", r.p.Incarnation)
	r.p.Phase = r.afterHead()
}

// afterHead is the phase after the head's: the deletes (guard.RetireFirst),
// else the wait for the release.
func (r *tombRun) afterHead() string {
	if r.e.cfg.Guards.RetireFirst {
		return PhaseObjects
	}
	return PhaseWaiting
}
