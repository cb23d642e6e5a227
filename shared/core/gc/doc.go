// Package gc is the GC worker's use case: it sweeps one collection, deleting
// only what the canonical delete rule allows at the moment of deletion, and
// trims manifest history in an order that keeps every piece of outstanding
// debt rediscoverable from the head.
//
// # Candidates come from lineage, never from listing
//
// A sweep walks the committed lineage from the head (every root verified
// against the checksum that names it, strictly decoded: an unknown field, a
// checksum mismatch or a missing retained root refuses the whole collection).
// Candidates are the objects in change(V).Removed for the walked roots V. The
// newest event of a key decides: a key whose newest event is an add is live;
// otherwise its eviction is the newest version that removed it
// (evict_commit_ts). A tombstoned collection adds every object its head
// still references, evicted by the tombstone.
//
// # The delete predicate (guard.DeleteGates), judged at execution time
//
//	(a) no manifest a continuation token may still open references it: the
//	    retained set R is the head plus every root whose child committed less
//	    than TokenLifetime ago; each candidate is looked up exactly in every
//	    root of R (one part read per root, parts cached by checksum);
//	(b) evict_commit_ts < global_safe_ts - RetentionWindow (an unreadable or
//	    invalid watermark blocks every delete of the sweep);
//	(c) with a lifecycle retention_ms, now - max_ts >= retention_ms, using
//	    the object's MAXIMUM timestamp.
//
// Each deferred candidate is counted under one reason, the first gate that
// holds it: pinned_manifest, watermark, retention_window, lifecycle_retention.
// Apply re-reads the watermark and facts and re-judges (b) and (c); before
// every delete call it re-reads the head and looks every key of the call up
// in each root committed since the plan (all of them are retained), so an
// object the publisher re-references after the plan is kept.
//
// # Tombstones
//
// CCS facts carry no tombstone time, so the head of a tombstoned collection
// is taken to be superseded at the CCS reservation horizon
// (reservation_horizon_unix_ms; unset: never, so nothing the head references
// is deleted). That time is then the eviction time of the head's objects and
// goes through the same gates. The head pointer is the publisher's and is
// never touched; the head's root and its parts stay with it (deleting them
// would leave a dangling head that fails every verified reader closed, and
// a repeated cleanup could no longer re-confirm anything). They are reported
// as remaining dependencies. Complete is true only when every candidate is
// confirmed gone, no candidate or never-committed output is deferred, and
// every root but the head's is deleted (guard.ReleaseDependencies).
//
// # Deletes
//
// Keys go in DeleteObjects calls of up to BatchSize (<= 1000) keys, paced by
// a token bucket per collection and one global bucket (Pacer; clock and
// sleeper injected). A key already gone counts as deleted. Keys a call did
// not confirm are retried with exponential backoff up to MaxAttempts; what
// remains is reported (Report.Unconfirmed) and the task fails so its message
// is retried.
//
// # Manifest trimming order (guard.ManifestBeforeObjects)
//
// Roots are deleted oldest first, and only after the objects of the same
// sweep are done. Root V (the oldest walked root, not retained, not the
// head) may go only when every object in change(V).Removed and in
// change(V+1).Removed is confirmed gone in this sweep or was re-added by a
// newer version (whose own events then index it). change(V+1).Removed is
// what only V still references; change(V).Removed is the debt only V's root
// indexes. The order of one step is:
//
//  1. the objects (above), confirmed;
//  2. V's parts that no newer walked root references (content-addressed
//     parts are shared), confirmed;
//  3. V's root.
//
// Why this order survives a crash at any point: the walk from the head
// follows parent links until the first missing root, so what must stay
// findable is exactly "every root that still indexes outstanding debt".
// A crash before 3 leaves V's root in place: the next walk reaches it again,
// its removals are candidates again (deletes of gone keys count as done) and
// its parts are deleted again (404 = done). Deleting the root before its
// parts would leak the parts (nothing names them any more); deleting roots
// before their objects would leak the objects (the walk stops at the gap).
// Deleting oldest first keeps the lineage a contiguous chain from the head,
// so a missing parent always means "everything older is gone".
//
// # Never-committed outputs (rule 4)
//
// A listing of the data prefix only proposes keys. A proposed key is
// reclaimed only if no change of the walked lineage mentions it (every
// object of a walked root is either in the head or removed by a newer walked
// root), neither the head nor any retained root references it (exact
// lookups, again before the delete call), and it is older than
// MaxTaskLifetime + ClockSkew. A key an older existing root references is
// committed debt and goes through the predicate above.
//
// # Dry run
//
// PlanSweep (and Executor.Plan) compute the plan with read-only ports:
// what would be deleted, what is deferred and why, which roots would be
// trimmed. Executor.Run is Plan + Apply.
package gc
