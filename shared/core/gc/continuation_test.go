package gc

import (
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// A sweep that stopped at its bound and deleted something continues as a
// fresh task (its own identity, the same base) at the tail of the queue;
// one that deleted nothing, was refused or blocked, or is not a sweep,
// does not.
func TestContinuationOfABoundedSweep(t *testing.T) {
	sum := "sha256:" + strings.Repeat("b", 64)
	now := time.UnixMilli(1_800_000_060_000) // on a minute
	task := contract.NewSweepTask(contract.KindGC, "c1", 7, sum, 3, now.UnixMilli()).In(2)
	more := Report{More: true, ObjectsDeleted: 8}
	next, ok := Continuation(task, more, now)
	if !ok || next.TaskID == task.TaskID || next.Kind != contract.KindGC || next.Inc() != 2 || next.BaseManifestVersion != 7 || next.SweepUnixMs%60000 == 0 {
		t.Fatalf("continuation %+v (ok %v) of %+v", next, ok, task)
	}
	b, err := contract.Encode(next)
	if err == nil {
		_, err = contract.DecodeTask("m", b)
	}
	if err != nil {
		t.Fatalf("continuation does not decode: %v", err)
	}
	rr := contract.NewRetentionReclaimTask("c1", 7, sum, 3, 5, now.UnixMilli())
	if next, ok := Continuation(rr, more, now); !ok || next.DueUnixMs != 5 || next.Kind != contract.KindRetentionReclaim {
		t.Fatalf("retention_reclaim continuation %+v %v", next, ok)
	}
	for name, tc := range map[string]struct {
		task contract.Task
		rep  Report
	}{
		"complete":          {task, Report{ObjectsDeleted: 8}},
		"deleted nothing":   {task, Report{More: true, AlreadyGone: 8}},
		"refused":           {task, Report{More: true, ObjectsDeleted: 1, Refused: "head_regression"}},
		"blocked":           {task, Report{More: true, ObjectsDeleted: 1, Blocked: "watermark"}},
		"tombstone cleanup": {contract.NewSweepTask(contract.KindTombstoneCleanup, "c1", 7, sum, 3, now.UnixMilli()), more},
	} {
		if _, ok := Continuation(tc.task, tc.rep, now); ok {
			t.Errorf("%s: continued", name)
		}
	}
}
