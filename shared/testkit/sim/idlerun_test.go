package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// idleWorld is a quiescent world whose collection c0 has one head, v12,
// written at writtenAt, with an empty object set (its full plan is empty).
func idleWorld(t *testing.T, writtenAt int64) (*World, func(msg string, sentAt int64, delivered string) contract.Task) {
	t.Helper()
	w := newWorld(Config{Seed: 1, Steps: 1})
	w.quiet = true
	sum := "sha256:" + strings.Repeat("ab", 32)
	head := contract.NewTask(contract.KindCompaction, "c0", 12, sum, 1, writtenAt)
	w.cols["c0"] = &collection{name: "c0", inc: contract.Lifetime(head.Incarnation), byVersion: map[uint64]*version{},
		versions: []*version{{v: 12, checksum: sum, objects: map[string]contract.ObjectEntry{}, writtenAt: writtenAt}}}
	facts := uint64(0)
	// lease: the compaction message msg (sent at sentAt, carrying task
	// delivered; "" for the leased task itself) leases a task planned
	// against v12, under another CCS facts version each call (a task of
	// the same head and facts version has one identity: its lease, done,
	// would skip a second one).
	lease := func(msg string, sentAt int64, delivered string) contract.Task {
		facts++
		task := contract.NewTask(contract.KindCompaction, "c0", 12, sum, facts, writtenAt)
		if delivered == "" {
			delivered = task.TaskID
		}
		w.compacting = compactionMsg{id: msg, taskID: delivered, sentAt: sentAt}
		w.checkIdleRun(task)
		w.compacting = compactionMsg{}
		return task
	}
	return w, lease
}

// Seed 7733's shape (invariant idle-reenqueue): four compaction messages
// planned against older heads under four CCS facts versions, all queued
// when v12 was written (the last in the same millisecond), are each
// rebased onto v12 and lease it once; with the three tasks planned
// against v12 itself that maxIdleRuns allows, nothing is violated. The
// backlog does not hide a livelock: one more task planned against v12, a
// rebased message sent after v12 was written, or a backlog message
// leasing v12 a second time is one.
func TestIdleRunBoundCountsTheBacklogApart(t *testing.T) {
	const written = 1_000_000
	backlog := func(w *World, lease func(string, int64, string) contract.Task) {
		for i := range 4 {
			lease(fmt.Sprintf("m-%d", 5+i), written-int64(3-i), fmt.Sprintf("compaction-c0-v%d-old%d", 5+i, i))
		}
	}
	planned := func(lease func(string, int64, string) contract.Task, n int) {
		for i := range n {
			lease(fmt.Sprintf("m-%d", 20+i), written+int64(1+i), "")
		}
	}

	w, lease := idleWorld(t, written)
	backlog(w, lease)
	planned(lease, maxIdleRuns)
	if len(w.violations) > 0 {
		t.Fatalf("a backlog of 4 messages sent before the head and %d tasks planned against it: %v", maxIdleRuns, w.violations)
	}
	if got := w.Counts["idle-head-leased-from-backlog"]; got != 4 {
		t.Fatalf("idle-head-leased-from-backlog = %d, want 4", got)
	}

	w, lease = idleWorld(t, written)
	backlog(w, lease)
	planned(lease, maxIdleRuns+1)
	wantViolation(t, w, "one task planned against the head past maxIdleRuns", "4 compaction tasks planned against")

	w, lease = idleWorld(t, written)
	planned(lease, maxIdleRuns)
	lease("m-40", written+100, "compaction-c0-v11-late") // rebased, but sent after the head was written
	wantViolation(t, w, "a rebased message sent after the head", "4 compaction tasks planned against")

	w, lease = idleWorld(t, written)
	backlog(w, lease)
	lease("m-5", written, "compaction-c0-v5-old0") // the first backlog message again
	wantViolation(t, w, "a backlog message leasing the head twice", "leased the head a second time")
}

func wantViolation(t *testing.T, w *World, what, detail string) {
	t.Helper()
	if len(w.violations) != 1 || w.violations[0].Invariant != "idle-reenqueue" || !strings.Contains(w.violations[0].Detail, detail) {
		t.Fatalf("%s: violations %v, want one idle-reenqueue (%q)", what, w.violations, detail)
	}
}
