package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/resources"
)

// headCASFault applies the stand-in publisher's next head CAS (If-Match
// PUT of a head) and answers 500: the SDK retries it and the retry gets
// 412 from our own write.
func headCASFault(env *localenv.Env) localaws.FaultHandle {
	return env.Stack.InjectFault(localaws.Fault{Service: "s3", Operation: "PutObject", Internal: true,
		Match: func(r *http.Request, _ []byte) bool {
			return r.Header.Get("If-Match") != "" && strings.HasSuffix(r.URL.Path, contract.HeadSuffix)
		}})
}

// Issue 12 item 6: the stand-in publisher's own retried head CAS answers
// 412; re-reading the head shows our root, so one append is committed
// once. Taking the 412 at its word (TrustRefusal) commits it twice.
func TestPublisherAppendWithLostCASAnswerCommitsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		trust bool
		want  uint64 // versions added by one append
	}{{"rereads_head", false, 1}, {"trust_refusal", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			env := start(t, localenv.Options{NoDelivery: true, Publisher: publisher.Options{TrustRefusal: tc.trust}})
			ctx := context.Background()
			if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
				t.Fatal(err)
			}
			before, err := env.Lineage.Head(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			f := headCASFault(env)
			if _, err := env.Workload.Append(ctx, "c1", env.Workload.Random()); err != nil {
				t.Fatal(err)
			}
			after, err := env.Lineage.Head(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			if f.Hits() != 1 || after.Version-before.Version != tc.want {
				t.Fatalf("fault hits %d; head v%d -> v%d, want %d new version(s)", f.Hits(), before.Version, after.Version, tc.want)
			}
		})
	}
}

// The stand-in in strict mode answers a cutover it applied (its retried
// CAS refused by its own write) "accepted", so the handoff counts it
// published; taking the 412 at its word answers "conflict" and the
// handoff counts a published cutover as stale.
func TestPublisherCutoverWithLostCASAnswerIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		trust    bool
		accepted float64
	}{{"rereads_head", false, 1}, {"trust_refusal", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			// Without the conflict check: with it, a refused CAS is judged
			// again from the head, which finds the request applied.
			env := cxStart(t, localenv.Options{NoDelivery: true, Policy: legacyPolicy(), Publisher: publisher.Options{TrustRefusal: tc.trust}})
			cxSetup(t, env, "c1", 4)
			_, body := cxTask(t, env, "c1")
			if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) != 0 {
				t.Fatal("compaction failed")
			}
			f := headCASFault(env)
			cxHandoff(t, env)
			cuts := cxCutovers(cxLineage(t, env, "c1"))
			acc := cxMetric(env, "CutoversAccepted")
			if f.Hits() != 1 || len(cuts) != 1 || acc != tc.accepted {
				t.Fatalf("fault hits %d, cutovers in the lineage %d, CutoversAccepted %v (want 1 cutover, %v accepted); stale %v",
					f.Hits(), len(cuts), acc, tc.accepted, cxMetric(env, "StaleResultsDropped"))
			}
		})
	}
}
