package gc

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// outputs deletes the coordinator's own never-committed rewrite outputs of
// the incarnation (contract.OwnedOutputTask, a task identity of this
// incarnation): proposed by a listing, which decides nothing else; the
// gate admits only the coordinator's own keys (guard.OrphanOwnership) of
// this lifetime, once no cutover can still commit them (write time +
// CutoverDeadline + 2 x ClockSkew, guard.CutoverDeadline); a younger one
// keeps the phase open.
func (r *tombRun) outputs(ctx context.Context) error {
	c, inc := r.task.Collection, r.p.Incarnation
	if r.e.ports.Lister == nil {
		r.enterManifests()
		return nil
	}
	mine := func(key string) bool {
		id, ok := contract.OwnedOutputTask(c, key)
		return ok && contract.TaskIncarnation(c, id) == inc
	}
	l, err := r.listed(ctx, contract.DataPrefix(c), kindOutput, mine)
	if err != nil {
		return fmt.Errorf("list never-committed outputs of %s: %w", c, err)
	}
	n, err := r.deleteKeys(ctx, l.due, l.subj)
	r.p.OutputsDeleted += int64(n)
	if err != nil {
		return err
	}
	if err := r.heldBlocked(l); err != nil {
		return err
	}
	r.p.YoungOutputs = l.young
	if l.young > 0 {
		r.p.NextDueUnixMs = l.next
		return errYoungOutputs
	}
	r.enterManifests()
	return nil
}

// errYoungOutputs ends a run whose incarnation still has outputs a late
// cutover could commit: the next run continues from the outputs phase.
var errYoungOutputs = errors.New("never-committed outputs too young to reclaim")

// errHeld ends a run at a key the gate holds (lifecycle retention of a
// dropped collection's object): the next run continues from the cursor.
var errHeld = errors.New("a key of the dropped lifetime is held by the gate")

// listedKeys is what a listing proposed of the lifetime, as the gate
// judged it: the keys it admits now, and how many it holds as young
// (a commit may still name them) with the earliest due.
type listedKeys struct {
	due         []string
	subj        map[string]subject
	young, next int64
	blocked     *Hold // the watermark could not be read: nothing of the listing goes
}

// heldBlocked ends a phase whose listing the gate held on an unreadable
// watermark: what it admitted went, the rest waits for the next run.
func (r *tombRun) heldBlocked(l listedKeys) error {
	if l.blocked == nil {
		return nil
	}
	r.hold(*l.blocked)
	return errHeld
}

// listed lists prefix and puts every key of the lifetime (mine) to the
// gate as kind.
func (r *tombRun) listed(ctx context.Context, prefix string, kind keyKind, mine func(string) bool) (listedKeys, error) {
	out := listedKeys{subj: map[string]subject{}}
	m := r.tombMoment()
	err := r.e.ports.Lister.List(ctx, prefix, func(page []Listed) error {
		for _, l := range page {
			if !mine(l.Key) {
				continue
			}
			s := r.tombSubject(kind, l.Key)
			s.owned, s.writtenAt = true, l.LastModified.UnixMilli()
			h, ok := judge(r.e.cfg, m, s)
			switch {
			case ok:
				out.due, out.subj[l.Key] = append(out.due, l.Key), s
			case h.Reason == ReasonYoung:
				out.young++
				out.next = earliest(out.next, h.DueUnixMs)
			case h.Reason == ReasonWatermark && out.blocked == nil:
				out.blocked = &h
			}
		}
		return nil
	})
	return out, err
}

// strays deletes the incarnation's manifest keys a listing proposes (by
// incarnation tag: contract.ManifestKeyIncarnation; never another
// lifetime's, never the head), once no commit can still name them; a
// younger one keeps the phase open, as a young output does.
func (r *tombRun) strays(ctx context.Context) error {
	c, inc := r.task.Collection, r.p.Incarnation
	if r.e.ports.Lister == nil {
		return nil
	}
	mine := func(key string) bool {
		got, ok := contract.ManifestKeyIncarnation(c, key)
		return ok && got == inc
	}
	l, err := r.listed(ctx, contract.ManifestsPrefix(c), kindStray, mine)
	if err != nil {
		return fmt.Errorf("list the manifest keys of dropped %s incarnation %d: %w", c, inc, err)
	}
	n, err := r.deleteKeys(ctx, l.due, l.subj)
	r.p.StraysDeleted += int64(n)
	if n > 0 {
		r.e.metrics.Add("TombstoneStrayManifestsDeleted", float64(n))
	}
	if err != nil {
		return err
	}
	if err := r.heldBlocked(l); err != nil {
		return err
	}
	r.p.YoungStrays = l.young
	if l.young > 0 {
		r.p.NextDueUnixMs = l.next
		return errYoungOutputs
	}
	return nil
}

// leftovers lists the collection's prefix after a cleanup that ran to its
// end and counts what is still the incarnation's (TombstoneLeft): the
// release dependencies are confirmed by what is gone, not by the phases
// that ran. Without a lister nothing is proposed and nothing is counted.
func (r *tombRun) leftovers(ctx context.Context) (*TombstoneLeft, error) {
	c, inc := r.task.Collection, r.p.Incarnation
	left := &TombstoneLeft{}
	if r.e.ports.Lister == nil {
		return left, nil
	}
	artifact := map[string]bool{}
	for _, k := range r.facts.ControlArtifacts {
		artifact[k] = true
	}
	err := r.e.ports.Lister.List(ctx, contract.CollectionPrefix(c), func(page []Listed) error {
		for _, l := range page {
			found := true
			_, manifest := contract.ManifestKeyIncarnation(c, l.Key)
			_, output := contract.OwnedOutputTask(c, l.Key)
			switch {
			case artifact[l.Key]:
				left.Artifacts++
			case !contract.OfLifetime(c, inc, l.Key):
				found = false
			case manifest:
				left.Manifests++
			case output:
				left.Outputs++
			default:
				left.Data++ // a data object its writers committed (rule 17: what is left in the bucket)
			}
			if found && left.First == "" {
				left.First = l.Key
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list what is left of dropped %s incarnation %d: %w", c, inc, err)
	}
	return left, nil
}

// strayRootObjects deletes the objects the lifetime's committed roots name
// that no walk from its head reaches (walked: the roots it did reach): the
// roots above a restored head, every root when the head is gone (retired
// out of band, before a cleanup recorded it). Those roots are the only
// index of what they added, so their objects go before any root does,
// each put to the gate as a committed object of the dropped lifetime with
// its entry (lifecycle retention by its maximum timestamp holds it as it
// holds the head's). A key the listing proposes whose bytes are not the
// root its key names (contract.ErrChecksumMismatch) indexes nothing: it
// is only a stray key. The coordinator's own rewrite outputs are the
// outputs phase's (rule 4's horizon), not judged here.
func (r *tombRun) strayRootObjects(ctx context.Context, walked map[string]bool) error {
	c := r.task.Collection
	if r.e.ports.Lister == nil {
		return nil
	}
	roots, err := r.unwalkedRoots(ctx, walked)
	if err != nil {
		return err
	}
	subj := map[string]subject{}
	var keys []string
	m := r.tombMoment()
	collect := func(o contract.ObjectEntry) error {
		if _, seen := subj[o.Key]; seen {
			return nil
		}
		if _, own := contract.OwnedOutputTask(c, o.Key); own {
			return nil
		}
		s := r.tombSubject(kindObject, o.Key)
		s.entry = o
		if h, ok := judge(r.e.cfg, m, s); !ok {
			r.hold(h)
			return errHeld
		}
		subj[o.Key], keys = s, append(keys, o.Key)
		return nil
	}
	var held error
	for _, key := range roots {
		if held = r.rootObjects(ctx, key, collect); held != nil {
			if !errors.Is(held, errHeld) {
				return held
			}
			break
		}
	}
	n, err := r.deleteKeys(ctx, keys, subj)
	r.p.ObjectsDeleted += int64(n)
	if err != nil {
		return err
	}
	if n > 0 {
		r.e.metrics.Add("TombstoneStrayRootObjectsDeleted", float64(n))
	}
	return held
}

// unwalkedRoots lists the lifetime's root keys no walk reached.
func (r *tombRun) unwalkedRoots(ctx context.Context, walked map[string]bool) ([]string, error) {
	c, inc := r.task.Collection, r.p.Incarnation
	var roots []string
	err := r.e.ports.Lister.List(ctx, contract.ManifestsPrefix(c), func(page []Listed) error {
		for _, l := range page {
			if got, ok := contract.RootKeyIncarnation(c, l.Key); ok && got == inc && !walked[l.Key] {
				roots = append(roots, l.Key)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the roots of dropped %s incarnation %d: %w", c, inc, err)
	}
	return roots, nil
}

// rootObjects streams the objects one listed root names: its full object
// set (part by part; a part already gone names nothing any more) and its
// change's removals.
func (r *tombRun) rootObjects(ctx context.Context, key string, fn func(contract.ObjectEntry) error) error {
	c := r.task.Collection
	root, err := r.e.lin.RootAt(ctx, c, key)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, contract.ErrChecksumMismatch):
		return nil
	case err != nil:
		return fmt.Errorf("read root %s of dropped %s incarnation %d (its objects go before it): %w", key, c, r.p.Incarnation, err)
	case root.Inc() != r.p.Incarnation:
		return nil
	}
	for _, ref := range root.Parts {
		err := r.e.lin.Each(ctx, &root, func(p contract.PartRef) bool { return p.Key == ref.Key }, fn)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	if err := r.e.lin.EachChange(ctx, &root, contract.ChangeRemoved, fn); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
