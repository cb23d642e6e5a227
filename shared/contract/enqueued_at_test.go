package contract

import (
	"strings"
	"testing"
)

// A task enqueued by a writer takes the writer's clock (rule 16): its
// enqueued_at, and a sweep task's sweep time (a lifecycle transition's
// cutoff) with the identity that names it; a task of the head alone keeps
// its identity.
func TestEnqueuedAtTakesTheWritersClock(t *testing.T) {
	sum := "sha256:" + strings.Repeat("a", 64)
	planned, now := int64(1_764_000_000_000), int64(1_764_021_600_123) // six hours later
	for _, tk := range []Task{
		NewSweepTask(KindLifecycleTransition, "c1", 3, sum, 2, planned).In(2),
		NewSweepTask(KindGC, "c1", 3, sum, 2, planned),
		NewRetentionReclaimTask("c1", 3, sum, 2, planned-1000, planned),
	} {
		got := tk.EnqueuedAt(now)
		want := NewSweepTask(tk.Kind, tk.Collection, tk.BaseManifestVersion, tk.BaseManifestChecksum, tk.CCSFactsVersion, now).In(tk.Inc())
		if got.SweepUnixMs != SweepMinute(now) || got.EnqueuedAtUnixMs != now || got.TaskID != want.TaskID {
			t.Errorf("%s: sweep %d enqueued %d id %s; want sweep %d, enqueued %d, id %s", tk.Kind, got.SweepUnixMs, got.EnqueuedAtUnixMs, got.TaskID, SweepMinute(now), now, want.TaskID)
		}
		b, err := Encode(got)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeTask("m", b); err != nil {
			t.Errorf("%s: the restamped task is not valid: %v", tk.Kind, err)
		}
		if tk.Kind == KindRetentionReclaim && got.DueUnixMs != tk.DueUnixMs {
			t.Errorf("the due time (a hint) changed: %d", got.DueUnixMs)
		}
	}
	head := NewTask(KindCompaction, "c1", 3, sum, 2, planned)
	if got := head.EnqueuedAt(now); got.TaskID != head.TaskID || got.EnqueuedAtUnixMs != now || got.SweepUnixMs != 0 {
		t.Errorf("a task of its head alone: %+v", got)
	}
}
