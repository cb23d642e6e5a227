package gc

import (
	"context"
	"fmt"
	"slices"
)

// deleteKeys deletes keys in order through the gate's sender (batches of
// up to BatchSize, each call within the run's budget, each batch proven
// after its waits by proveTomb against what subj says of each key) and
// returns how many leading keys are confirmed gone (a key already gone
// counts): the cursor moves past exactly those. A key the gate holds ends
// the leading run there (r.held says why); keys not confirmed after every
// attempt fail the run.
func (r *tombRun) deleteKeys(ctx context.Context, keys []string, subj map[string]subject) (int, error) {
	prove := func(ctx context.Context, keys []string) ([]string, *Proof, error) {
		return r.proveTomb(ctx, subj, keys)
	}
	lead := 0
	for start := 0; start < len(keys); start += r.e.cfg.BatchSize {
		part := keys[start:min(start+r.e.cfg.BatchSize, len(keys))]
		done, unconfirmed, err := r.e.deleteProven(ctx, batch{collection: r.task.Collection, keys: part, prove: prove, spend: r.spend, t: &r.t})
		r.rep.Deleted += len(done)
		for _, k := range part {
			if !slices.Contains(done, k) {
				break
			}
			lead++
		}
		switch {
		case err != nil:
			return lead, err
		case len(unconfirmed) > 0:
			return lead, fmt.Errorf("tombstone cleanup of %s: %d keys not deleted (%v): %w", r.task.Collection, len(unconfirmed), first(unconfirmed), ErrUnconfirmed)
		case lead < start+len(part):
			return lead, errHeld // the gate held a key of the batch
		}
	}
	return lead, nil
}

// subjects are the gate's subjects for keys of one kind of the lifetime.
func (r *tombRun) subjects(kind keyKind, keys []string) map[string]subject {
	subj := make(map[string]subject, len(keys))
	for _, k := range keys {
		subj[k] = r.tombSubject(kind, k)
	}
	return subj
}

// first is one reason of a failure map, for the error.
func first(m map[string]string) string {
	for k, v := range m {
		return k + ": " + v
	}
	return ""
}
