package gc

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/store"
)

// walk reads the incarnation's lineage from its head, or, once the head is
// gone, from the head the publisher retired for this cleanup (recorded:
// guard.RetireFirst). ok is false when there is no lineage left to walk:
// the head is gone and none was recorded (retired out of band: the
// manifests phase finds its roots by listing), it names another
// incarnation, or its root is gone (the manifests phase deleted it).
// recorded is true when the walk started from the recorded head.
func (r *tombRun) walk(ctx context.Context) (w lineage.Walk, ok, recorded bool, err error) {
	w, err = r.e.lin.WalkFrom(ctx, r.task.Collection, 1)
	switch {
	case err == nil && w.Head.Inc() == r.p.Incarnation:
		return w, true, false, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return w, false, false, fmt.Errorf("walk the dropped lineage of %s: %w", r.task.Collection, err)
	case err == nil && w.Head.Inc() != r.p.Incarnation || !r.p.HeadDeleted || r.p.HeadKey == "":
		return w, false, false, nil
	}
	h := contract.Head{Collection: r.task.Collection, Version: r.p.HeadVersion, ManifestKey: r.p.HeadKey, ManifestChecksum: r.p.HeadChecksum, Incarnation: r.p.Incarnation}
	if h.Incarnation == 1 {
		h.Incarnation = 0
	}
	w, err = r.e.lin.WalkFromHead(ctx, h, 1)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return w, false, true, nil
	case err != nil:
		return w, false, true, fmt.Errorf("walk the retired lineage of %s from v%d: %w", r.task.Collection, h.Version, err)
	}
	return w, true, true, nil
}

// unit is one resumable step of the objects phase.
type unit struct {
	each func(ctx context.Context, fn func(contract.ObjectEntry) error) error
}

func (r *tombRun) units(m *contract.Manifest, head bool) []unit {
	var us []unit
	lin := r.e.lin
	if head {
		for i := range m.Parts {
			ref := m.Parts[i]
			us = append(us, unit{each: func(ctx context.Context, fn func(contract.ObjectEntry) error) error {
				return lin.Each(ctx, m, func(p contract.PartRef) bool { return p.Key == ref.Key }, fn)
			}})
		}
	}
	if len(m.Change.Parts) == 0 {
		if len(m.Change.Removed) > 0 {
			us = append(us, unit{each: func(ctx context.Context, fn func(contract.ObjectEntry) error) error {
				return lin.EachChange(ctx, m, contract.ChangeRemoved, fn)
			}})
		}
		return us
	}
	for _, ref := range m.Change.Parts {
		if ref.Kind != contract.ChangeRemoved {
			continue
		}
		one := *m
		one.Change = contract.Change{Parts: []contract.ChangePartRef{ref}}
		us = append(us, unit{each: func(ctx context.Context, fn func(contract.ObjectEntry) error) error {
			return lin.EachChange(ctx, &one, contract.ChangeRemoved, fn)
		}})
	}
	return us
}

// objects deletes every object the dropped lineage names (the head's,
// and every root's removals), newest root first, each put to the gate
// with its entry: lifecycle retention by its maximum timestamp holds a
// dropped collection's object as it holds a live one's. Keys of several
// units (and roots) share batches; the cursor moves past exactly the
// leading keys confirmed gone, and stops at the first key the gate holds:
// the run waits for it (errHeld), everything before it deleted.
func (r *tombRun) objects(ctx context.Context) error {
	w, ok, recorded, err := r.walk(ctx)
	if err != nil {
		return err
	}
	if !ok {
		if !recorded {
			r.pinHead() // no lineage left to walk: the later phases rest on the head read (if any)
		}
		r.p.Phase, r.p.StrayObjectsDone = PhaseOutputs, false
		return nil
	}
	if !recorded && r.e.cfg.Guards.DroppedHeadPinned && (w.Head.Version != r.rd.headVersion || w.Head.ManifestChecksum != r.rd.headChecksum) {
		return r.lineageMoved(w.Head.Version) // the gates were judged on another head
	}
	if r.p.HeadVersion != w.Head.Version || r.p.HeadChecksum != w.Head.ManifestChecksum {
		// First run, or the head moved since the cursor was set (a commit
		// after the drop): start over from the head (repeats are harmless).
		r.p.HeadVersion, r.p.HeadChecksum, r.p.CursorVersion, r.p.CursorUnit, r.p.CursorOffset = w.Head.Version, w.Head.ManifestChecksum, w.Head.Version, 0, 0
	}
	buf := &objBuffer{subj: map[string]subject{}}
	m := r.tombMoment()
	for i := range w.Roots {
		if w.Roots[i].Version > r.p.CursorVersion {
			continue
		}
		if err := r.objectsOf(ctx, &w.Roots[i], i == 0, buf, m); err != nil {
			return err
		}
	}
	if err := r.flush(ctx, buf); err != nil {
		return err
	}
	r.p.Phase, r.p.StrayObjectsDone = PhaseOutputs, false
	return nil
}

// cursorPos is a position of the objects phase's cursor.
type cursorPos struct {
	version      uint64
	unit, offset int
}

// objBuffer holds the objects phase's keys until a batch is full: each
// key's cursor position, and the position after everything buffered.
type objBuffer struct {
	keys  []string
	subj  map[string]subject
	at    []cursorPos
	after cursorPos
}

// objectsOf buffers one root's objects from the cursor on.
func (r *tombRun) objectsOf(ctx context.Context, root *contract.Manifest, head bool, buf *objBuffer, m moment) error {
	us := r.units(root, head)
	atCursor := root.Version == r.p.CursorVersion
	for j := 0; j < len(us); j++ {
		if atCursor && j < r.p.CursorUnit {
			continue
		}
		entries, err := r.unitEntries(ctx, us[j], root.Version)
		if err != nil {
			return err
		}
		skip := 0
		if atCursor && j == r.p.CursorUnit {
			skip = min(r.p.CursorOffset, len(entries))
		}
		for off := skip; off < len(entries); off++ {
			if err := r.buffer(ctx, buf, m, entries[off], cursorPos{root.Version, j, off}); err != nil {
				return err
			}
		}
		buf.after = cursorPos{root.Version, j + 1, 0}
	}
	buf.after = cursorPos{root.Version - 1, 0, 0}
	return nil
}

// buffer puts one object to the gate and buffers it, flushing a full
// batch; a held object flushes what is before it and ends the phase there.
func (r *tombRun) buffer(ctx context.Context, buf *objBuffer, m moment, o contract.ObjectEntry, at cursorPos) error {
	s := r.tombSubject(kindObject, o.Key)
	s.entry = o
	if h, ok := judge(r.e.cfg, m, s); !ok {
		if err := r.flush(ctx, buf); err != nil {
			return err
		}
		r.setCursor(at)
		r.hold(h)
		return errHeld
	}
	buf.keys, buf.at, buf.subj[o.Key] = append(buf.keys, o.Key), append(buf.at, at), s
	buf.after = cursorPos{at.version, at.unit, at.offset + 1}
	if len(buf.keys) < r.e.cfg.BatchSize {
		return nil
	}
	return r.flush(ctx, buf)
}

// flush deletes the buffered objects and moves the cursor past the
// leading ones confirmed gone.
func (r *tombRun) flush(ctx context.Context, buf *objBuffer) error {
	if len(buf.keys) == 0 {
		r.setCursor(buf.after)
		return nil
	}
	n, err := r.deleteKeys(ctx, buf.keys, buf.subj)
	r.p.ObjectsDeleted += int64(n)
	if n < len(buf.keys) {
		r.setCursor(buf.at[n])
	} else {
		r.setCursor(buf.after)
	}
	buf.keys, buf.at, buf.subj = buf.keys[:0], buf.at[:0], map[string]subject{}
	return err
}

func (r *tombRun) setCursor(p cursorPos) {
	r.p.CursorVersion, r.p.CursorUnit, r.p.CursorOffset = p.version, p.unit, p.offset
}

// unitEntries reads one unit (memory: one part); a part already deleted
// reads as empty: its objects went first.
func (r *tombRun) unitEntries(ctx context.Context, u unit, version uint64) ([]contract.ObjectEntry, error) {
	var entries []contract.ObjectEntry
	err := u.each(ctx, func(o contract.ObjectEntry) error {
		entries = append(entries, o)
		return nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the dropped lineage of %s at v%d: %w", r.task.Collection, version, err)
	}
	return entries, nil
}
