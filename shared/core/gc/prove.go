package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// What a sweep's delete batches rest on. Every batch is proven after its
// waits (gate_send.go): the head re-read (fence), the watermark and the
// CCS facts re-read (readings), and every key put to the gate again.

// readings is the last reading of what gates (b) and (c) depend on.
type readings struct {
	at          stamp // zero: never read
	safe        int64
	blocked     bool
	retentionMs int64
}

// readGates re-reads the watermark and the CCS facts. Facts that cannot be
// read, or that changed the tombstone since the plan, refuse the rest of
// the sweep (a new plan is needed).
func (e *Executor) readGates(ctx context.Context, a *applyRun) error {
	c := a.pl.Collection
	g := readings{at: e.stamp()}
	wm, err := e.ports.Watermark.Watermark(ctx)
	if g.blocked = err != nil; g.blocked {
		a.rep.Blocked = "watermark unreadable at execution: " + err.Error()
	}
	g.safe = wm.GlobalSafeTsUnixMs
	facts, err := e.ports.Facts.Facts(ctx, c)
	if err != nil {
		return refuse(c, RefusedFacts, err)
	}
	if facts.Tombstoned != a.pl.Tombstoned || (a.pl.Tombstoned && facts.EvictedAtUnixMs() != a.pl.facts.EvictedAtUnixMs()) || facts.Inc() != a.pl.facts.Inc() {
		a.rep.Blocked = "CCS facts changed since the plan; a new plan is needed"
		return refuse(c, RefusedFacts, errors.New(a.rep.Blocked))
	}
	g.retentionMs = facts.Lifecycle.RetentionMs
	a.gates = g
	return nil
}

// moment is the gate's moment under the last readings.
func (a *applyRun) moment(now time.Time) moment {
	m := moment{now: now.UnixMilli(), collection: a.pl.Collection, incarnation: a.pl.Incarnation, safe: a.gates.safe, retentionMs: a.gates.retentionMs}
	if a.gates.blocked {
		m.blocked = a.rep.Blocked
	}
	return m
}

// candidate is the gate's subject for a planned delete.
func (cd Candidate) subject() subject {
	return subject{kind: kindObject, key: cd.Entry.Key, entry: cd.Entry, evictTs: cd.EvictTsUnixMs, pinnedDue: -1}
}

// recheckGates puts every planned delete to the gate again with a fresh
// watermark and fresh facts; ok is false when nothing may be deleted.
func (e *Executor) recheckGates(ctx context.Context, a *applyRun) (todo []Candidate, ok bool, err error) {
	if !e.cfg.Guards.DeleteGates {
		return a.pl.Delete, true, nil
	}
	if err := e.readGates(ctx, a); err != nil {
		return nil, false, err
	}
	m := a.moment(e.now())
	for _, cd := range a.pl.Delete {
		if h, ok := judge(e.cfg, m, cd.subject()); !ok {
			a.deferAt(cd, h.Reason, h.DueUnixMs)
			continue
		}
		todo = append(todo, cd)
	}
	return todo, !a.gates.blocked, nil
}

// proveObjects is the proof behind one batch of candidates: the head
// re-read (roots committed since the plan are retained: a key one of them
// references is withdrawn), the gates re-read when their reading is older
// than the reuse bound, each key put to the gate again.
func (e *Executor) proveObjects(ctx context.Context, a *applyRun, byKey map[string]Candidate, keys []string) ([]string, *Proof, error) {
	if !e.cfg.Guards.DeleteGates {
		return keys, a.proof(e, e.now()), nil // mutation proof only: nothing re-read, nothing re-judged
	}
	if err := a.fence.refresh(ctx, e); err != nil {
		return nil, nil, err
	}
	if e.cfg.Guards.DeleteGates && !e.usable(a.gates.at) {
		if err := e.readGates(ctx, a); err != nil {
			return nil, nil, err
		}
	}
	m := a.moment(e.now())
	var ok []string
	for _, k := range keys {
		cd := byKey[k]
		s := cd.subject()
		ref, err := a.fence.referenced(ctx, k)
		if err != nil {
			return nil, nil, lineageErr(a.pl.Collection, err)
		}
		s.referenced = ref && e.cfg.Guards.DeleteGates
		if h, admitted := judge(e.cfg, m, s); !admitted {
			a.deferAt(cd, h.Reason, h.DueUnixMs)
			continue
		}
		ok = append(ok, k)
	}
	return ok, a.proof(e, a.gates.at.at), nil
}

// proveOutputs is the proof behind one batch of never-committed outputs:
// the head re-read, the watermark re-read when its reading is older than
// the reuse bound (unreadable: nothing goes), each key put to the gate
// again (no root committed since the plan names it, still past the grace).
func (e *Executor) proveOutputs(ctx context.Context, a *applyRun, written map[string]int64, keys []string) ([]string, *Proof, error) {
	if err := a.fence.refresh(ctx, e); err != nil {
		return nil, nil, err
	}
	if e.cfg.Guards.DeleteGates && !e.usable(a.gates.at) {
		if err := e.readGates(ctx, a); err != nil {
			return nil, nil, err
		}
	}
	m := a.moment(e.now())
	var ok []string
	for _, k := range keys {
		ref, err := a.fence.referenced(ctx, k)
		if err != nil {
			return nil, nil, lineageErr(a.pl.Collection, err)
		}
		_, owned := contract.OwnedOutputTask(a.pl.Collection, k)
		if _, admitted := judge(e.cfg, m, subject{kind: kindOutput, key: k, owned: owned, referenced: ref, writtenAt: written[k]}); admitted {
			ok = append(ok, k)
		}
	}
	return ok, a.proof(e, a.gates.at.at), nil
}

// proveManifests is the proof behind one batch of a trim's parts or
// roots: the head re-read (a root committed since the plan may reuse a
// part), the watermark re-read when its reading is older than the reuse
// bound (unreadable: nothing goes), each key put to the gate again with
// the objects it waits for that are not confirmed gone (needs: the gate
// holds it until there are none).
func (e *Executor) proveManifests(ctx context.Context, a *applyRun, kinds map[string]keyKind, keys []string, needs func(key string) int) ([]string, *Proof, error) {
	if err := a.fence.refresh(ctx, e); err != nil {
		return nil, nil, err
	}
	if e.cfg.Guards.DeleteGates && !e.usable(a.gates.at) {
		if err := e.readGates(ctx, a); err != nil {
			return nil, nil, err
		}
	}
	m := a.moment(e.now())
	var ok []string
	for _, k := range keys {
		if _, admitted := judge(e.cfg, m, subject{kind: kinds[k], key: k, referenced: a.fence.partReferenced(k), pinnedDue: -1, needs: needs(k)}); admitted {
			ok = append(ok, k)
		}
	}
	return ok, a.proof(e, a.gates.at.at), nil
}

// proof is the proof of a batch judged on the fence's head and, when gates
// is set, on readings taken at gates too.
func (a *applyRun) proof(e *Executor, gates time.Time) *Proof {
	at := a.fence.at.at
	if !gates.IsZero() && gates.Before(at) {
		at = gates
	}
	return e.newProof(a.pl.Collection, a.pl.Incarnation, a.fence.version, a.fence.checksum, at)
}

// fence follows the head during Apply: roots committed after the plan are
// retained (a token may open them) and are checked for every key deleted.
// A head that is not the planned one or a descendant of it refuses the
// rest of the sweep: the collection was rolled back, dropped or re-created.
// The head is re-read for a proof unless the last read is younger than the
// reuse bound (at is when it was read).
type fence struct {
	lin      Lineage
	c        string
	version  uint64
	checksum string
	extra    []contract.Manifest
	at       stamp
	// pinned: the plan is a dropped lifetime's, whose candidates include
	// what its head references, evicted when the tombstone was; a commit
	// since supersedes that head now, and every horizon derived from it
	// is void: any move refuses the rest of the sweep
	// (guard.DroppedHeadPinned).
	pinned bool
}

func (f *fence) refresh(ctx context.Context, e *Executor) error {
	if e.usable(f.at) {
		return nil
	}
	at := e.stamp()
	h, err := f.lin.Head(ctx, f.c)
	if err != nil {
		return lineageErr(f.c, err)
	}
	if h.Version == f.version && h.ManifestChecksum == f.checksum {
		f.at = at
		return nil
	}
	if f.pinned {
		return refuse(f.c, RefusedLineage, fmt.Errorf("the dropped lineage moved since the plan: head is v%d %s, the plan saw v%d %s; a new plan is needed",
			h.Version, h.ManifestChecksum, f.version, f.checksum))
	}
	if h.Version <= f.version {
		return refuse(f.c, RefusedLineage, fmt.Errorf("head is v%d %s, the plan saw v%d %s", h.Version, h.ManifestChecksum, f.version, f.checksum))
	}
	w, err := f.lin.WalkFrom(ctx, f.c, f.version+1)
	if err != nil {
		return lineageErr(f.c, err)
	}
	last := w.Roots[len(w.Roots)-1]
	if last.ParentVersion != f.version || last.ParentChecksum != f.checksum {
		return refuse(f.c, RefusedLineage, fmt.Errorf("v%d does not descend from the planned head v%d", last.Version, f.version))
	}
	f.extra = append(w.Roots, f.extra...)
	f.version, f.checksum, f.at = w.Head.Version, w.Head.ManifestChecksum, at
	return nil
}

func (f *fence) referenced(ctx context.Context, key string) (bool, error) {
	for i := range f.extra {
		_, found, err := f.lin.Lookup(ctx, &f.extra[i], key)
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

func (f *fence) partReferenced(key string) bool {
	for i := range f.extra {
		for _, p := range f.extra[i].Parts {
			if p.Key == key {
				return true
			}
		}
	}
	return false
}
