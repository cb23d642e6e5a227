package gc

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// lookupFailed wraps a lineage read failure met while a listing pages, so
// that it is not mistaken for a failed listing.
type lookupFailed struct{ err error }

func (e lookupFailed) Error() string { return e.err.Error() }
func (e lookupFailed) Unwrap() error { return e.err }

// scanData checks what a listing of the data prefix proposes, one page at
// a time (memory: a page). A listing only proposes: an eligible candidate
// it does not show is already gone (so the plan shows what is really
// outstanding, and a delete is not sent again); a key no walked manifest
// knows is a never-committed output only if its key is the coordinator's
// own (contract.OwnedOutputTask) and it is older than the reclaim grace;
// any other such key is another writer's and is only counted. Without a
// complete listing every candidate is taken to exist and nothing is
// proposed.
func (pl planner) scanData(ctx context.Context, v *view, fr *frame, p *Plan) error {
	lister := pl.lister(v)
	if lister == nil {
		return nil
	}
	exists := make(map[string]bool, len(p.Delete))
	for _, cd := range p.Delete {
		exists[cd.Entry.Key] = false
	}
	grace := orphanGrace(pl.cfg).Milliseconds()
	knowing := fr.knowing(v.walk.Roots)
	ab := abandonedIndex{pl: pl, v: v, fr: fr}
	err := lister.List(ctx, contract.DataPrefix(v.c), func(page []Listed) error {
		for _, l := range page {
			if !contract.IsDataKey(v.c, l.Key) {
				continue
			}
			if _, ok := exists[l.Key]; ok {
				exists[l.Key] = true
				continue
			}
			known, cd, err := pl.place(ctx, knowing, v, fr, &ab, l)
			if err != nil {
				return lookupFailed{err}
			}
			if cd != nil {
				exists[l.Key] = p.considerAbandoned(pl.cfg, fr.moment, *cd)
				continue
			}
			lm := l.LastModified.UnixMilli()
			p.recordProposal(propose(pl.cfg, fr.moment, l.Key, known, lm), l.Key, lm, grace)
		}
		return nil
	})
	var lf lookupFailed
	switch {
	case errors.As(err, &lf):
		return lf.err
	case err != nil:
		p.ListingError = err.Error()
		p.Orphans, p.OrphansYoung, p.OrphanDueUnixMs = []Orphan{}, 0, 0
		return nil
	}
	p.Delete = slices.DeleteFunc(p.Delete, func(cd Candidate) bool { return !exists[cd.Entry.Key] })
	p.AlreadyGone += len(exists) - len(p.Delete)
	return nil
}

// knowing are the roots whose references are known (committed) objects:
// the head, the retained roots and the protected roots above the head.
func (fr *frame) knowing(walked []contract.Manifest) []contract.Manifest {
	var out []contract.Manifest
	for i := range walked {
		if i == 0 || fr.retained[i] {
			out = append(out, walked[i])
		}
	}
	for j := range fr.above {
		if fr.aboveUntil[j] > fr.now {
			out = append(out, fr.above[j])
		}
	}
	return out
}

// protectedAbove are the roots above the head whose references are still
// protected.
func (fr *frame) protectedAbove() []contract.Manifest {
	var out []contract.Manifest
	for j := range fr.above {
		if fr.aboveUntil[j] > fr.now {
			out = append(out, fr.above[j])
		}
	}
	return out
}

// removedByLineage reports whether a walked root's change removed key
// (committed: the lineage's debt). Anything else a walked root references
// is in the head, a retained root or removed by a newer walked root, so
// the roots no token can open (being trimmed, their parts perhaps already
// gone) need not be read.
func (pl planner) removedByLineage(ctx context.Context, roots []contract.Manifest, fr *frame, key string) (bool, error) {
	for i := range roots {
		found, err := pl.lin.ChangeHolds(ctx, &roots[i], contract.ChangeRemoved, key)
		if trimming(err, fr, i) {
			continue
		}
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// known reports whether any walked root references key (exact lookups,
// each distinct part read once).
func (pl planner) known(ctx context.Context, roots []contract.Manifest, headVersion uint64, key string) (bool, error) {
	var seen []string
	for j := range roots {
		i := roots[j].PartFor(key)
		if i < 0 || slices.Contains(seen, roots[j].Parts[i].Checksum) {
			continue
		}
		seen = append(seen, roots[j].Parts[i].Checksum)
		_, found, err := pl.lin.Lookup(ctx, &roots[j], key)
		if err != nil && roots[j].Version > headVersion && errors.Is(err, store.ErrNotFound) {
			continue // a root above the head whose part is gone protects nothing there
		}
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

func (p *Plan) recordProposal(pr proposal, key string, lastModified, grace int64) {
	switch pr {
	case proposalForeign:
		p.ForeignUncommitted++
	case proposalYoung:
		p.OrphansYoung++
		p.OrphanDueUnixMs = earliest(p.OrphanDueUnixMs, lastModified+grace)
	case proposalOrphan:
		p.Orphans = append(p.Orphans, Orphan{Key: key, LastModifiedUnixMs: lastModified})
	}
}

// place says whether a walked root knows a listed key (it references it
// or its change removed it) and, if none does, whether an abandoned
// committed root names it (cd).
func (pl planner) place(ctx context.Context, knowing []contract.Manifest, v *view, fr *frame, ab *abandonedIndex, l Listed) (known bool, cd *Candidate, err error) {
	key := l.Key
	known, err = pl.known(ctx, knowing, v.walk.Head.Version, key)
	if err == nil && !known {
		known, err = pl.removedByLineage(ctx, v.walk.Roots, fr, key)
	}
	if err == nil && !known {
		cd, err = ab.committed(ctx, key, l.LastModified.UnixMilli())
	}
	return known, cd, err
}

// considerAbandoned puts a key an abandoned committed root names to the
// gate as a committed object: a candidate to delete (true) or deferred.
func (p *Plan) considerAbandoned(cfg Config, m moment, cd Candidate) bool {
	if h, ok := judge(cfg, m, cd.subject()); !ok {
		p.deferCandidate(cd, h.Reason, h.DueUnixMs)
		return false
	}
	p.Delete = append(p.Delete, cd)
	return true
}

// abandonedIndex answers, for a key no walked or protected root knows,
// whether a committed root the lineage abandoned names it (a head
// regression an operator confirmed, whose protection of what those roots
// reference has ended; guard.AbandonedCommitted). Such a key is committed
// data, not a never-committed output: the gate judges it as an object
// (rule 3: token lifetime, watermark, lifecycle retention by its maximum
// timestamp), evicted when the coordinator first saw the confirmation
// (never before it first saw the regression: rule 16), or at the
// tombstone's eviction for a dropped lifetime, whichever is later. Only
// the coordinator's own output keys are asked: another writer's upload
// stays counted as foreign, never deleted (rule 11; a key reused by the
// new lineage's writer may be in flight). The abandoned roots are read
// once, on the first such key.
type abandonedIndex struct {
	pl    planner
	v     *view
	fr    *frame
	roots []contract.Manifest
	read  bool
}

func (ab *abandonedIndex) committed(ctx context.Context, key string, lastModifiedMs int64) (*Candidate, error) {
	if !ab.pl.cfg.Guards.AbandonedCommitted {
		return nil, nil
	}
	if _, own := contract.OwnedOutputTask(ab.v.c, key); !own {
		return nil, nil
	}
	if err := ab.load(ctx); err != nil {
		return nil, err
	}
	for i := range ab.roots {
		e, found, err := ab.pl.lin.Lookup(ctx, &ab.roots[i], key)
		if errors.Is(err, store.ErrNotFound) {
			if !canName(ab.v.c, &ab.roots[i], key, lastModifiedMs, ab.pl.cfg.ClockSkew) {
				continue
			}
			// A part of the abandoned root is gone: whether it names the
			// key cannot be told, so the key is held as committed.
			e, found, err = contract.ObjectEntry{Key: key, MaxTsUnixMs: math.MaxInt64}, true, nil
		}
		if err != nil {
			return nil, err
		}
		if found {
			e.Key = key
			return &Candidate{Entry: e, EvictTsUnixMs: ab.evictTs()}, nil
		}
	}
	return nil, nil
}

// canName reports whether abandoned root m can name key, an output of the
// coordinator's rewrite task whose object S3 dated lastModifiedMs, without
// reading the part that would say so (it is gone). It says no only when two
// independent facts both exclude it, so that neither alone is trusted with
// a delete:
//   - Time: m was committed before the object existed. Outputs are written
//     put-if-absent (never overwritten: LastModified is their one write),
//     and a root names an output only once it exists (the handoff submits
//     a rewrite only after its outputs are in the bucket, and a root names
//     what its ancestors, committed earlier, named). So a root committed
//     more than 2 x skew before the object's LastModified (one skew for S3's
//     clock, one for the publisher's) names none of it, whatever the
//     publisher did with bases.
//   - Contract: a rewrite commits above its base (events/PUBLISHER.md): a
//     root of the task's lifetime at or below the task's base version
//     names none of its outputs. A permissive owner that applies a
//     moved-base cutover on a head restored below the base breaks this
//     (PublisherUncheckedRebase); the time fact still holds the output.
//
// Without this, once the restored lineage's trim deleted a part an
// abandoned root shared with its base, every later never-committed output
// in that part's key range was held as committed with an unknown maximum
// timestamp: under a lifecycle retention, for ever. Anything else is taken
// to be nameable (fail closed).
func canName(c string, m *contract.Manifest, key string, lastModifiedMs int64, skew time.Duration) bool {
	if m.CommitTsUnixMs <= 0 || m.CommitTsUnixMs >= lastModifiedMs-2*skew.Milliseconds() {
		return true
	}
	id, own := contract.OwnedOutputTask(c, key)
	if !own {
		return true
	}
	for _, k := range []contract.TaskKind{contract.KindCompaction, contract.KindLifecycleTransition} {
		if inc, base, ok := contract.ParseTaskID(k, c, id); ok {
			return inc != m.Inc() || base < m.Version
		}
	}
	return true
}

// load reads the abandoned roots whose protection ended (a root gone
// names nothing any more).
func (ab *abandonedIndex) load(ctx context.Context) error {
	if ab.read {
		return nil
	}
	ab.read = true
	for _, k := range ab.v.aboveKeys {
		if until, ok := ab.fr.untilByKey[k]; !ok || until > ab.fr.now {
			continue // protected: its references are known (frame.knowing)
		}
		m, ok := ab.v.read[k]
		if !ok {
			var err error
			if m, err = ab.pl.rootAt(ctx, ab.v.c, k); errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				return refuse(ab.v.c, RefusedManifest, err)
			}
		}
		ab.roots = append(ab.roots, m)
	}
	return nil
}

// evictTs is when what the abandoned roots name counts as evicted: the
// later of the confirmation's first sighting (confirmedAt) and the
// tombstone's eviction; with neither known, never (held by gate (b)).
func (ab *abandonedIndex) evictTs() int64 {
	at := ab.fr.tombstoneEvict
	if c := ab.v.conf; c != nil {
		at = max(at, confirmedAt(ab.pl.cfg, c, ab.v.confSeen))
	}
	if at <= 0 {
		return math.MaxInt64
	}
	return at
}
