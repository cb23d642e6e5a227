package observe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/observe"
)

type sentRequests struct{ reqs []contract.ReconcileRequest }

func (s *sentRequests) SendReconcile(_ context.Context, reqs []contract.ReconcileRequest) error {
	if len(reqs) > observe.FanOutWidth {
		return fmt.Errorf("%d requests in one call", len(reqs))
	}
	s.reqs = append(s.reqs, reqs...)
	return nil
}

// A chunk splits into at most FanOutWidth requests per step (one
// SendMessageBatch) and reaches one request per collection, each
// collection exactly once, in three steps from ReconcileChunkMax.
func TestFanOutReachesEveryCollectionOnceInFewSteps(t *testing.T) {
	o := observe.New(memObjects{}, memState{}, &recQueue{}, nil, func() time.Time { return time.UnixMilli(1_800_000_000_000) }, observe.DefaultConfig(), nil, nil)
	var names []string
	for i := range contract.ReconcileChunkMax {
		names = append(names, fmt.Sprintf("c%03d", i))
	}
	level := []contract.ReconcileRequest{contract.NewReconcileRequest(names, 1_800_000_000_000)}
	seen := map[string]int{}
	steps := 0
	for len(level) > 0 {
		steps++
		var next []contract.ReconcileRequest
		for _, r := range level {
			q := &sentRequests{}
			if _, err := o.FanOut(context.Background(), q, r); err != nil {
				t.Fatal(err)
			}
			for _, s := range q.reqs {
				if len(s.Collections) == 1 {
					seen[s.Collections[0]]++
				} else {
					next = append(next, s)
				}
			}
		}
		level = next
	}
	if len(seen) != len(names) || steps > 3 {
		t.Fatalf("reached %d of %d collections in %d steps", len(seen), len(names), steps)
	}
	for c, n := range seen {
		if n != 1 {
			t.Fatalf("%s requested %d times", c, n)
		}
	}
}
