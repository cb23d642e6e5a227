package handoff

import (
	"context"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
)

// A forged rewrite completion of each kind is refused before the publisher
// is asked, and counted by check (ForgedCompletions); the executor's real
// reports, compaction and transition, still land. With the guard off every
// forgery is submitted and the publisher (which checks only the base)
// applies it.
func TestForgedCompletionsAreRefused(t *testing.T) {
	other := contract.NewTask(contract.KindCompaction, "c1", 4, sum(4), 0, 0).TaskID
	deleted := input
	deleted.Key, deleted.DeleteCount = "collections/c1/data/l0/all-deleted.seg", 10
	real := func() contract.Completion { return completion(5, t0) }
	transition := func() contract.Completion {
		c := completion(5, t0)
		c.Kind, c.SweepUnixMs = contract.KindLifecycleTransition, t0.UnixMilli()
		reissue(&c)
		return c
	}
	for _, tc := range []struct {
		name  string
		forge func() contract.Completion
		check string // "" = a real report: accepted
		// covered: the coverage check refuses it too when provenance is
		// off (defense in depth); otherwise the publisher applies it.
		covered bool
	}{
		{"real compaction", real, "", false},
		{"real transition", transition, "", false},
		{"real merge of records all deleted: one empty output", func() contract.Completion {
			c := real()
			c.Coverage.Removed[0] = deleted
			c.Coverage.Added[0] = contract.ObjectEntry{Key: c.Coverage.Added[0].Key, Level: 1}
			return c
		}, "", false},
		{"a task id nobody issued, removing everything, adding nothing", func() contract.Completion {
			c := real()
			c.TaskID, c.Coverage.Added = "forged", nil
			return c
		}, CheckTaskIdentity, false},
		{"the identity of another base", func() contract.Completion {
			c := real()
			c.TaskID = other
			return c
		}, CheckTaskIdentity, false},
		{"a sweep time the task does not have", func() contract.Completion {
			c := real()
			c.SweepUnixMs = 60000
			return c
		}, CheckTaskIdentity, false},
		{"a real identity adding nothing", func() contract.Completion {
			c := real()
			c.Coverage.Added = nil
			return c
		}, CheckEmptyRewrite, false},
		{"another task's output", func() contract.Completion {
			c := real()
			c.Coverage.Added[0].Key = contract.RewriteOutputKey("c1", 1, other, 0)
			return c
		}, CheckForeignOutput, false},
		{"an append's key", func() contract.Completion {
			c := real()
			c.Coverage.Added[0].Key, c.Coverage.Added[0].Level = contract.AppendSegmentKey("c1", 1, 9, 0), 0
			return c
		}, CheckForeignOutput, false},
		{"an output named twice", func() contract.Completion {
			c := real()
			c.Coverage.Added = append(c.Coverage.Added, c.Coverage.Added[0])
			c.Coverage.Added[0].DocCount, c.Coverage.Added[1].DocCount = 5, 5
			return c
		}, CheckForeignOutput, true},
		{"fewer records than the inputs keep", func() contract.Completion {
			c := real()
			c.Coverage.Added[0].DocCount = 1
			return c
		}, CheckConservation, false},
		{"more records than the inputs hold", func() contract.Completion {
			c := real()
			c.Coverage.Added[0].DocCount = 11
			return c
		}, CheckConservation, false},
		{"a key range the inputs do not span", func() contract.Completion {
			c := real()
			c.Coverage.Added[0].MinRecordKey = "k00"
			return c
		}, CheckConservation, false},
		{"a narrower key range with no delete to drop", func() contract.Completion {
			c := real()
			c.Coverage.Added[0].MaxRecordKey = "k15"
			return c
		}, CheckConservation, false},
		{"a seq range the inputs do not span", func() contract.Completion {
			c := real()
			c.Coverage.Added[0].MaxSeq = 99
			return c
		}, CheckConservation, false},
		{"an empty output for inputs holding live records", func() contract.Completion {
			c := real()
			c.Coverage.Added[0] = contract.ObjectEntry{Key: c.Coverage.Added[0].Key, Level: 1}
			return c
		}, CheckConservation, false},
		{"a transition that is not a copy", func() contract.Completion {
			c := transition()
			c.Coverage.Added[0].DocCount = 1
			return c
		}, CheckConservation, false},
		{"a transition adding two for one", func() contract.Completion {
			c := transition()
			extra := c.Coverage.Added[0]
			extra.Key = contract.RewriteOutputKey("c1", 0, c.TaskID, 1)
			c.Coverage.Added = append(c.Coverage.Added, extra)
			return c
		}, CheckConservation, false},
	} {
		for _, g := range []guard.Set{guard.All(), withoutG("handoff_provenance")} {
			t.Run(tc.name+map[bool]string{true: "", false: "/unguarded"}[g.HandoffProvenance], func(t *testing.T) {
				lin := newLineage(5)
				lin.held[deleted.Key] = deleted
				pub := &fakePublisher{lin: lin}
				h, m := newHandoff(lin, pub, g)
				res, err := h.Process(context.Background(), tc.forge())
				switch {
				case err != nil:
					t.Fatal(err)
				case tc.covered && !g.HandoffProvenance:
					if res.Outcome != OutcomeRejectedCoverage || pub.calls != 0 {
						t.Fatalf("%s %q, %d cutovers: want %s", res.Outcome, res.Reason, pub.calls, OutcomeRejectedCoverage)
					}
				case tc.check == "" || !g.HandoffProvenance:
					if res.Outcome != OutcomeAccepted || pub.calls != 1 {
						t.Fatalf("%s %q, %d cutovers: want accepted", res.Outcome, res.Reason, pub.calls)
					}
				default:
					if res.Outcome != OutcomeRejectedProvenance || !strings.HasPrefix(res.Reason, tc.check+":") || pub.calls != 0 {
						t.Fatalf("%s %q, %d cutovers: want %s by %s", res.Outcome, res.Reason, pub.calls, OutcomeRejectedProvenance, tc.check)
					}
					if n := m.Counts()["ForgedCompletions|Check="+tc.check]; n != 1 {
						t.Fatalf("ForgedCompletions by %s = %v (%v)", tc.check, n, m.Counts())
					}
				}
			})
		}
	}
}
