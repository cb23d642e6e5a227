package e2e

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/policy"
)

// Review 23 D2 (fb917b7, was TestReview23_ProofMaxAgeHasNoCeiling):
// gc.proof_max_age_ms had no upper bound (rule 14: "within a
// bounded, configured interval"; issue 23: the adapter refuses a batch
// whose proof is older than the bound). policy.Validate checks only that
// it is positive, so a proof_max_age_ms of one hour — four times the
// token lifetime (15 min), longer than any Lambda invocation — validates,
// and then the adapter's check at the call admits a proof older than a
// whole drop, release and re-create of the name. Here the delete port's
// call takes 20 minutes before it reaches S3 (slow attempts and the SDK's
// retries of a throttled DeleteObjects; modelled by a port that hands the
// batch on late, as TestDeletePortRefusesAStaleProofWhenItSends does);
// meanwhile the name is dropped, released and re-created and the new
// lifetime commits an object under a key of the batch. With the default
// bound (10 s) the adapter refuses the stale batch and the gate proves it
// again; with the legal 1 h bound the new lifetime's object is deleted.
// Suggested fix: validate proof_max_age_ms <= a small ceiling (e.g. well
// under gc.token_lifetime_ms and the GC function's timeout; 60 s).
func TestProofMaxAgeAboveItsCeilingIsRefused(t *testing.T) {
	const bound = time.Hour
	pol := policy.Default()
	pol.GC.ProofMaxAge = policy.Duration(bound)
	if err := pol.Validate(); err != nil {
		var bad policy.Invalid
		if !errors.As(err, &bad) || !slices.Contains(bad.Fields(), "gc.proof_max_age_ms") {
			t.Fatalf("refused, but not for gc.proof_max_age_ms: %v", err)
		}
		t.Logf("policy refused: %v", err)
		return // the fix: a ceiling refuses this policy
	}
	e := startGC(t, func(p *policy.Policy) { p.GC.ProofMaxAge = policy.Duration(bound) })
	if tl := e.Config.Policy.GC.TokenLifetime.D(); bound <= tl {
		t.Fatalf("the test wants a bound above the token lifetime %s", tl)
	}
	e.create("c1", contract.Lifecycle{})
	old := e.add("c1", 3, 0, 0)
	e.add("c1", 1, 0, 0)
	e.commit("c1", old, nil)
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	task := contract.NewTask(contract.KindGC, "c1", head.Version, head.ManifestChecksum, 0, e.clk.Now().UnixMilli())
	reused := old[1]
	body := []byte("segment of the re-created lifetime")
	raced := false
	ex, _ := e.executor(guardsOn, func(d gc.Deleter) gc.Deleter {
		return deleterFunc(func(ctx context.Context, b gc.ProvenBatch) (gc.DeleteResult, error) {
			if !raced {
				raced = true
				e.clk.Advance(20 * time.Minute) // the call reaches S3 20 minutes after its proof
				if _, err := e.CCS.Drop(e.ctx, "c1", 0); err != nil {
					t.Fatal(err)
				}
				e.retireAndRecreate(t)
				if _, err := e.Bucket.Put(e.ctx, reused.Key, body); err != nil {
					t.Fatal(err)
				}
				entry := reused
				entry.Size, entry.Checksum = int64(len(body)), contract.Checksum(body)
				e.commit("c1", nil, []contract.ObjectEntry{entry})
			}
			return d.DeleteProven(ctx, b)
		})
	})
	rep, err := ex.Run(e.ctx, task)
	if err != nil {
		t.Logf("run: %v", err)
	}
	if !raced {
		t.Fatalf("no delete call was made: %+v", rep)
	}
	got, err := e.Bucket.Get(e.ctx, reused.Key)
	if err != nil || string(got) != string(body) {
		t.Fatalf("proof_max_age_ms %s validated; a batch proven 20 min before its call (longer than the token lifetime %s) deleted the re-created lifetime's object %s (read %q, %v): the bound bounds nothing",
			bound, e.Config.Policy.GC.TokenLifetime.D(), reused.Key, got, err)
	}
}
