package lease

import (
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/policy"
)

// Class is the stalled-lease verdict of one lease record: never a boolean,
// each class names what an operator may do about it (docs/operations.md
// "Leases and recovery" defines each for this coordinator).
type Class string

// Classes.
const (
	// ClassHealthy: live, heartbeat within the grace floor (2 heartbeats).
	ClassHealthy Class = "healthy"
	// ClassSuspect: live, but the holder has missed its heartbeats for more
	// than the grace floor; it will expire on its own at its expiry, and a
	// confirmed recover may release it sooner.
	ClassSuspect Class = "suspect-heartbeat-overdue"
	// ClassTerminal: live, but the task it fences can no longer succeed:
	// the head moved past the task's base (its result would be dropped as
	// stale) or CCS tombstoned the collection.
	ClassTerminal Class = "terminal-contradiction"
	// ClassIdentityMismatch: the record's fence (kind, collection, base
	// version) is not the task its key names: something other than the
	// coordinator wrote it. Never released automatically.
	ClassIdentityMismatch Class = "identity-mismatch"
	// ClassNotHeld: expired or done: nothing holds it, the next delivery
	// of the task takes it (or skips a done task). Nothing to recover.
	ClassNotHeld Class = "lease-not-held"
	// ClassInvalid: the record cannot be a lease (missing holder, epoch,
	// expiry, unknown kind, bad collection name).
	ClassInvalid Class = "invalid"
	// ClassIndeterminate: the evidence is incomplete (the head could not
	// be read) or contradictory (a heartbeat from the future beyond the
	// clock skew bound). Refuse; never release.
	ClassIndeterminate Class = "indeterminate"
)

// Evidence is what the classification joins to a lease record besides the
// clock: the collection's committed head and CCS facts as read for the
// same snapshot.
type Evidence struct {
	HeadVersion  uint64
	HeadChecksum string
	HeadErr      string // the head could not be read (empty: read)
	NoHead       bool   // the collection has no head
	Tombstoned   bool
	FactsErr     string // CCS could not be read (empty: read)
}

// Timing is what the reader contributes to a judgement: the clock skew
// allowance (a heartbeat or acquisition further in the future is
// contradictory). How overdue a holder is comes from the record alone
// (contract.Lease.Heartbeat), never from the reader's lease duration or
// heartbeat interval: those are an input (rule 16), and a reader holding
// shorter ones than the holder's would call a healthy holder overdue.
type Timing struct {
	ClockSkew time.Duration // clock_skew_ms
}

// Report is one classified lease with its evidence.
type Report struct {
	Lease        contract.Lease `json:"lease"`
	Done         bool           `json:"done"`
	Class        Class          `json:"class"`
	Detail       string         `json:"detail"`
	HeartbeatAge string         `json:"heartbeat_age,omitempty"` // since the last heartbeat the record carries
	ExpiresIn    string         `json:"expires_in,omitempty"`
	// Releasable: a confirmed recover may release it (suspect or
	// terminal-contradiction), with a write conditioned on exactly this
	// epoch, holder and expiry.
	Releasable bool `json:"releasable"`
}

// Classify judges one lease record at now. It reads nothing and writes
// nothing.
//
// How overdue the holder is comes from the record alone: its last
// heartbeat and its interval as the holder wrote them. A record that does
// not carry them for its current acquisition (written before leases
// recorded them, or by a holder that records none) is never suspect: it
// is judged by its expiry, which frees it on its own.
func Classify(st State, ev Evidence, now time.Time, t Timing) Report {
	l := st.Lease
	r := Report{Lease: l, Done: st.Done}
	set := func(c Class, format string, args ...any) Report {
		r.Class, r.Detail = c, fmt.Sprintf(format, args...)
		r.Releasable = c == ClassSuspect || c == ClassTerminal
		return r
	}
	switch {
	case l.TaskID == "" || l.Holder == "" || l.LeaseEpoch == 0 || l.LeaseExpiryUnixMs <= 0:
		return set(ClassInvalid, "record lacks a task id, holder, epoch or expiry")
	case !l.Kind.Valid() || !contract.ValidCollection(l.Collection) || l.BaseManifestVersion == 0 && !baseless(l):
		return set(ClassInvalid, "record has kind %q, collection %q, base v%d", l.Kind, l.Collection, l.BaseManifestVersion)
	}
	if selfScope(l) != nil {
		return set(ClassIdentityMismatch, "the record fences %s of %s at v%d, its key names task %s", l.Kind, l.Collection, l.BaseManifestVersion, l.TaskID)
	}
	expiry := time.UnixMilli(l.LeaseExpiryUnixMs)
	if st.Done {
		return set(ClassNotHeld, "task finished (epoch %d, %s)", l.LeaseEpoch, l.Holder)
	}
	if !expiry.After(now) {
		return set(ClassNotHeld, "expired %s ago (epoch %d, %s): the next delivery takes it", now.Sub(expiry).Round(time.Millisecond), l.LeaseEpoch, l.Holder)
	}
	r.ExpiresIn = expiry.Sub(now).Round(time.Millisecond).String()
	beat, every, known := l.Heartbeat()
	if known {
		r.HeartbeatAge = now.Sub(beat).Round(time.Millisecond).String()
	}
	acquired := time.UnixMilli(l.AcquiredAtUnixMs)
	switch {
	case known && beat.After(now.Add(t.ClockSkew)) || acquired.After(now.Add(t.ClockSkew)):
		return set(ClassIndeterminate, "heartbeat or acquisition %s in the future, beyond the clock skew bound %s", later(beat, acquired).Sub(now).Round(time.Millisecond), t.ClockSkew)
	case ev.HeadErr != "":
		return set(ClassIndeterminate, "live lease, but the head could not be read: %s", ev.HeadErr)
	}
	if why := contradiction(l, ev); why != "" {
		return set(ClassTerminal, "%s", why)
	}
	switch {
	case ev.FactsErr != "":
		return set(ClassIndeterminate, "live lease, but CCS could not be read: %s", ev.FactsErr)
	case !known:
		return set(ClassHealthy, "the record carries no heartbeat of its holder's (written by a holder that records none): judged by its expiry only, it expires in %s", r.ExpiresIn)
	case now.Sub(beat) > time.Duration(policy.MinLeaseHeartbeats)*every:
		return set(ClassSuspect, "no heartbeat for %s (more than %d x its %s interval); expires in %s", now.Sub(beat).Round(time.Millisecond), policy.MinLeaseHeartbeats, every, r.ExpiresIn)
	}
	return set(ClassHealthy, "heartbeat %s ago (every %s), expires in %s", now.Sub(beat).Round(time.Millisecond), every, r.ExpiresIn)
}

// contradiction says why the task l fences can no longer succeed ("":
// nothing contradicts it). A tombstone cleanup deletes the dropped
// incarnation's head itself and carries on without it (its continuations
// have no base): no head, another head or a tombstone contradict nothing
// there; its heartbeat judges it.
func contradiction(l contract.Lease, ev Evidence) string {
	switch {
	case l.Kind == contract.KindTombstoneCleanup:
		return ""
	case ev.NoHead:
		return "live lease on a collection without a head"
	case ev.HeadVersion != l.BaseManifestVersion || ev.HeadChecksum != l.BaseManifestChecksum:
		return fmt.Sprintf("live lease on base v%d, but the head is v%d: the result can only be dropped as stale", l.BaseManifestVersion, ev.HeadVersion)
	case ev.Tombstoned:
		return fmt.Sprintf("live %s lease on a tombstoned collection", l.Kind)
	}
	return ""
}

// baseless: a tombstone cleanup that continues after the dropped
// incarnation's head is gone has no base (v0, no checksum).
func baseless(l contract.Lease) bool {
	return l.Kind == contract.KindTombstoneCleanup && l.BaseManifestVersion == 0 && l.BaseManifestChecksum == ""
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
