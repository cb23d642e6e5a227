package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// What a delete call rests on. Every call is preceded by a proof (read
// phase) and the pure re-judgement of each key against it; deleteProven
// makes sure the proof is fresh when the call is made.

// gateProof is the last reading of what gates (b) and (c) depend on.
type gateProof struct {
	at          time.Time // zero: never read
	safe        int64
	blocked     bool
	retentionMs int64
}

// readGates re-reads the watermark and the CCS facts. Facts that cannot be
// read, or that changed the tombstone since the plan, refuse the rest of
// the sweep (a new plan is needed).
func (e *Executor) readGates(ctx context.Context, a *applyRun) error {
	c := a.pl.Collection
	g := gateProof{at: e.now()}
	wm, err := e.ports.Watermark.Watermark(ctx)
	if g.blocked = err != nil; g.blocked {
		a.rep.Blocked = "watermark unreadable at execution: " + err.Error()
	}
	g.safe = wm.GlobalSafeTsUnixMs
	facts, err := e.ports.Facts.Facts(ctx, c)
	if err != nil {
		return refuse(c, RefusedFacts, err)
	}
	if facts.Tombstoned != a.pl.Tombstoned || (a.pl.Tombstoned && facts.ReservationHorizonUnixMs != a.pl.TombstoneEvictTs) {
		a.rep.Blocked = "CCS facts changed since the plan; a new plan is needed"
		return refuse(c, RefusedFacts, errors.New(a.rep.Blocked))
	}
	g.retentionMs = facts.Lifecycle.RetentionMs
	a.gates = g
	return nil
}

// recheckGates re-judges gates (b) and (c) of every planned delete with a
// fresh watermark and fresh facts; ok is false when nothing may be deleted.
func (e *Executor) recheckGates(ctx context.Context, a *applyRun) (todo []Candidate, ok bool, err error) {
	if !e.cfg.Guards.DeleteGates {
		return a.pl.Delete, true, nil
	}
	if err := e.readGates(ctx, a); err != nil {
		return nil, false, err
	}
	now := e.now().UnixMilli()
	for _, cd := range a.pl.Delete {
		if reason, due := judgeTime(e.cfg, a.gates.blocked, cd, a.gates.safe, a.gates.retentionMs, now); reason != "" {
			a.deferAt(cd, reason, due)
			continue
		}
		todo = append(todo, cd)
	}
	return todo, !a.gates.blocked, nil
}

// proveObjects is the proof behind one delete call of candidates: the head
// re-read (roots committed since the plan are retained: a key one of them
// references is withdrawn), the gates re-read when their reading is older
// than ProofMaxAge, and each key re-judged.
func (e *Executor) proveObjects(ctx context.Context, a *applyRun, byKey map[string]Candidate, keys []string) ([]string, error) {
	if !e.cfg.Guards.DeleteGates {
		return keys, nil
	}
	if err := a.fence.refresh(ctx); err != nil {
		return nil, err
	}
	if e.now().Sub(a.gates.at) > e.cfg.ProofMaxAge {
		if err := e.readGates(ctx, a); err != nil {
			return nil, err
		}
	}
	now := e.now().UnixMilli()
	var ok []string
	for _, k := range keys {
		cd := byKey[k]
		ref, err := a.fence.referenced(ctx, k)
		if err != nil {
			return nil, lineageErr(a.pl.Collection, err)
		}
		if ref {
			a.deferAt(cd, ReasonPinned, satAdd(now, e.cfg.TokenLifetime)) // re-referenced by a commit since the plan
			continue
		}
		if reason, due := judgeTime(e.cfg, a.gates.blocked, cd, a.gates.safe, a.gates.retentionMs, now); reason != "" {
			a.deferAt(cd, reason, due)
			continue
		}
		ok = append(ok, k)
	}
	return ok, nil
}

// proveUnreferenced is the proof behind deleting never-committed outputs
// or manifest parts: the head re-read, and no root committed since the
// plan references the key.
func (e *Executor) proveUnreferenced(ctx context.Context, a *applyRun, keys []string) ([]string, error) {
	if err := a.fence.refresh(ctx); err != nil {
		return nil, err
	}
	var ok []string
	for _, k := range keys {
		ref, err := a.fence.referenced(ctx, k)
		if err != nil {
			return nil, lineageErr(a.pl.Collection, err)
		}
		if !ref {
			ok = append(ok, k)
		}
	}
	return ok, nil
}

// fence follows the head during Apply: roots committed after the plan are
// retained (a token may open them) and are checked for every key deleted.
// A head that is not the planned one or a descendant of it refuses the
// rest of the sweep: the collection was rolled back, dropped or re-created.
type fence struct {
	lin      Lineage
	c        string
	version  uint64
	checksum string
	extra    []contract.Manifest
}

func (f *fence) refresh(ctx context.Context) error {
	h, err := f.lin.Head(ctx, f.c)
	if err != nil {
		return lineageErr(f.c, err)
	}
	if h.Version == f.version && h.ManifestChecksum == f.checksum {
		return nil
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
	f.version, f.checksum = w.Head.Version, w.Head.ManifestChecksum
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
