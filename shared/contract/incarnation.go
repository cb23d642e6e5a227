package contract

import "fmt"

// Incarnations: a collection name can have several lifetimes (drop, release,
// re-create). CCS assigns each lifetime an incarnation number when it
// creates the collection: 1 for the first, strictly increasing per name,
// never reused. It is a CCS fact (CollectionFacts.Incarnation); the Manifest
// Publisher copies it into every head and root it writes; every identity the
// coordinator keeps or writes carries it (tasks, leases, completions,
// observed state, cleanup progress, release intents).
//
// What writers must do (the stand-in publisher does it):
//   - write `incarnation` in the head and every root of a lifetime, equal to
//     the CCS fact at creation; never change it within a lifetime;
//   - name every key of a lifetime with its incarnation tag (IncarnationTag:
//     empty for incarnation 1, "i<N>-" after): roots, parts, change parts
//     and data segments. Keys of two lifetimes therefore never coincide, so
//     a delete aimed at an old lifetime (a late task, a retried batch)
//     cannot remove an object of a new one. The head key is the one key all
//     lifetimes share: only the publisher removes it, when the tombstone
//     cleanup asks it to retire exactly the head it read of the dropped
//     incarnation (RetireRequest; guard.IncarnationFence on the asking side,
//     a conditional delete on the head's ETag on the publisher's).
//
// An absent (zero) incarnation means 1: documents written before
// incarnations existed are the first lifetime of their name, and their keys
// have no tag, so they stay valid unchanged.

// Lifetime normalises an incarnation field: 0 (absent) is 1.
func Lifetime(n uint64) uint64 {
	if n == 0 {
		return 1
	}
	return n
}

// IncarnationTag is the key-name prefix of a lifetime: empty for the first,
// "i<N>-" for later ones.
func IncarnationTag(incarnation uint64) string {
	if Lifetime(incarnation) == 1 {
		return ""
	}
	return fmt.Sprintf("i%d-", incarnation)
}

// Inc is the head's incarnation (absent: 1).
func (h Head) Inc() uint64 { return Lifetime(h.Incarnation) }

// Inc is the root's incarnation (absent: 1).
func (m Manifest) Inc() uint64 { return Lifetime(m.Incarnation) }

// Inc is the incarnation the facts describe (absent: 1).
func (f CollectionFacts) Inc() uint64 { return Lifetime(f.Incarnation) }

// Inc is the incarnation the task works on (absent: 1).
func (t Task) Inc() uint64 { return Lifetime(t.Incarnation) }

// Inc is the incarnation the completion reports on (absent: 1).
func (c Completion) Inc() uint64 { return Lifetime(c.Incarnation) }
