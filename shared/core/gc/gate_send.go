package gc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// prover re-reads what a batch rests on (the head, and the watermark and
// CCS facts when their reading is older than the reuse bound), puts every
// key to the gate again and returns the keys it still admits (the others
// it accounts for as held) with the proof they rest on. A RefusedError (or
// errFactsMoved) ends the run.
type prover func(ctx context.Context, keys []string) ([]string, *Proof, error)

// tally is what the sender did, for reports and metrics.
type tally struct {
	calls, keysSent, retries, proofs, stale int
}

// batch is one delete batch put to the sender.
type batch struct {
	collection string
	keys       []string // at most BatchSize
	prove      prover
	spend      func() error // checked before each call (a tombstone run's budget); nil: none
	t          *tally
	prepaid    bool // the first attempt's budget was taken for a run of batches (the trim's roots)
}

// maxProofTries bounds the proofs taken for one attempt of a batch.
const maxProofTries = 3

// deleteProven is the only caller of the delete port. Every attempt of a
// batch (the first, and each retry of keys a call did not confirm) waits
// first — its retry backoff, then its delete budget: the pacer's
// per-collection and global buckets, the fleet's and the S3 prefix's, one
// take for the batch — then proves, then sends. Nothing waits between the
// proof and the call (SYSTEM rule 14): the proof is taken after every
// wait, and the adapter refuses a batch whose proof is older than
// ProofMaxAge at the moment it sends (ErrStaleProof: proven again, no key
// counted as failed). A key already gone counts as deleted. Keys not
// confirmed after MaxAttempts are returned with their reason; err is
// non-nil only for a refusal, a spent run budget or an ended context.
func (e *Executor) deleteProven(ctx context.Context, b batch) (done []string, unconfirmed map[string]string, err error) {
	pending := slices.Clone(b.keys)
	reasons := map[string]string{}
	var early *Proof // guard fresh_proof off (mutation proof only): the proof taken before the first wait, reused
	for attempt := 1; len(pending) > 0 && attempt <= e.cfg.MaxAttempts; attempt++ {
		if !e.cfg.Guards.FreshProof && early == nil {
			if pending, early, err = e.proveOnce(ctx, b, pending); err != nil || len(pending) == 0 {
				return done, nil, err
			}
		}
		if err := e.wait(ctx, b, attempt, len(pending)); err != nil {
			return done, nil, err
		}
		ok, failed, err := e.attempt(ctx, b, pending, early)
		done = append(done, ok...)
		if err != nil {
			return done, nil, err
		}
		for _, k := range ok {
			delete(reasons, k)
		}
		maps.Copy(reasons, failed)
		pending = slices.DeleteFunc(pending, func(k string) bool { _, f := failed[k]; return !f })
	}
	if len(pending) > 0 {
		unconfirmed = map[string]string{}
		for _, k := range pending {
			unconfirmed[k] = reasons[k]
		}
		e.log.Error("deletes not confirmed after retries", "collection", b.collection, "keys", len(pending), "attempts", e.cfg.MaxAttempts)
	}
	return done, unconfirmed, nil
}

// wait is everything an attempt waits for, all of it before its proof:
// the retry backoff, then the delete budget.
func (e *Executor) wait(ctx context.Context, b batch, attempt, n int) error {
	if attempt == 1 && b.prepaid {
		return nil
	}
	defer e.waited()
	if attempt > 1 {
		b.t.retries++
		if err := e.sleep(ctx, e.cfg.RetryBackoff<<(attempt-2)); err != nil {
			return err
		}
	}
	saturated, waited := e.pacer.fleetWaitCount(), e.pacer.waited()
	if err := e.pacer.Wait(ctx, b.collection, n); err != nil {
		return err
	}
	if d := e.pacer.waited() - waited; d > 0 {
		e.metrics.Duration("GCBudgetWaitMs", d) // time this batch waited for delete tokens
	}
	if n := e.pacer.fleetWaitCount() - saturated; n > 0 {
		// The fleet-wide budget made this instance wait: the global
		// delete rate is saturated.
		e.metrics.Add("GCBudgetSaturated", float64(n))
	}
	return nil
}

// attempt proves the pending keys and makes one call; a batch the adapter
// finds stale when it sends is proven again (not sent, not failed).
func (e *Executor) attempt(ctx context.Context, b batch, pending []string, early *Proof) (ok []string, failed map[string]string, err error) {
	for range maxProofTries {
		keys, proof := pending, early
		if e.cfg.Guards.FreshProof {
			if keys, proof, err = e.proveOnce(ctx, b, pending); err != nil || len(keys) == 0 {
				return nil, map[string]string{}, err
			}
		}
		if b.spend != nil {
			if err := b.spend(); err != nil {
				return nil, nil, err
			}
		}
		ok, failed, err = e.call(ctx, b, ProvenBatch{keys: keys, proof: proof})
		if !errors.Is(err, ErrStaleProof) {
			return ok, failed, err
		}
		b.t.stale++
		e.metrics.Add("GCStaleProofs", 1)
		e.log.Warn("delete batch refused: its proof went stale before the call; proving again", "collection", b.collection, "keys", len(keys), "err", err)
	}
	failed = map[string]string{}
	for _, k := range pending {
		failed[k] = fmt.Sprintf("%v: no proof stayed fresh until its call in %d tries", ErrStaleProof, maxProofTries)
	}
	return nil, failed, nil
}

// proveOnce takes one proof of keys; withdrawn keys are the prover's.
func (e *Executor) proveOnce(ctx context.Context, b batch, keys []string) ([]string, *Proof, error) {
	b.t.proofs++
	return b.prove(ctx, keys)
}

// call makes one DeleteObjects call through the delete port: the keys
// confirmed gone and the keys that failed with their reason (a failed
// call fails every key). A stale proof is returned as the error.
func (e *Executor) call(ctx context.Context, b batch, pb ProvenBatch) (ok []string, failed map[string]string, err error) {
	if err := pb.Fresh(); err != nil {
		return nil, nil, err
	}
	res, err := e.ports.Deleter.DeleteProven(ctx, pb)
	if errors.Is(err, ErrStaleProof) {
		return nil, nil, err
	}
	b.t.calls++
	b.t.keysSent += pb.Len()
	failed = map[string]string{}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		for _, k := range pb.keys {
			failed[k] = err.Error()
		}
		e.log.Warn("delete call failed; retrying", "collection", b.collection, "keys", pb.Len(), "err", err)
		return nil, failed, nil
	}
	gone := make(map[string]bool, len(res.Deleted))
	for _, k := range res.Deleted {
		gone[k] = true
	}
	for _, k := range pb.keys {
		switch {
		case gone[k]:
			ok = append(ok, k)
		case res.Failed[k] != "":
			failed[k] = res.Failed[k]
		default:
			failed[k] = "not confirmed by the delete call"
		}
	}
	return ok, failed, nil
}

// newProof is a proof resting on readings taken at at (the oldest of them).
func (e *Executor) newProof(c string, inc, version uint64, checksum string, at time.Time) *Proof {
	return &Proof{collection: c, incarnation: inc, headVersion: version, headChecksum: checksum, at: at,
		maxAge: e.cfg.ProofMaxAge, clock: e.now, enforce: e.cfg.Guards.FreshProof}
}

// stamp is when a reading was taken: the executor's clock, and how many
// waits it had made by then.
type stamp struct {
	at    time.Time
	waits uint64
}

func (e *Executor) stamp() stamp { return stamp{at: e.now(), waits: e.waits.Load()} }

// usable reports whether a reading may serve a new proof: it was taken
// after the executor's last wait (a wait is where the world moves on under
// a proof) and is younger than half the bound, so that a batch proven on
// it is sent well within ProofMaxAge. A batch that waits for its own
// budget is therefore always proven on readings taken after that wait; the
// trim's roots, whose budget is taken once for all of them, share one.
//
// With guard fresh_proof off (mutation proof only) a reading, once taken,
// serves every later proof: the proof moves back before every wait.
func (e *Executor) usable(s stamp) bool {
	if !e.cfg.Guards.FreshProof {
		return !s.at.IsZero()
	}
	return !s.at.IsZero() && s.waits == e.waits.Load() && e.now().Sub(s.at) < e.cfg.ProofMaxAge/2
}

// waited records a wait: no reading taken before it serves a proof.
func (e *Executor) waited() { e.waits.Add(1) }
