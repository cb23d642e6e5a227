package e2e

import (
	"context"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// oldContractPublisher is the handoff's publisher client with every answer's
// applied_on_version dropped: a publisher on the contract before issue 26,
// which has no such field (an optional field, omitempty in the contract).
type oldContractPublisher struct {
	inner interface {
		Cutover(context.Context, contract.CutoverRequest) (contract.CutoverAnswer, error)
	}
}

func (p oldContractPublisher) Cutover(ctx context.Context, req contract.CutoverRequest) (contract.CutoverAnswer, error) {
	ans, err := p.inner.Cutover(ctx, req)
	ans.AppliedOnVersion = 0
	return ans, err
}

// Review 25/26, D2 (issue 26 capability negotiation; events/PUBLISHER.md:
// "a publisher that rebases a request without checking ... is detected and
// alarmed, not prevented"; SYSTEM rules 2 and 7). The scenario of
// TestUncheckedRebaseIsAContractViolation (the head moves in the
// publisher's arrival window, a late upload deleting doc-a and writing
// doc-k "zombie" over the inputs), with the lenient publisher the stand-in
// has always offered (AcceptRebase: "accept a cutover whose base moved if
// its removed objects are all still present") and no conflict check, on the
// contract it was written for: its answers carry no applied_on_version.
// checkedAnswer (rebase.go) detects an unchecked rebase only by
// applied_on_version > base_version, so this one is counted as an ordinary
// acceptance: no PublisherUncheckedRebase, no alarm, no error log, though
// the answer's committed_version (base+2) and the committed root's parent
// both say it was applied on a moved head, and a deleted key reads again.
func TestReview2526_UncheckedRebaseWithoutAppliedOnVersionGoesUndetected(t *testing.T) {
	var late workload.Upload
	o := checkedPolicy(true)
	o.Publisher = publisher.Options{NoConflictCheck: true, AcceptRebase: true}
	r := runChecked(t, o, capabilitySetup(t, &late), func(env *localenv.Env, c contract.Completion) {
		if _, err := env.Workload.CommitUpload(context.Background(), late); err != nil {
			t.Fatal(err)
		}
	}, func(env *localenv.Env) {
		pub := app.PublisherClient(env.Config, env.FunctionClients(resources.FnHandoff))
		cxRegisterHandoff(env, app.HandoffOptions{Publisher: oldContractPublisher{inner: pub}})
	})
	if !r.cutover {
		t.Fatal("the lenient publisher did not apply the request: the scenario proves nothing")
	}
	harm := r.readsChanged()
	v := cxMetric(r.env, "PublisherUncheckedRebase")
	if v != 1 {
		t.Fatalf("an unchecked acceptance on a moved head (base v%d) went undetected (PublisherUncheckedRebase %v, CutoversAccepted %v); reads changed: %s",
			r.base, v, cxMetricDim(r.env, "CutoversAccepted", "Kind", string(r.completion.Kind)), harm)
	}
}
