package lease

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
)

// a task whose identity takes the short form (contract.TaskID
// leaves the collection out past MaxTaskIDLength) must be leasable end to
// end: acquire, heartbeat, complete, and Classify must not call its record
// an identity mismatch.
func TestShortFormTaskIsLeasable(t *testing.T) {
	ctx := context.Background()
	c := strings.Repeat("c", 63)
	tk := contract.NewTask(contract.KindCompaction, c, math.MaxUint64, "sha256:"+strings.Repeat("ab", 32), 3, t0.UnixMilli()).In(math.MaxUint64)
	if strings.Contains(tk.TaskID, c) {
		t.Fatalf("expected the short form, got %q", tk.TaskID)
	}
	l := New(NewMemory(), guard.All())
	a, err := l.Acquire(ctx, tk, "A", t0, time.Minute)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := l.Extend(ctx, a, t0.Add(10*time.Second), time.Minute); err != nil {
		t.Errorf("heartbeat of a short-form task: %v", err)
	}
	if err := l.Complete(ctx, a, t0.Add(20*time.Second)); err != nil {
		t.Errorf("complete of a short-form task: %v", err)
	}
	if r := Classify(State{Lease: a}, Evidence{}, t0.Add(time.Second), Timing{ClockSkew: time.Minute}); r.Class == ClassIdentityMismatch {
		t.Errorf("Classify: %s: %s", r.Class, r.Detail)
	}
}

// the lease of a base-less tombstone cleanup of incarnation 2
// (reconcile.go: the dropped lifetime's head is gone) can be heartbeaten
// and completed.
func TestBaselessTombstoneCleanupOfLaterLifetimeIsLeasable(t *testing.T) {
	ctx := context.Background()
	tk := contract.NewSweepTask(contract.KindTombstoneCleanup, "orders", 0, "", 4, t0.UnixMilli()).In(2)
	l := New(NewMemory(), guard.All())
	a, err := l.Acquire(ctx, tk, "A", t0, time.Minute)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := l.Extend(ctx, a, t0.Add(10*time.Second), time.Minute); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
	if err := l.Complete(ctx, a, t0.Add(20*time.Second)); err != nil {
		t.Errorf("complete: %v", err)
	}
}
