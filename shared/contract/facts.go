package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// CCS fact names, as FactsDependencies lists them (the JSON paths of
// CollectionFacts).
const (
	FactTombstoned         = "tombstoned"
	FactReservationHorizon = "reservation_horizon_unix_ms"
	FactRetention          = "lifecycle.retention_ms"
	FactTransitionAfter    = "lifecycle.transition_after_ms"
	FactTransitionToTier   = "lifecycle.transition_to_tier"
	// FactVersion is facts_version itself: any change counts.
	FactVersion = "facts_version"
)

// factsDependencies is, per task kind, the CCS facts its result depends on:
// a result is handed off (cutover, release intent) only while these facts
// are what they were when the task was planned. A change to any other fact
// (a new facts_version that leaves these alone) does not make the result
// stale, so unrelated facts changes waste no work.
//
//   - compaction rewrites objects without regard to lifecycle: only the
//     tombstone matters (a tombstoned collection is cleaned up, never
//     compacted).
//   - lifecycle_transition selected its objects and target tier from the
//     transition policy (age, tier, on/off) and requires a live collection.
//   - tombstone_cleanup ends in a release intent of one tombstone, which is
//     irreversible: the collection must still be tombstoned with the same
//     tombstone. CCS exposes no tombstone identity of its own (an un-drop
//     and a new drop may even keep the horizon), so any facts change counts:
//     facts_version must be unchanged. A needless drop costs one more
//     cleanup run, which finds everything already gone.
//   - gc and retention_reclaim judge deletions by lifecycle retention and
//     the tombstone.
//   - orphan_reclaim depends on the tombstone only.
var factsDependencies = map[TaskKind][]string{
	KindCompaction:          {FactTombstoned},
	KindLifecycleTransition: {FactTombstoned, FactTransitionAfter, FactTransitionToTier},
	KindTombstoneCleanup:    {FactTombstoned, FactReservationHorizon, FactVersion},
	KindGC:                  {FactTombstoned, FactRetention},
	KindRetentionReclaim:    {FactTombstoned, FactRetention},
	KindOrphanReclaim:       {FactTombstoned},
}

// FactsDependencies returns the CCS facts a task of kind depends on (nil
// for an unknown kind: then every fact counts, see FactsDigest).
func FactsDependencies(kind TaskKind) []string {
	return append([]string(nil), factsDependencies[kind]...)
}

// factValue renders one named fact of f.
func factValue(f CollectionFacts, name string) string {
	switch name {
	case FactTombstoned:
		return strconv.FormatBool(f.Tombstoned)
	case FactReservationHorizon:
		return strconv.FormatInt(f.ReservationHorizonUnixMs, 10)
	case FactRetention:
		return strconv.FormatInt(f.Lifecycle.RetentionMs, 10)
	case FactTransitionAfter:
		if _, on := f.Lifecycle.TransitionCutoff(0); !on {
			return "off"
		}
		return strconv.FormatInt(f.Lifecycle.TransitionAfterMs, 10)
	case FactVersion:
		return strconv.FormatUint(f.FactsVersion, 10)
	case FactTransitionToTier:
		if _, on := f.Lifecycle.TransitionCutoff(0); !on {
			return "off"
		}
		return f.Lifecycle.TransitionToTier
	}
	return ""
}

// DescribeFacts renders the facts a task of kind depends on, e.g.
// "tombstoned=false lifecycle.transition_to_tier=cold" (for logs and
// reasons). An unknown kind depends on facts_version itself.
func DescribeFacts(kind TaskKind, f CollectionFacts) string {
	deps := factsDependencies[kind]
	if len(deps) == 0 {
		return "facts_version=" + strconv.FormatUint(f.FactsVersion, 10)
	}
	parts := make([]string, len(deps))
	for i, d := range deps {
		parts[i] = d + "=" + factValue(f, d)
	}
	return strings.Join(parts, " ")
}

// FactsDigest is the fingerprint of the CCS facts a task of kind depends
// on: equal digests mean the result is still valid under the facts it was
// planned for. Executors put it in every completion (ccs_facts_digest);
// the handoff recomputes it from current CCS facts before every cutover
// and release intent. The kind is part of the digest, so digests of
// different kinds never compare equal.
func FactsDigest(kind TaskKind, f CollectionFacts) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s", kind, f.Collection, DescribeFacts(kind, f))))
	return "facts-" + hex.EncodeToString(h[:16])
}

// validFactsDigest reports whether s has FactsDigest's shape.
func validFactsDigest(s string) bool {
	rest, ok := strings.CutPrefix(s, "facts-")
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil && strings.ToLower(rest) == rest
}
