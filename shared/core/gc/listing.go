package gc

import (
	"context"
	"errors"
	"slices"

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
	if pl.ports.Lister == nil {
		return nil
	}
	exists := make(map[string]bool, len(p.Delete))
	for _, cd := range p.Delete {
		exists[cd.Entry.Key] = false
	}
	grace := orphanGrace(pl.cfg).Milliseconds()
	knowing := fr.knowing(v.walk.Roots)
	err := pl.ports.Lister.List(ctx, contract.DataPrefix(v.c), func(page []Listed) error {
		for _, l := range page {
			if !contract.IsDataKey(v.c, l.Key) {
				continue
			}
			if _, ok := exists[l.Key]; ok {
				exists[l.Key] = true
				continue
			}
			known, err := pl.known(ctx, knowing, v.walk.Head.Version, l.Key)
			if err == nil && !known {
				known, err = pl.removedByLineage(ctx, v.walk.Roots, l.Key)
			}
			if err != nil {
				return lookupFailed{err}
			}
			_, owned := contract.OwnedOutputTask(v.c, l.Key)
			owned = owned || !pl.cfg.Guards.OrphanOwnership
			lm := l.LastModified.UnixMilli()
			p.recordProposal(propose(owned, known, fr.now-lm, grace, fr.gates), l.Key, lm, grace)
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
func (pl planner) removedByLineage(ctx context.Context, roots []contract.Manifest, key string) (bool, error) {
	for i := range roots {
		if found, err := pl.lin.ChangeHolds(ctx, &roots[i], contract.ChangeRemoved, key); err != nil || found {
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
