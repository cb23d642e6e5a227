package lease

import (
	"errors"
	"fmt"
)

// Sentinel outcomes (branch with errors.Is). Each is carried by a typed
// error with the evidence (read with errors.As).
var (
	// ErrHeld: another holder's lease is live; the caller must not work.
	ErrHeld = errors.New("lease held by another holder")
	// ErrLost: the caller no longer holds the lease it worked under (its
	// epoch or holder is no longer the stored one); it must stop without
	// reporting.
	ErrLost = errors.New("lease lost")
	// ErrScope: a lease was presented for a task it was not granted for
	// (another task, collection, kind or base); nothing is written with it.
	ErrScope = errors.New("lease used outside its scope")
	// ErrDone: the task was finished; it is never leased again.
	ErrDone = errors.New("task already done")
)

// HeldError is ErrHeld with the live lease that refused the caller.
type HeldError struct {
	TaskID   string
	Holder   string
	Epoch    uint64
	ExpiryMs int64
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("acquire %s: %v: %s until %d (epoch %d)", e.TaskID, ErrHeld, e.Holder, e.ExpiryMs, e.Epoch)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// LostError is ErrLost with what the caller believed it held.
type LostError struct {
	Op     string // "extend" or "complete"
	TaskID string
	Holder string
	Epoch  uint64
}

func (e *LostError) Error() string {
	return fmt.Sprintf("%s %s epoch %d (%s): %v", e.Op, e.TaskID, e.Epoch, e.Holder, ErrLost)
}

// Is makes errors.Is(err, ErrLost) true.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// ScopeError is ErrScope naming the field that differs.
type ScopeError struct {
	TaskID string
	Field  string // task_id, collection, task_kind, base_manifest_version, base_manifest_checksum
	Lease  string // the lease's value
	Used   string // the value of the task it was used for
}

func (e *ScopeError) Error() string {
	return fmt.Sprintf("lease of %s used for another task: %s is %q, the task's is %q: %v", e.TaskID, e.Field, e.Lease, e.Used, ErrScope)
}

// Is makes errors.Is(err, ErrScope) true.
func (e *ScopeError) Is(target error) bool { return target == ErrScope }
