package gc

import (
	"context"
	"errors"
	"fmt"
)

// The sweep record under a moving head (guard.SweepRecordMoved). A sweep
// judges the lineage of one head H and leaves a record of what it did:
// the debt it could not clear yet (deferred, with its due time) and the
// lifecycle retention window. A collection that commits during every
// sweep has, when the record is written, an observed state at a newer
// head V whose debt is H's plus what the commits after H removed. The
// record must then clear what the sweep did without erasing that newer
// debt: it is carried forward to V by reading the roots committed after H
// up to V (durable truth: each root names what its commit removed, with
// counts), adding their removals to what the sweep left, due at their
// commit + token lifetime + retention window as the observer dates debt.
//
// The carried record is not tied to V standing still: it carries the
// state's running totals of the debt its advances added, read with V (the
// refused first write returns them), and lands while the state holds V or
// any later head, keeping what the advances after V added by difference
// (observed totals minus the totals at V). A writer that commits between
// every attempt therefore cannot keep it out: it lands at the second
// write. An advance that raced it (added debt between the read and the
// write) may have had its due time overwritten: the roots after V up to
// the head the write met are read once more and the due lowered to
// theirs. The work per sweep is bounded (two writes, two walks of the
// roots committed during the sweep, one lowering); only a state that went
// back (the observer reverted an advance whose tasks it could not send)
// leaves the record unwritten, and the next sweep writes its own.
//
// Without this the record applied only while the observed version
// equalled H (or, carried forward, V): a steadily written collection kept
// its debt and its oldest due time for good (a sweep every
// reconciliation, the oldest-due alarm firing forever, no retention
// window recorded).

// maxRecordAttempts bounds the writes of one record: the swept head's,
// the carried one's, and one more for a state that went back meanwhile.
const maxRecordAttempts = 3

// recordSweep writes the sweep record sw, carried forward to the head the
// observed state holds when it moved past the swept head. A state behind
// the swept head (the observer has not recorded it yet) is left alone:
// its next advance adds that head's debt and the next reconciliation
// sweeps (the record is disposable). It is best effort: what it cannot
// write is swept again, never lost.
func (e *Executor) recordSweep(ctx context.Context, sw SweepRecord) error {
	for range maxRecordAttempts {
		err := e.ports.Sweeps.RecordGCSweep(ctx, sw)
		var raced *SweepRecordRacedError
		if errors.As(err, &raced) {
			return e.lowerRacedDue(ctx, sw, raced)
		}
		var moved *SweptHeadMovedError
		if !errors.As(err, &moved) {
			return err
		}
		if !e.cfg.Guards.SweepRecordMoved || moved.Version <= sw.HeadVersion {
			e.metrics.Add("SweepRecordsNotApplied", 1)
			e.log.Info("gc sweep record not applied: the observed state holds another head", "collection", sw.Collection,
				"swept_version", sw.HeadVersion, "observed_version", moved.Version)
			return nil
		}
		next, ok, err := e.carryForward(ctx, sw, moved.Version, moved.Checksum)
		if err != nil || !ok {
			e.metrics.Add("SweepRecordsNotApplied", 1)
			return err
		}
		next.Added = &moved.Added
		sw = next
		e.metrics.Add("SweepRecordsCarriedForward", 1)
	}
	e.metrics.Add("SweepRecordsNotApplied", 1)
	return nil
}

// lowerRacedDue lowers the recorded due time to the earliest due of the
// debt that advances added while the carried record sw was written (the
// roots after its head up to the head the write met, r). A lineage that
// does not lead there (or names no removal) makes the debt due now: the
// next reconciliation sweeps and records it exactly. Best effort: a
// failure leaves the later due (the debt is swept late, never lost).
func (e *Executor) lowerRacedDue(ctx context.Context, sw SweepRecord, r *SweepRecordRacedError) error {
	due := e.now().UnixMilli()
	if r.Version > sw.HeadVersion {
		base := SweepRecord{Collection: sw.Collection, Incarnation: sw.Incarnation, HeadVersion: sw.HeadVersion, HeadChecksum: sw.HeadChecksum}
		if next, ok, err := e.carryForward(ctx, base, r.Version, r.Checksum); err == nil && ok && next.NextDueUnixMs > 0 {
			due = next.NextDueUnixMs
		}
	}
	if err := e.ports.Sweeps.LowerGCDue(ctx, sw.Collection, sw.Incarnation, due); err != nil {
		e.log.Warn("lower the gc due time after a raced sweep record failed (the debt is swept late, never lost)", "collection", sw.Collection, "err", err)
	}
	e.log.Info("gc sweep record landed while the observer recorded newer heads", "collection", sw.Collection,
		"record_version", sw.HeadVersion, "observed_version", r.Version, "due", due)
	return nil
}

// carryForward is sw carried forward from its head H to the observed head
// v (checksum sum, empty: any): what the sweep left plus the removals of
// every root committed after H up to v, read from the current lineage. ok
// is false when that lineage does not lead from H to v (a regression, a
// re-created name, a trimmed root): nothing is recorded then.
func (e *Executor) carryForward(ctx context.Context, sw SweepRecord, v uint64, sum string) (SweepRecord, bool, error) {
	w, err := e.lin.WalkFrom(ctx, sw.Collection, sw.HeadVersion)
	if err != nil {
		return sw, false, fmt.Errorf("carry the gc sweep record of %s forward to v%d: %w", sw.Collection, v, err)
	}
	if w.Head.Inc() != sw.Inc() {
		return sw, false, nil
	}
	dueAfter := (e.cfg.TokenLifetime + e.cfg.RetentionWindow).Milliseconds()
	next := sw
	reachedV, reachedH := false, false
	checksum := w.Head.ManifestChecksum // of w.Roots[i]
	for i := range w.Roots {
		m := &w.Roots[i]
		switch {
		case m.Version > v:
		case m.Version == v:
			reachedV = sum == "" || checksum == sum
			fallthrough
		case m.Version > sw.HeadVersion:
			if m.Change.RemovedObjects > 0 {
				next.RemainingObjects += m.Change.RemovedObjects
				next.RemainingBytes += m.Change.RemovedBytes
				next.NextDueUnixMs = earliest(next.NextDueUnixMs, m.CommitTsUnixMs+dueAfter)
			}
		case m.Version == sw.HeadVersion:
			reachedH = sw.HeadChecksum == "" || checksum == sw.HeadChecksum
		}
		checksum = m.ParentChecksum
	}
	if !reachedV || !reachedH {
		return sw, false, nil
	}
	next.HeadVersion, next.HeadChecksum = v, sum
	return next, true, nil
}

// Inc is the record's incarnation (absent: 1).
func (sw SweepRecord) Inc() uint64 {
	if sw.Incarnation == 0 {
		return 1
	}
	return sw.Incarnation
}

// verifiedLineage clears the head the observer advanced from over a gap
// once the lineage this sweep walked holds it (observe/descent.go): the
// gap is verified. Best effort: a failure only repeats the check.
func (e *Executor) verifiedLineage(ctx context.Context, pl Plan) {
	um, ok := e.ports.Sweeps.(UnverifiedMemory)
	if !ok {
		return
	}
	if err := um.ClearUnverified(ctx, pl.Collection, pl.Incarnation, pl.UnverifiedFromVersion, pl.UnverifiedFromChecksum); err != nil {
		e.log.Warn("clear the verified gap of the observed lineage failed (checked again at the next sweep)", "collection", pl.Collection, "err", err)
		return
	}
	e.metrics.Add("ObservedGapsVerified", 1)
}
