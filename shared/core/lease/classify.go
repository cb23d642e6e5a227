package lease

import (
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/policy"
)

// Class is the stalled-lease verdict of one lease record: never a boolean,
// each class names what an operator may do about it (README "Operating
// it" defines each for this coordinator).
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

// Timing is the lease policy the classification judges heartbeats by.
type Timing struct {
	Duration  time.Duration // lease_duration_ms: expiry = last heartbeat + Duration
	Heartbeat time.Duration // lease_heartbeat_ms
	ClockSkew time.Duration // clock_skew_ms
}

// Report is one classified lease with its evidence.
type Report struct {
	Lease        contract.Lease `json:"lease"`
	Done         bool           `json:"done"`
	Class        Class          `json:"class"`
	Detail       string         `json:"detail"`
	HeartbeatAge string         `json:"heartbeat_age,omitempty"` // since the last heartbeat (expiry - lease duration)
	ExpiresIn    string         `json:"expires_in,omitempty"`
	// Releasable: a confirmed recover may release it (suspect or
	// terminal-contradiction), with a write conditioned on exactly this
	// epoch, holder and expiry.
	Releasable bool `json:"releasable"`
}

// Classify judges one lease record at now. It reads nothing and writes
// nothing.
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
	case !l.Kind.Valid() || !contract.ValidCollection(l.Collection) || l.BaseManifestVersion == 0:
		return set(ClassInvalid, "record has kind %q, collection %q, base v%d", l.Kind, l.Collection, l.BaseManifestVersion)
	}
	if selfScope(l) != nil {
		return set(ClassIdentityMismatch, "the record fences %s of %s at v%d, its key names task %s", l.Kind, l.Collection, l.BaseManifestVersion, l.TaskID)
	}
	expiry := time.UnixMilli(l.LeaseExpiryUnixMs)
	beat := expiry.Add(-t.Duration)
	if st.Done {
		return set(ClassNotHeld, "task finished (epoch %d, %s)", l.LeaseEpoch, l.Holder)
	}
	if !expiry.After(now) {
		return set(ClassNotHeld, "expired %s ago (epoch %d, %s): the next delivery takes it", now.Sub(expiry).Round(time.Millisecond), l.LeaseEpoch, l.Holder)
	}
	r.ExpiresIn = expiry.Sub(now).Round(time.Millisecond).String()
	r.HeartbeatAge = now.Sub(beat).Round(time.Millisecond).String()
	switch {
	case beat.After(now.Add(t.ClockSkew)) || time.UnixMilli(l.AcquiredAtUnixMs).After(now.Add(t.ClockSkew)):
		return set(ClassIndeterminate, "heartbeat or acquisition %s in the future, beyond the clock skew bound %s", beat.Sub(now).Round(time.Millisecond), t.ClockSkew)
	case ev.HeadErr != "":
		return set(ClassIndeterminate, "live lease, but the head could not be read: %s", ev.HeadErr)
	case ev.NoHead:
		return set(ClassTerminal, "live lease on a collection without a head")
	case ev.HeadVersion != l.BaseManifestVersion || ev.HeadChecksum != l.BaseManifestChecksum:
		return set(ClassTerminal, "live lease on base v%d, but the head is v%d: the result can only be dropped as stale", l.BaseManifestVersion, ev.HeadVersion)
	case ev.Tombstoned && l.Kind != contract.KindTombstoneCleanup:
		return set(ClassTerminal, "live %s lease on a tombstoned collection", l.Kind)
	case ev.FactsErr != "":
		return set(ClassIndeterminate, "live lease, but CCS could not be read: %s", ev.FactsErr)
	case now.Sub(beat) > time.Duration(policy.MinLeaseHeartbeats)*t.Heartbeat:
		return set(ClassSuspect, "no heartbeat for %s (more than %d x %s); expires in %s", now.Sub(beat).Round(time.Millisecond), policy.MinLeaseHeartbeats, t.Heartbeat, r.ExpiresIn)
	}
	return set(ClassHealthy, "heartbeat %s ago (every %s), expires in %s", now.Sub(beat).Round(time.Millisecond), t.Heartbeat, r.ExpiresIn)
}
