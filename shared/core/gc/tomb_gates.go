package gc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// A tombstone cleanup is a client of the gate: every key it deletes is put
// to judge under the dropped lifetime's moment (tombMoment), and every
// batch rests on a proof taken after its waits (proveTomb): the CCS facts
// still this tombstone, the head gone or still the dropped lifetime's, the
// watermark, each re-read when older than the reuse bound.

// tombReadings are what a run's proofs rest on, and when each was read.
type tombReadings struct {
	factsAt, headAt, wmAt stamp
	safe                  int64
	blocked               string
	evict                 int64 // when the lifetime's objects count as evicted (tombstoneEvict), derived from the head last read
	seen                  int64 // when the coordinator first saw the tombstone
	headCommit            int64 // the dropped head's commit time (0: no head)
	// headVersion, headChecksum are the head of the dropped lifetime last
	// read (0, "": none): every proof rests on it (guard.DroppedHeadPinned).
	headVersion  uint64
	headChecksum string
	// rootKey, rootWritten: the head's root last listed and the
	// LastModified S3 gave it (listed once per head read).
	rootKey     string
	rootWritten int64
}

// errLineageMoved ends a run whose dropped lineage moved under it (a late
// commit of the dropped incarnation): what it judged was derived from
// another head. The cursor goes back to the objects phase; the next run
// judges its gates on the new head's commit and cleans from it.
var errLineageMoved = errors.New("the dropped lineage moved during the run")

// tombMoment is the gate's moment for the dropped lifetime. Lifecycle
// retention holds a dropped collection's objects as it holds a live one's
// (guard.DroppedRetention; off: mutation proof only).
func (r *tombRun) tombMoment() moment {
	m := moment{now: r.e.now().UnixMilli(), collection: r.task.Collection, incarnation: r.p.Incarnation, tombstone: true,
		safe: r.rd.safe, blocked: r.rd.blocked, retentionMs: r.facts.Lifecycle.RetentionMs}
	if !r.e.cfg.Guards.DroppedRetention {
		m.retentionMs = 0
	}
	return m
}

// tombSubject is what the gate is asked about one key of the lifetime: it
// left the lineage when the tombstone did, and every manifest a token may
// open on the dropped lineage holds it a token lifetime from then.
func (r *tombRun) tombSubject(kind keyKind, key string) subject {
	return subject{kind: kind, key: key, evictTs: r.rd.evict, pinnedDue: pinnedUntil(r.rd.evict, r.e.cfg), entry: contract.ObjectEntry{MaxTsUnixMs: math.MinInt64}}
}

// gates puts the whole dropped lineage to the gate before any key is
// read (the gates every key shares: tokens, watermark): reason "" = the
// cleanup may start.
func (r *tombRun) gates(ctx context.Context) (reason string, dueAt int64, err error) {
	if err := r.readTombstone(ctx); err != nil {
		return "", 0, err
	}
	h, ok := judge(r.e.cfg, r.tombMoment(), r.tombSubject(kindRoot, contract.ManifestsPrefix(r.task.Collection)))
	if ok {
		return "", 0, nil
	}
	return "the dropped lineage: " + h.String(), h.DueUnixMs, nil
}

// readTombstone takes the readings a run starts from: when the tombstone
// counts from (the coordinator's first sighting recorded), the head, the
// watermark.
func (r *tombRun) readTombstone(ctx context.Context) error {
	seen, err := r.e.sighting(ctx, r.facts)
	if err != nil {
		return err
	}
	r.rd.seen = seen
	if err := r.rereadHead(ctx); err != nil && !errors.Is(err, errFactsMoved) {
		return err
	}
	r.rereadWatermark(ctx)
	if r.moved() && r.p.Phase != r.firstPhase() {
		// Resumed under a head the cursor was not cleaned from (a late
		// commit): clean again from the objects phase, where the new
		// head's objects are judged with their entries.
		r.e.log.Warn("dropped lineage moved since the cursor was set; cleaning again from the objects phase", "collection", r.task.Collection,
			"incarnation", r.p.Incarnation, "phase", r.p.Phase, "cursor_head", r.p.HeadVersion, "head", r.rd.headVersion)
		r.p.Phase = r.firstPhase()
	}
	return nil
}

// moved is true when a head of the dropped lifetime was read that is not
// the one the cursor was cleaned from (guard.DroppedHeadPinned; a head
// gone is no move: nothing can commit on it).
func (r *tombRun) moved() bool {
	return r.e.cfg.Guards.DroppedHeadPinned && r.rd.headVersion != 0 &&
		(r.rd.headVersion != r.p.HeadVersion || r.rd.headChecksum != r.p.HeadChecksum)
}

// pinHead pins the cursor to the head last read (the objects phase, which
// cleans from it).
func (r *tombRun) pinHead() {
	r.p.HeadVersion, r.p.HeadChecksum = r.rd.headVersion, r.rd.headChecksum
}

// lineageMoved sends the cursor back to the objects phase and ends the run.
func (r *tombRun) lineageMoved(read uint64) error {
	r.e.metrics.Add("TombstoneLineageMoved", 1)
	r.e.log.Warn("dropped lineage moved during the cleanup run; cleaning again from the new head", "collection", r.task.Collection,
		"incarnation", r.p.Incarnation, "phase", r.p.Phase, "cursor_head", r.p.HeadVersion, "head", read)
	r.p.Phase = r.firstPhase()
	return errLineageMoved
}

// sighting is when the coordinator first saw f's tombstone (rule 16),
// recorded now unless a sighting is recorded (the port keeps the first);
// without the port (or if it fails) it is now: later, never earlier.
func (e *Executor) sighting(ctx context.Context, f contract.CollectionFacts) (int64, error) {
	now := e.now().UnixMilli()
	if !f.Tombstoned {
		return 0, nil
	}
	if e.ports.Sightings == nil {
		return now, nil
	}
	at, err := e.ports.Sightings.RecordSighting(ctx, f.Collection, f.Inc(), f.EvictedAtUnixMs(), sightingFacts(e.cfg, f), now)
	if err != nil {
		e.log.Warn("record the first sighting of a tombstone failed; counting from now", "collection", f.Collection, "err", err)
		return now, nil
	}
	return at, nil
}

// confirmationSighting is when the coordinator first saw an operator's
// lineage confirmation (rule 16: the protection of what the abandoned
// roots reference counts from when we recorded it, not from the operator's
// clock), recorded now unless one is recorded; without the port (or if it
// fails) it is now.
func (e *Executor) confirmationSighting(ctx context.Context, c contract.LineageConfirmation) (int64, error) {
	now := e.now().UnixMilli()
	if e.ports.Sightings == nil {
		return now, nil
	}
	at, err := e.ports.Sightings.RecordConfirmationSighting(ctx, c.Collection, c.Inc(), ConfirmationID(c), now)
	if err != nil {
		e.log.Warn("record the first sighting of a lineage confirmation failed; counting from now", "collection", c.Collection, "err", err)
		return now, nil
	}
	return at, nil
}

// sightingFacts is the CCS facts version a sighting is kept under
// (guard.SightingPerFacts): a tombstone counts from the first sighting of
// the facts document that says it, so the same tombstone answered again
// after CCS said otherwise (a replayed or forged answer a day later, an
// un-drop and drop) counts from its own first sighting, never from one
// recorded before; a facts change while dropped only makes it later. 0
// (guard off: mutation proof only): one sighting per CCS tombstone time.
func sightingFacts(cfg Config, f contract.CollectionFacts) uint64 {
	if !cfg.Guards.SightingPerFacts {
		return 0
	}
	return f.FactsVersion
}

// proveTomb re-reads what the run's next batch rests on (each reading
// older than the reuse bound) and puts its keys to the gate again: the
// facts still this tombstone (errFactsMoved otherwise), the head gone or
// of the dropped lifetime, the watermark.
func (r *tombRun) proveTomb(ctx context.Context, subj map[string]subject, keys []string) ([]string, *Proof, error) {
	if !r.e.usable(r.rd.factsAt) {
		if err := r.rereadFacts(ctx); err != nil {
			return nil, nil, err
		}
	}
	if !r.e.usable(r.rd.headAt) {
		if err := r.rereadHead(ctx); err != nil {
			return nil, nil, err
		}
	}
	if !r.e.usable(r.rd.wmAt) {
		r.rereadWatermark(ctx)
	}
	if r.moved() {
		return nil, nil, r.lineageMoved(r.rd.headVersion)
	}
	m := r.tombMoment()
	var ok []string
	for _, k := range keys {
		s := subj[k]
		if r.e.cfg.Guards.DroppedHeadPinned {
			// The horizons come from the head just read (one derivation).
			s.evictTs, s.pinnedDue = r.rd.evict, pinnedUntil(r.rd.evict, r.e.cfg)
		}
		if h, admitted := judge(r.e.cfg, m, s); admitted {
			ok = append(ok, k)
		} else {
			r.hold(h)
		}
	}
	at := oldest(r.rd.factsAt.at, r.rd.headAt.at, r.rd.wmAt.at)
	return ok, r.e.newProof(r.task.Collection, r.p.Incarnation, r.p.HeadVersion, r.p.HeadChecksum, at), nil
}

func (r *tombRun) rereadFacts(ctx context.Context) error {
	at := r.e.stamp()
	f, err := r.e.ports.Facts.Facts(ctx, r.task.Collection)
	if err != nil {
		return fmt.Errorf("tombstone cleanup of %s: re-read CCS facts before deleting: %w", r.task.Collection, err)
	}
	if f.FactsVersion != r.facts.FactsVersion {
		return errFactsMoved
	}
	r.rd.factsAt = at
	return nil
}

// rereadHead: the head must be gone or name the dropped lifetime; one of
// another lifetime (the name re-created) stops the run (errFactsMoved).
func (r *tombRun) rereadHead(ctx context.Context) error {
	at := r.e.stamp()
	h, err := r.e.lin.Head(ctx, r.task.Collection)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Gone. The head the publisher retired for this cleanup (if any)
		// still dates the lineage's last commit (rule 16).
		r.rd.headAt, r.rd.headCommit, r.rd.headVersion, r.rd.headChecksum = at, 0, 0, ""
		if r.p.HeadDeleted {
			r.rd.headCommit = r.p.HeadCommittedAtUnixMs
		}
		r.derive()
		return nil
	case errors.Is(err, lineage.ErrBadHead):
		return fmt.Errorf("head of dropped %s is unreadable; deleting nothing: %w", r.task.Collection, err)
	case err != nil:
		return fmt.Errorf("tombstone cleanup of %s: re-read the head before deleting: %w", r.task.Collection, err)
	case h.Inc() != r.p.Incarnation && r.e.cfg.Guards.IncarnationFence:
		return errFactsMoved
	}
	written, err := r.rootWritten(ctx, h.ManifestKey)
	if err != nil {
		return err
	}
	r.rd.headAt, r.rd.headCommit, r.rd.headVersion, r.rd.headChecksum = at, evictedAt(h.CommittedAtUnixMs, written), h.Version, h.ManifestChecksum
	if h.Inc() != r.p.Incarnation {
		r.rd.headVersion, r.rd.headChecksum = 0, "" // not the lifetime's (guard incarnation_fence off: mutation proof only)
	}
	r.derive()
	return nil
}

// rootWritten is the LastModified S3 gave the head's root (rule 16: a
// commit is dated by the later of its commit_ts and that, so a publisher's
// slow clock cannot date it before its root exists;
// guard.TombstoneRootWritten), listed once per root key; 0 when the root
// is gone (the manifests phase deleted it) or nothing lists.
func (r *tombRun) rootWritten(ctx context.Context, key string) (int64, error) {
	if !r.e.cfg.Guards.TombstoneRootWritten || r.e.ports.Lister == nil {
		return 0, nil
	}
	if key == r.rd.rootKey {
		return r.rd.rootWritten, nil
	}
	var at int64
	err := r.e.ports.Lister.List(ctx, key, func(page []Listed) error {
		for _, l := range page {
			if l.Key == key {
				at = l.LastModified.UnixMilli()
				return ErrStopListing
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrStopListing) {
		return 0, fmt.Errorf("tombstone cleanup of %s: list the head's root %s for its write time: %w", r.task.Collection, key, err)
	}
	r.rd.rootKey, r.rd.rootWritten = key, at
	return at, nil
}

// derive works out when the lifetime's objects count as evicted from the
// readings: the tombstone, its first sighting and the head last read.
func (r *tombRun) derive() {
	r.rd.evict = tombstoneEvict(r.e.cfg, r.facts, r.rd.seen, r.rd.headCommit)
}

func (r *tombRun) rereadWatermark(ctx context.Context) {
	r.rd.wmAt = r.e.stamp()
	wm, err := r.e.ports.Watermark.Watermark(ctx)
	r.rd.safe, r.rd.blocked = wm.GlobalSafeTsUnixMs, ""
	if err != nil {
		r.rd.blocked = "watermark unreadable: " + err.Error()
	}
}

// hold records the first key the gate holds in this run (the cleanup
// waits for it).
func (r *tombRun) hold(h Hold) {
	if r.held == nil {
		r.held = &h
	}
}

// spend is nil while the run's budget allows one more call.
func (r *tombRun) spend() error {
	if r.calls() >= r.maxCalls || !r.e.now().Before(r.deadline) {
		return errBudget
	}
	return nil
}

// calls are the delete calls (and head retirements) this run made.
func (r *tombRun) calls() int { return r.retires + r.t.calls }

func oldest(ts ...time.Time) time.Time {
	o := ts[0]
	for _, t := range ts[1:] {
		if t.Before(o) {
			o = t
		}
	}
	return o
}
