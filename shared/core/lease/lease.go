package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/store"
)

// State is a stored lease record.
type State struct {
	Lease contract.Lease
	Done  bool
}

// Store keeps lease records (the coordinator table). Conditional methods
// refuse with an error wrapping store.ErrConditionFailed and, where they
// can, return the stored state that refused them.
type Store interface {
	// Acquire writes l with epoch = stored epoch + 1 (1 when none) and
	// returns the written lease. When conditional, only if no record exists
	// or the record is not done and its expiry is <= nowMs.
	Acquire(ctx context.Context, l contract.Lease, nowMs int64, conditional bool) (contract.Lease, State, error)
	// Extend sets the expiry of taskID and records nowMs as its
	// heartbeat. When conditional, only while the stored epoch and holder
	// equal epoch and holder and it is not done.
	Extend(ctx context.Context, taskID, holder string, epoch uint64, nowMs, expiryMs int64, conditional bool) error
	// Complete marks taskID done. When conditional, only while the stored
	// epoch and holder equal epoch and holder.
	Complete(ctx context.Context, taskID, holder string, epoch uint64, nowMs int64, conditional bool) error
}

// Leases is the use case.
type Leases struct {
	store       Store
	conditional bool
	ownWrite    bool
	// heartbeat is the interval its holders heartbeat at, recorded in
	// every lease they take (0: not recorded, and then no reader may call
	// them overdue before their leases expire).
	heartbeat time.Duration
}

// New returns the use case; g.LeaseCondition chooses conditional writes
// and g.OwnWrite the recognition of our own applied acquire (both always
// on in production).
func New(s Store, g guard.Set) *Leases {
	return &Leases{store: s, conditional: g.LeaseCondition, ownWrite: g.OwnWrite}
}

// WithHeartbeat records every in each lease taken: the interval the
// holders heartbeat at (their Keeper's), so the record itself says when
// a holder is overdue (Classify), whatever lease policy its reader holds.
func (l *Leases) WithHeartbeat(every time.Duration) *Leases {
	c := *l
	c.heartbeat = every
	return &c
}

// ownAcquire reports whether the record that refused want is want itself:
// our earlier attempt of this very acquire, applied but its answer lost,
// then retried by the SDK. The holder names one invocation and message and
// acquired-at and expiry are this attempt's, so no other acquire wrote it.
func ownAcquire(cur State, want contract.Lease) bool {
	l := cur.Lease
	return !cur.Done && l.LeaseEpoch > 0 && l.Holder == want.Holder && l.AcquiredAtUnixMs == want.AcquiredAtUnixMs &&
		l.LeaseExpiryUnixMs == want.LeaseExpiryUnixMs && l.BaseManifestVersion == want.BaseManifestVersion &&
		l.BaseManifestChecksum == want.BaseManifestChecksum
}

// OwnRelease reports whether cur, the record that refused a release of l
// by `by` at nowMs (an operator's recover), is that very release: our
// earlier attempt, applied and then retried by the SDK after its answer
// was lost (epoch one past l's, holder by, expired and re-acquired-at
// nowMs). The release then succeeded (SYSTEM rule 13).
func OwnRelease(cur State, l contract.Lease, by string, nowMs int64) bool {
	c := cur.Lease
	return !cur.Done && c.LeaseEpoch == l.LeaseEpoch+1 && c.Holder == by && c.LeaseExpiryUnixMs == nowMs && c.AcquiredAtUnixMs == nowMs
}

// Acquire takes task's lease for holder until now+d.
func (l *Leases) Acquire(ctx context.Context, task contract.Task, holder string, now time.Time, d time.Duration) (contract.Lease, error) {
	want := contract.Lease{
		TaskID: task.TaskID, Kind: task.Kind, Collection: task.Collection,
		BaseManifestVersion: task.BaseManifestVersion, BaseManifestChecksum: task.BaseManifestChecksum,
		LeaseExpiryUnixMs: now.Add(d).UnixMilli(), Holder: holder, AcquiredAtUnixMs: now.UnixMilli(),
		HeartbeatAtUnixMs: now.UnixMilli(), HeartbeatMs: l.heartbeat.Milliseconds(),
	}
	got, cur, err := l.store.Acquire(ctx, want, now.UnixMilli(), l.conditional)
	switch {
	case err == nil:
		return got, nil
	case errors.Is(err, store.ErrConditionFailed) && l.ownWrite && ownAcquire(cur, want):
		return cur.Lease, nil
	case errors.Is(err, store.ErrConditionFailed) && cur.Done:
		return cur.Lease, fmt.Errorf("acquire %s: %w (epoch %d)", task.TaskID, ErrDone, cur.Lease.LeaseEpoch)
	case errors.Is(err, store.ErrConditionFailed):
		return cur.Lease, &HeldError{TaskID: task.TaskID, Holder: cur.Lease.Holder, Epoch: cur.Lease.LeaseEpoch, ExpiryMs: cur.Lease.LeaseExpiryUnixMs}
	}
	return contract.Lease{}, fmt.Errorf("acquire %s: %w", task.TaskID, err)
}

// Extend heartbeats the lease until now+d.
func (l *Leases) Extend(ctx context.Context, ls contract.Lease, now time.Time, d time.Duration) (contract.Lease, error) {
	if err := selfScope(ls); err != nil {
		return ls, err
	}
	exp := now.Add(d).UnixMilli()
	err := l.store.Extend(ctx, ls.TaskID, ls.Holder, ls.LeaseEpoch, now.UnixMilli(), exp, l.conditional)
	switch {
	case err == nil:
		ls.LeaseExpiryUnixMs, ls.HeartbeatAtUnixMs = exp, now.UnixMilli()
		return ls, nil
	case errors.Is(err, store.ErrConditionFailed):
		return ls, &LostError{Op: "extend", TaskID: ls.TaskID, Holder: ls.Holder, Epoch: ls.LeaseEpoch}
	}
	return ls, fmt.Errorf("extend %s: %w", ls.TaskID, err)
}

// Complete marks the task done while the lease is still ours.
func (l *Leases) Complete(ctx context.Context, ls contract.Lease, now time.Time) error {
	if err := selfScope(ls); err != nil {
		return err
	}
	err := l.store.Complete(ctx, ls.TaskID, ls.Holder, ls.LeaseEpoch, now.UnixMilli(), l.conditional)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrConditionFailed):
		return &LostError{Op: "complete", TaskID: ls.TaskID, Holder: ls.Holder, Epoch: ls.LeaseEpoch}
	}
	return fmt.Errorf("complete %s: %w", ls.TaskID, err)
}

// CheckScope returns a *ScopeError when ls was not granted for task: a
// lease fences one task identity (its id, collection, kind and base), so
// a holder that presents it for anything else is refused before it writes.
func CheckScope(ls contract.Lease, task contract.Task) error {
	for _, f := range []struct{ name, lease, used string }{
		{"task_id", ls.TaskID, task.TaskID},
		{"collection", ls.Collection, task.Collection},
		{"task_kind", string(ls.Kind), string(task.Kind)},
		{"base_manifest_version", fmt.Sprint(ls.BaseManifestVersion), fmt.Sprint(task.BaseManifestVersion)},
		{"base_manifest_checksum", ls.BaseManifestChecksum, task.BaseManifestChecksum},
	} {
		if f.lease != f.used {
			return &ScopeError{TaskID: ls.TaskID, Field: f.name, Lease: f.lease, Used: f.used}
		}
	}
	return nil
}

// selfScope returns a *ScopeError when the lease's fence (kind,
// collection, base version) is not the task its id names: the record a
// write with it would address is another collection's or another base's
// task (task ids are "<kind>-<collection>-v<base>-<hash>").
func selfScope(ls contract.Lease) error {
	// The identity names the lease's kind, collection (unless it is the
	// short form of a long one, contract.TaskID) and base version; the
	// incarnation it names is the lease's own (TaskIncarnation).
	_, version, ok := contract.ParseTaskID(ls.Kind, ls.Collection, ls.TaskID)
	if !ok || version != ls.BaseManifestVersion {
		return &ScopeError{TaskID: ls.TaskID, Field: "task_id", Lease: ls.TaskID,
			Used: fmt.Sprintf("an identity of a %s task of %s at base version %d", ls.Kind, ls.Collection, ls.BaseManifestVersion)}
	}
	return nil
}
