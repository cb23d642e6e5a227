package gc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// proveFunc re-reads what the eligibility of keys rests on and returns the
// keys still eligible (the others are withdrawn and accounted for by the
// prover). A RefusedError ends the sweep.
type proveFunc func(ctx context.Context, keys []string) ([]string, error)

// errStaleProof: every proof took longer than ProofMaxAge to establish.
var errStaleProof = errors.New("eligibility proof could not be made fresh")

// maxProofTries bounds the proofs taken for one delete call.
const maxProofTries = 3

// deleteProven deletes keys (<= BatchSize) in paced calls. Every call rests
// on a proof taken at most ProofMaxAge before it (guard.FreshProof): the
// first call and every retry re-prove eligibility against the current head
// first. Keys a call did not confirm are retried with exponential backoff
// up to MaxAttempts; a key already gone counts as confirmed (S3 answers
// deleted; the adapter maps NoSuchKey to deleted). Keys still unconfirmed
// are recorded in rep.Unconfirmed; the error is non-nil only for a refusal
// or when the context ended.
func (e *Executor) deleteProven(ctx context.Context, a *applyRun, keys []string, prove proveFunc) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	c := a.pl.Collection
	pending := slices.Clone(keys)
	var done []string
	reasons := map[string]string{}
	for attempt := 1; len(pending) > 0 && attempt <= e.cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			a.rep.Retries++
			if err := e.sleep(ctx, e.cfg.RetryBackoff<<(attempt-2)); err != nil {
				return done, err
			}
		}
		saturated, waited := e.pacer.fleetWaitCount(), e.pacer.waited()
		if err := e.pacer.Wait(ctx, c, len(pending)); err != nil {
			return done, err
		}
		if d := e.pacer.waited() - waited; d > 0 {
			e.metrics.Duration("GCBudgetWaitMs", d) // time this call waited for delete tokens
		}
		if n := e.pacer.fleetWaitCount() - saturated; n > 0 {
			// The fleet-wide budget made this instance wait: the global
			// delete rate is saturated.
			e.metrics.Add("GCBudgetSaturated", float64(n))
		}
		if attempt == 1 || e.cfg.Guards.FreshProof {
			eligible, err := e.freshProof(ctx, a, pending, prove)
			if errors.Is(err, errStaleProof) {
				for _, k := range pending {
					reasons[k] = err.Error()
				}
				continue
			}
			if err != nil {
				return done, err
			}
			pending = eligible
			if len(pending) == 0 {
				break
			}
		}
		ok, failed, err := e.deleteCall(ctx, a, pending)
		if err != nil {
			return done, err
		}
		done = append(done, ok...)
		for _, k := range ok {
			delete(reasons, k)
		}
		maps.Copy(reasons, failed)
		pending = slices.DeleteFunc(pending, func(k string) bool { _, f := failed[k]; return !f })
	}
	a.rep.Deleted = append(a.rep.Deleted, done...)
	if len(pending) > 0 {
		if a.rep.Unconfirmed == nil {
			a.rep.Unconfirmed = map[string]string{}
		}
		for _, k := range pending {
			a.rep.Unconfirmed[k] = reasons[k]
		}
		e.log.Error("deletes not confirmed after retries", "collection", c, "keys", len(pending), "attempts", e.cfg.MaxAttempts)
	}
	return done, nil
}

// freshProof proves keys and checks that the proof is still fresh now,
// just before the delete call; a proof that took longer than ProofMaxAge
// is taken again.
func (e *Executor) freshProof(ctx context.Context, a *applyRun, keys []string, prove proveFunc) ([]string, error) {
	for range maxProofTries {
		at := e.now()
		a.rep.Proofs++
		eligible, err := prove(ctx, keys)
		if err != nil {
			return nil, err
		}
		if !e.cfg.Guards.FreshProof || e.now().Sub(at) <= e.cfg.ProofMaxAge {
			return eligible, nil
		}
		keys = eligible
	}
	return nil, fmt.Errorf("%w within %s", errStaleProof, e.cfg.ProofMaxAge)
}

// deleteCall makes one DeleteObjects call: the keys confirmed gone and the
// keys that failed with their reason (a failed call fails every key).
func (e *Executor) deleteCall(ctx context.Context, a *applyRun, keys []string) (ok []string, failed map[string]string, err error) {
	res, err := e.ports.Deleter.DeleteBatch(ctx, keys)
	a.rep.DeleteCalls++
	a.rep.KeysSent += len(keys)
	failed = map[string]string{}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		for _, k := range keys {
			failed[k] = err.Error()
		}
		e.log.Warn("delete call failed; retrying", "collection", a.pl.Collection, "keys", len(keys), "err", err)
		return nil, failed, nil
	}
	gone := make(map[string]bool, len(res.Deleted))
	for _, k := range res.Deleted {
		gone[k] = true
	}
	for _, k := range keys {
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
