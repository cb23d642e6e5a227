package handoff

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/guard"
)

// writtenAt dates every key at the same time (a bucket where every output
// exists).
type writtenAt time.Time

func (w writtenAt) WrittenAt(_ context.Context, keys []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(keys))
	for _, k := range keys {
		out[k] = time.Time(w)
	}
	return out, nil
}

// datedOutputs dates the keys it holds; any other key is missing.
type datedOutputs struct {
	at  map[string]time.Time
	err error
}

func (d datedOutputs) WrittenAt(_ context.Context, keys []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, k := range keys {
		if t, ok := d.at[k]; ok {
			out[k] = t
		}
	}
	return out, d.err
}

// Guard cutover_from_written: not_after counts from the earlier of the
// claimed start and the earliest LastModified of the outputs the cutover
// adds, so it never outlasts GC's never-committed reclaim of them (write +
// cutover_deadline + 2 x skew). A start claimed 10 minutes after the
// output's write (a skewed worker, a retry that kept a crashed attempt's
// output) gets not_after = write + deadline; with the guard off, start +
// deadline. The age against the task lifetime counts from the write too.
func TestNotAfterCountsFromTheOutputsWrite(t *testing.T) {
	off, _ := guard.Without("cutover_from_written")
	for _, g := range []guard.Set{guard.All(), off} {
		lin := newLineage(5)
		pub := &notAfterPublisher{fakePublisher: fakePublisher{lin: lin}}
		h, _ := newHandoff(lin, pub, g)
		now := h.now()
		c := completion(5, now)
		written := now.Add(-10 * time.Minute)
		h.WithWritten(datedOutputs{at: map[string]time.Time{c.Coverage.Added[0].Key: written}})
		res, err := h.Process(context.Background(), c)
		if err != nil || res.Outcome != OutcomeAccepted || len(pub.notAfter) != 1 {
			t.Fatalf("guard %v: %s (%s) %v, %d requests", g.CutoverFromWritten, res.Outcome, res.Reason, err, len(pub.notAfter))
		}
		want := written.Add(h.cfg.CutoverDeadline).UnixMilli()
		if !g.CutoverFromWritten {
			want = now.Add(h.cfg.CutoverDeadline).UnixMilli()
		}
		if pub.notAfter[0] != want {
			t.Fatalf("guard %v: not_after %s after the write, want %s", g.CutoverFromWritten,
				time.UnixMilli(pub.notAfter[0]).Sub(written), time.UnixMilli(want).Sub(written))
		}

		// Outputs written longer ago than the task lifetime: expired,
		// whatever start the completion claims.
		lin = newLineage(5)
		pub = &notAfterPublisher{fakePublisher: fakePublisher{lin: lin}}
		h, m := newHandoff(lin, pub, g)
		c = completion(5, now)
		h.WithWritten(datedOutputs{at: map[string]time.Time{c.Coverage.Added[0].Key: now.Add(-16 * time.Minute)}})
		res, err = h.Process(context.Background(), c)
		if expired := err == nil && res.Outcome == OutcomeExpired && len(pub.notAfter) == 0 && m.Counts()["ExpiredResultsDropped|Kind=compaction"] == 1; expired != g.CutoverFromWritten {
			t.Fatalf("guard %v: outputs written 16 min ago: %s (%s) %v, %d requests", g.CutoverFromWritten, res.Outcome, res.Reason, err, len(pub.notAfter))
		}
	}
}

// An output the cutover names that is not in the bucket (GC reclaimed it,
// or it was never written) is never handed to the publisher: the handoff
// rejects the result, as the publisher would. No dating configured:
// nothing is handed off (fail closed). A listing that fails: retried later
// (an error).
func TestUndatableOutputsAreNotHandedOff(t *testing.T) {
	for name, w := range map[string]Written{
		"missing output": datedOutputs{at: map[string]time.Time{}},
		"no dating":      nil,
	} {
		lin := newLineage(5)
		pub := &notAfterPublisher{fakePublisher: fakePublisher{lin: lin}}
		h, _ := newHandoff(lin, pub, guard.All())
		h.written = w
		res, err := h.Process(context.Background(), completion(5, h.now()))
		if err != nil || res.Outcome != OutcomeRejected || len(pub.notAfter) != 0 {
			t.Fatalf("%s: %s (%s) %v, %d requests", name, res.Outcome, res.Reason, err, len(pub.notAfter))
		}
		if name == "missing output" && !strings.Contains(res.Reason, "not in the bucket") {
			t.Fatalf("%s: reason %q", name, res.Reason)
		}
	}
	lin := newLineage(5)
	pub := &notAfterPublisher{fakePublisher: fakePublisher{lin: lin}}
	h, _ := newHandoff(lin, pub, guard.All())
	boom := errors.New("list: throttled")
	h.WithWritten(datedOutputs{err: boom})
	if _, err := h.Process(context.Background(), completion(5, h.now())); !errors.Is(err, boom) || len(pub.notAfter) != 0 {
		t.Fatalf("a failed listing: %v, %d requests", err, len(pub.notAfter))
	}
}
