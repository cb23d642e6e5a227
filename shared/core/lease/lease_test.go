package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func task() contract.Task {
	return contract.NewTask(contract.KindCompaction, "c1", 5, "sha256:0000000000000000000000000000000000000000000000000000000000000000", 1, t0.UnixMilli())
}

// Scenario runs the lease rules against leases built on a store; it is
// shared with the DynamoDB adapter's test in package e2e.
func TestLeaseRules(t *testing.T) {
	ctx := context.Background()
	l := New(NewMemory(), guard.All())
	tk := task()
	a, err := l.Acquire(ctx, tk, "A", t0, time.Minute)
	if err != nil || a.LeaseEpoch != 1 || a.Holder != "A" || a.LeaseExpiryUnixMs != t0.Add(time.Minute).UnixMilli() {
		t.Fatalf("acquire free: %+v %v", a, err)
	}
	if _, err := l.Acquire(ctx, tk, "B", t0.Add(30*time.Second), time.Minute); !errors.Is(err, ErrHeld) {
		t.Fatalf("acquire live lease of another holder: %v, want ErrHeld", err)
	}
	if a, err = l.Extend(ctx, a, t0.Add(50*time.Second), time.Minute); err != nil {
		t.Fatalf("heartbeat of the holder: %v", err)
	}
	b, err := l.Acquire(ctx, tk, "B", t0.Add(111*time.Second), time.Minute)
	if err != nil || b.LeaseEpoch != 2 {
		t.Fatalf("acquire expired lease: %+v %v", b, err)
	}
	if _, err := l.Extend(ctx, a, t0.Add(112*time.Second), time.Minute); !errors.Is(err, ErrLost) {
		t.Fatalf("heartbeat of the old holder: %v, want ErrLost", err)
	}
	if err := l.Complete(ctx, a, t0); !errors.Is(err, ErrLost) {
		t.Fatalf("complete by the old holder: %v, want ErrLost", err)
	}
	if err := l.Complete(ctx, b, t0.Add(113*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, tk, "C", t0.Add(time.Hour), time.Minute); !errors.Is(err, ErrDone) {
		t.Fatalf("acquire a done task: %v, want ErrDone", err)
	}
}

// Without the lease condition two holders both believe they hold the task.
func TestLeaseConditionGuardMatters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		g       guard.Set
		wantDup bool
	}{{"guarded", guard.All(), false}, {"lease_condition_off", mustWithout(t, "lease_condition"), true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l := New(NewMemory(), tc.g)
			a, err := l.Acquire(ctx, task(), "A", t0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			_, errB := l.Acquire(ctx, task(), "B", t0.Add(time.Second), time.Minute)
			_, errA := l.Extend(ctx, a, t0.Add(2*time.Second), time.Minute)
			dup := errB == nil && errA == nil
			if dup != tc.wantDup {
				t.Fatalf("both holders hold the lease = %v (B: %v, A heartbeat: %v), want %v", dup, errB, errA, tc.wantDup)
			}
		})
	}
}

func mustWithout(t *testing.T, name string) guard.Set {
	g, ok := guard.Without(name)
	if !ok {
		t.Fatal(name)
	}
	return g
}

// Each refusal carries its evidence in a typed error that still matches
// its sentinel.
func TestTypedErrors(t *testing.T) {
	ctx := context.Background()
	l := New(NewMemory(), guard.All())
	tk := task()
	a, err := l.Acquire(ctx, tk, "A", t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(ctx, tk, "B", t0.Add(time.Second), time.Minute)
	var held *HeldError
	if !errors.Is(err, ErrHeld) || !errors.As(err, &held) || held.Holder != "A" || held.Epoch != 1 || held.ExpiryMs != a.LeaseExpiryUnixMs {
		t.Fatalf("held: %v %+v", err, held)
	}
	if _, err := l.Acquire(ctx, tk, "B", t0.Add(2*time.Minute), time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = l.Extend(ctx, a, t0.Add(2*time.Minute), time.Minute)
	var lost *LostError
	if !errors.Is(err, ErrLost) || !errors.As(err, &lost) || lost.Op != "extend" || lost.Holder != "A" || lost.Epoch != 1 {
		t.Fatalf("lost: %v %+v", err, lost)
	}
	other := tk
	other.BaseManifestVersion++
	var scope *ScopeError
	if err := CheckScope(a, other); !errors.Is(err, ErrScope) || !errors.As(err, &scope) || scope.Field != "base_manifest_version" {
		t.Fatalf("scope: %v", err)
	}
	if err := CheckScope(a, tk); err != nil {
		t.Fatalf("own task: %v", err)
	}
}

// The keeper extends only when a heartbeat is due, and its first failure
// sticks.
func TestKeeperBeatsWhenDue(t *testing.T) {
	ctx := context.Background()
	l := New(NewMemory(), guard.All())
	tk := task()
	now := t0
	clock := func() time.Time { return now }
	a, err := l.Acquire(ctx, tk, "A", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeeper(l, a, tk, clock, now, 30*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(29 * time.Second)
	if err := k.Beat(ctx); err != nil || k.Lease().LeaseExpiryUnixMs != a.LeaseExpiryUnixMs {
		t.Fatalf("beat before due extended: %v %d", err, k.Lease().LeaseExpiryUnixMs)
	}
	now = now.Add(time.Second)
	if err := k.Beat(ctx); err != nil || k.Lease().LeaseExpiryUnixMs != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("due beat: %v %d", err, k.Lease().LeaseExpiryUnixMs)
	}
	now = now.Add(2 * time.Minute)
	if _, err := l.Acquire(ctx, tk, "B", now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := k.Beat(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("beat after B took over: %v", err)
	}
	if err := k.Force(ctx); !errors.Is(err, ErrLost) || !errors.Is(k.Err(), ErrLost) {
		t.Fatalf("the failure sticks: %v", err)
	}
}

// appliedRetried is a Store whose Acquire is applied and then retried once
// with the identical request, the retry answering (as the SDK does after a
// lost answer).
type appliedRetried struct{ *Memory }

func (s appliedRetried) Acquire(ctx context.Context, l contract.Lease, nowMs int64, conditional bool) (contract.Lease, State, error) {
	if _, _, err := s.Memory.Acquire(ctx, l, nowMs, conditional); err != nil {
		return contract.Lease{}, State{}, err
	}
	return s.Memory.Acquire(ctx, l, nowMs, conditional)
}

// Our own applied acquire, retried, is our lease (rule 13); with the
// own_write guard off it reads as another holder's and the task would be
// dropped as a duplicate.
func TestAcquireRecognisesOwnAppliedWrite(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		g    guard.Set
		want error
	}{{"guarded", guard.All(), nil}, {"own_write_off", mustWithout(t, "own_write"), ErrHeld}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := NewMemory()
			l := New(appliedRetried{mem}, tc.g)
			got, err := l.Acquire(ctx, task(), "inv-1/m-1", t0, time.Minute)
			if !errors.Is(err, tc.want) || (tc.want == nil && (got.LeaseEpoch != 1 || got.Holder != "inv-1/m-1")) {
				t.Fatalf("acquire: %+v %v, want %v", got, err, tc.want)
			}
			if tc.want != nil {
				return
			}
			// The lease is really ours: heartbeat and complete succeed.
			if got, err = l.Extend(ctx, got, t0.Add(time.Second), time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := l.Complete(ctx, got, t0.Add(2*time.Second)); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Another holder's live lease is still refused, even one written at the
	// same instant with the same duration.
	mem := NewMemory()
	l := New(mem, guard.All())
	if _, err := l.Acquire(ctx, task(), "inv-1/m-1", t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, task(), "inv-2/m-1", t0, time.Minute); !errors.Is(err, ErrHeld) {
		t.Fatalf("another holder: %v, want ErrHeld", err)
	}
}

// The grace floor is exactly two of the holder's heartbeat intervals: a
// lease whose last heartbeat is 2 intervals old is healthy, a millisecond
// later it is suspect; at its expiry it is not held.
func TestClassifyHeartbeatBoundary(t *testing.T) {
	tm := Timing{ClockSkew: time.Minute}
	ctx := context.Background()
	l, err := New(NewMemory(), guard.All()).WithHeartbeat(30*time.Second).Acquire(ctx, task(), "A", t0, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tk := task()
	ev := Evidence{HeadVersion: tk.BaseManifestVersion, HeadChecksum: tk.BaseManifestChecksum}
	for _, tc := range []struct {
		at   time.Duration
		want Class
	}{{time.Minute, ClassHealthy}, {time.Minute + time.Millisecond, ClassSuspect}, {2 * time.Minute, ClassNotHeld}} {
		if got := Classify(State{Lease: l}, ev, t0.Add(tc.at), tm); got.Class != tc.want {
			t.Errorf("at +%s: %s (%s), want %s", tc.at, got.Class, got.Detail, tc.want)
		}
	}
	if got := Classify(State{Lease: l}, Evidence{HeadErr: "timeout"}, t0.Add(time.Second), tm); got.Class != ClassIndeterminate || got.Releasable {
		t.Errorf("head unreadable: %+v", got)
	}
}

// How overdue a holder is comes from its lease record, never from the
// reader's policy (rule 16): the holder's heartbeat time and interval are
// written with every acquire and heartbeat, so a holder with a short
// lease (here 20 s, heartbeat 5 s), heartbeated just now, is healthy
// whatever a reader would assume; it is suspect only after missing two
// of its own heartbeats. A record without them, or with a previous
// holder's left behind (heartbeat before the acquisition), is never
// suspect: it is judged by its expiry.
func TestClassifyJudgesTheHolderByItsRecord(t *testing.T) {
	ctx := context.Background()
	tk := task()
	ev := Evidence{HeadVersion: tk.BaseManifestVersion, HeadChecksum: tk.BaseManifestChecksum}
	tm := Timing{ClockSkew: 10 * time.Second}
	mem := NewMemory()
	l, err := New(mem, guard.All()).WithHeartbeat(5*time.Second).Acquire(ctx, tk, "short", t0, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.HeartbeatAtUnixMs != t0.UnixMilli() || l.HeartbeatMs != 5000 {
		t.Fatalf("the acquisition records no heartbeat: %+v", l)
	}
	if got := Classify(State{Lease: l}, ev, t0.Add(time.Second), tm); got.Class != ClassHealthy {
		t.Errorf("a holder that heartbeated 1 s ago: %s (%s)", got.Class, got.Detail)
	}
	if got := Classify(State{Lease: l}, ev, t0.Add(11*time.Second), tm); got.Class != ClassSuspect {
		t.Errorf("a holder that missed two of its 5 s heartbeats: %s (%s)", got.Class, got.Detail)
	}
	// A heartbeat moves the record's heartbeat time.
	if l, err = New(mem, guard.All()).WithHeartbeat(5*time.Second).Extend(ctx, l, t0.Add(9*time.Second), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	st, _ := mem.Get(tk.TaskID)
	if st.Lease.HeartbeatAtUnixMs != t0.Add(9*time.Second).UnixMilli() || st.Lease.LeaseExpiryUnixMs != l.LeaseExpiryUnixMs {
		t.Fatalf("the heartbeat is not recorded: %+v", st.Lease)
	}
	if got := Classify(st, ev, t0.Add(11*time.Second), tm); got.Class != ClassHealthy {
		t.Errorf("a holder that heartbeated 2 s ago: %s (%s)", got.Class, got.Detail)
	}
	// No heartbeat recorded (a holder recording none), or a previous
	// holder's left behind: never suspect, judged by the expiry.
	none, err := New(NewMemory(), guard.All()).Acquire(ctx, tk, "silent", t0, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	left := l
	left.Holder, left.LeaseEpoch, left.AcquiredAtUnixMs, left.LeaseExpiryUnixMs = "later", 2, t0.Add(40*time.Second).UnixMilli(), t0.Add(70*time.Second).UnixMilli()
	for name, rec := range map[string]contract.Lease{"none": none, "left behind": left} {
		for _, at := range []time.Duration{time.Second, 19 * time.Second} {
			at := t0.Add(at)
			if rec.AcquiredAtUnixMs > t0.UnixMilli() {
				at = at.Add(40 * time.Second)
			}
			if got := Classify(State{Lease: rec}, ev, at, tm); got.Class != ClassHealthy || got.Releasable || got.HeartbeatAge != "" {
				t.Errorf("%s: %s (%s), want healthy: no heartbeat of its holder's to judge", name, got.Class, got.Detail)
			}
		}
	}
}

// A lease whose fence names another collection (or base) than the task
// its id names is refused before any write: ErrScope, not a heartbeat of
// someone else's record.
func TestLeaseUsedOutsideItsCollectionIsErrScope(t *testing.T) {
	ctx := context.Background()
	l := New(NewMemory(), guard.All())
	a, err := l.Acquire(ctx, task(), "A", t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range []func(*contract.Lease){
		func(x *contract.Lease) { x.Collection = "c2" },
		func(x *contract.Lease) { x.BaseManifestVersion++ },
		func(x *contract.Lease) { x.Kind = contract.KindGC },
	} {
		bad := a
		edit(&bad)
		if _, err := l.Extend(ctx, bad, t0.Add(time.Second), time.Minute); !errors.Is(err, ErrScope) {
			t.Errorf("extend %+v: %v, want ErrScope", bad, err)
		}
		if err := l.Complete(ctx, bad, t0.Add(time.Second)); !errors.Is(err, ErrScope) {
			t.Errorf("complete %+v: %v, want ErrScope", bad, err)
		}
	}
	if _, err := l.Extend(ctx, a, t0.Add(time.Second), time.Minute); err != nil {
		t.Fatalf("the lease itself: %v", err)
	}
}
