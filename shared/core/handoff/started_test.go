package handoff

import (
	"context"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
)

// notAfterPublisher is fakePublisher keeping the not_after of each request.
type notAfterPublisher struct {
	fakePublisher
	notAfter []int64
}

func (p *notAfterPublisher) Cutover(ctx context.Context, r contract.CutoverRequest) (contract.CutoverAnswer, error) {
	p.notAfter = append(p.notAfter, r.NotAfterUnixMs)
	return p.fakePublisher.Cutover(ctx, r)
}

// Rule 16: a completion's started_at is its sender's word. One claimed a
// day ahead (a forging compaction role, a worker with a skewed clock)
// counts from the handoff's now: the cutover's not_after is at most now +
// CutoverDeadline, the horizon GC's never-committed reclaim waits for
// (guard cutover_deadline; off, the claim stretches it by a day).
func TestFutureStartCountsFromTheHandoffsClock(t *testing.T) {
	for _, g := range []guard.Set{guard.All(), func() guard.Set { s, _ := guard.Without("cutover_deadline"); return s }()} {
		lin := newLineage(5)
		pub := &notAfterPublisher{fakePublisher: fakePublisher{lin: lin}}
		h, _ := newHandoff(lin, pub, g)
		now := h.now()
		if _, err := h.Process(context.Background(), completion(5, now.Add(24*time.Hour))); err != nil {
			t.Fatal(err)
		}
		if len(pub.notAfter) == 0 {
			t.Fatal("the completion was not submitted")
		}
		bounded := pub.notAfter[0] <= now.Add(h.cfg.CutoverDeadline).UnixMilli()
		if bounded != g.CutoverDeadline {
			t.Fatalf("guard %v: not_after %s after now (deadline %s)", g.CutoverDeadline, time.UnixMilli(pub.notAfter[0]).Sub(now), h.cfg.CutoverDeadline)
		}
	}
}
