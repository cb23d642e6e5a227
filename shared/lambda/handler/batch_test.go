package handler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
)

func batchOf(groups ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, g := range groups {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: g + string(rune('0'+i)), Attributes: map[string]string{"MessageGroupId": g}})
	}
	return ev
}

func failedIDs(r events.SQSEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// A failing record holds back only its own group: the later records of
// that group fail with it, other groups' records run. With
// group_isolation off every later record fails.
func TestBatchFailsOnlyTheFailingGroup(t *testing.T) {
	ev := batchOf("a", "b", "a", "c", "b")
	fails := func(r events.SQSMessage) bool { return r.MessageId == "a0" }
	off, _ := guard.Without("group_isolation")
	for _, tc := range []struct {
		name        string
		g           guard.Set
		ran, failed []string
	}{
		{"guarded", guard.All(), []string{"a0", "b1", "c3", "b4"}, []string{"a0", "a2"}},
		{"group_isolation_off", off, []string{"a0"}, []string{"a0", "b1", "a2", "c3", "b4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			b := Batch{Reserve: time.Second, Guards: tc.g}
			resp := b.walk(context.Background(), ev, slog.New(slog.DiscardHandler), metrics.New("t"), func(r events.SQSMessage) error {
				ran = append(ran, r.MessageId)
				if fails(r) {
					return errors.New("owner down")
				}
				return nil
			})
			if !slices.Equal(ran, tc.ran) || !slices.Equal(failedIDs(resp), tc.failed) {
				t.Fatalf("ran %v failed %v, want ran %v failed %v", ran, failedIDs(resp), tc.ran, tc.failed)
			}
		})
	}
}

// With no more than the reserve left, no record is started: every one is
// reported failed, untouched.
func TestBatchStopsWhenTheInvocationRunsOutOfTime(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Second))
	defer cancel()
	var ran int
	b := Batch{Reserve: time.Hour, Guards: guard.All()}
	resp := b.walk(ctx, batchOf("a", "b"), slog.New(slog.DiscardHandler), metrics.New("t"), func(events.SQSMessage) error { ran++; return nil })
	if ran != 0 || len(resp.BatchItemFailures) != 2 {
		t.Fatalf("ran %d, failed %v: want nothing started and both returned", ran, failedIDs(resp))
	}
	// No deadline (a test invoking directly): every record runs.
	resp = b.walk(context.Background(), batchOf("a", "b"), slog.New(slog.DiscardHandler), metrics.New("t"), func(events.SQSMessage) error { ran++; return nil })
	if ran != 2 || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("without a deadline: ran %d failed %v", ran, failedIDs(resp))
	}
}
