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
// Candidates are the objects in change(V).Removed for the walked roots V
// (inline in the root, or streamed from its change parts one at a time:
// memory is one part, not a commit). The
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
//
// # Retention windows are their own class (retention_reclaim)
//
// A candidate held by lifecycle retention alone (gate (c); every other
// gate passed) is a retention window: the sweep records its count and its
// earliest due time apart from the rest of the GC debt (SweepRecord), and
// reconciliation enqueues a retention_reclaim task once it is due. That
// task is a sweep like any other: the same Run, the same plan, the same
// gates judged at execution time, so a task delivered early deletes
// nothing early and one rule has one home (decide/judgeTime).
//
// # Read phase, then pure decisions
//
// A plan reads first (read: facts, the verified walk, the watermark),
// frames the retention and refusals from what it read (newFrame, pure),
// then streams the candidates: each is looked up exactly in the roots that
// matter (candidates/lookup) and judged by decide (pure). A key's eviction
// counts only if no walked root newer than it holds the key (else a later
// event decides). A listing of the data prefix then says which eligible
// candidates still exist (scanData: the plan and `bcc gc-plan` show what
// is really outstanding; one already gone is not deleted again and counts
// as confirmed) and proposes never-committed outputs (propose, pure). The
// trim is planned last (planTrim, pure). A plan holds at most
// MaxSweepCandidates deletes of candidates that still exist: one already
// gone never counts (bound: once twice the bound are collected, a listing
// drops the gone ones), or a backlog whose first slice an earlier sweep
// deleted would stop every later sweep at the same gone candidates and
// never trim the roots behind them. What a plan leaves beyond the bound
// is recorded as debt due now. A larger backlog is finished by the next
// sweeps: a gc or retention_reclaim sweep that stopped at the bound having
// deleted something enqueues its continuation at the tail of its queue at
// once (Continuation: one bounded slice per task, so a huge backlog never
// holds a consumer while other collections wait, and never waits for the
// next reconciliation when nobody else does).
//
// # One gate (gate.go, rule 15)
//
// judge is the one function that decides whether a key may go, for every
// path that deletes: it evaluates the whole of rule 3 for a committed
// object and rules 4, 11 and 12 for every other key (subject: what the key
// is and what the reads established about it; moment: the clock, the
// watermark and the CCS facts of one lifetime) and answers with one
// explanation, Hold. The planner's decide, the execution-time re-checks,
// the never-committed proposals and every phase of the tombstone cleanup
// put their keys to it; nothing else decides that a key may go.
//
// # Every delete batch rests on a fresh proof, taken after every wait
// (guard.FreshProof, rule 14)
//
// The delete port (Deleter) accepts only a ProvenBatch, which only the
// gate's sender (deleteProven, gate_send.go) makes: every attempt of a
// batch — the first and every retry after a transient failure — waits
// first (its backoff, then its delete budget: the pacer's buckets, the
// fleet's, the S3 prefix's, one take for the batch), then is proven (the
// head re-read: every root committed since the plan is retained and every
// key of the batch looked up in it; the watermark and facts re-read; each
// key put to the gate again), then sent. A reading serves a new proof only
// if it was taken after the last wait and is younger than half of
// ProofMaxAge; the adapter refuses a batch whose proof is older than
// ProofMaxAge when it sends it, and on every attempt of its SDK's own
// retries (ErrStaleProof: proven again). A head that does not descend from
// the planned one (a rollback, or the collection dropped and re-created
// under the same name) refuses the rest of the sweep.
//
// # Tombstones (tombstone.go and tomb_*.go)
//
// A dropped incarnation is not swept like a live lineage: it is cleaned by
// RunTombstone, in bounded runs (delete calls and time) that resume from a
// cursor kept under (collection, incarnation) and written by conditional
// writes. Everything the incarnation's lineage names goes — every object of
// the head and every object any root removed, the coordinator's own
// never-committed outputs of the incarnation, every root, part and change
// part (oldest root first, so a crash leaves a contiguous chain from the
// head), the control artifacts CCS names, and last the head pointer —
// once the drop is a token lifetime old and behind the watermark by the
// retention window, each key asked of the gate (an object also by its
// lifecycle retention: the cleanup stops at the first object held, and
// waits for it; "lifecycle retention passed" is a release dependency). The
// drop counts from the later of CCS's tombstoned_at (else the reservation
// horizon), the head's commit and the coordinator's first sighting of the
// tombstone (Sightings, rule 16: a time another owner asserts never opens a
// gate on its own).
// The head is not the coordinator's to delete: only the Manifest Publisher
// moves a head, so the cleanup asks it to retire the head (HeadRetirer,
// POST /retire), naming exactly the head it re-read, and only while that
// head names the dropped incarnation (guard.IncarnationFence). The
// publisher removes it with a conditional delete on the head's ETag, so a
// head written after the cleanup's read (a re-created name, which shares
// the key) is never removed: the race between read and removal is closed
// by the owner at the moment of effect (SYSTEM rule 1), not by the
// coordinator's re-read. The release (after which the name can be
// re-created) waits for the retirement.
// A walk finds only the committed chain: the root and parts a publisher
// left when it lost its head CAS are named by no head or parent, and once
// the name is released nothing would ever delete them. So the manifests
// phase also deletes, by listing, every manifest key carrying the
// incarnation's tag (contract.ManifestKeyIncarnation), once no commit can
// still name it (the never-committed outputs' wait).
// The release dependency graph is then evaluated (objects, manifests,
// control artifacts, reservation horizon: guard.ReleaseHorizon, CCS
// preconditions). Objects, manifests and artifacts are confirmed by what a
// listing of the collection after the cleanup no longer finds of the
// incarnation (TombstoneLeft), never by the phases having run: a key left
// keeps its dependency pending and sends the cursor back to the outputs
// phase. When all hold the completion goes to the handoff once
// and the cursor is closed for good. The cursor is disposable: wiped, the
// cleanup starts again from the head (a key already gone counts as
// deleted).
//
// A GC task of another incarnation than the head's is dropped
// (guard.IncarnationFence): it was derived from another lifetime.
//
// # Deletes
//
// Keys go in DeleteObjects calls of up to BatchSize (<= awslimit.S3DeleteObjectsMaxKeys) keys, the
// objects and never-committed outputs of a sweep together, then the parts
// of every root the trim may delete together, then the roots one per call,
// oldest first, paced by a token bucket per collection and one global
// bucket (Pacer; clock and sleeper injected), the fleet's and the S3
// prefix's. A key already gone counts as deleted. Keys a call did
// not confirm are retried with exponential backoff up to MaxAttempts; what
// remains is reported (Report.Unconfirmed) and the task fails so its message
// is retried.
//
// # Manifest trimming order (guard.ManifestBeforeObjects)
//
// Roots are deleted oldest first, and only after the objects of the same
// sweep are done. Root V (the oldest walked root, not retained, not the
// head) may go only when every object in change(V).Removed and in
// change(V+1).Removed is confirmed gone in this sweep (deleted, or no
// longer listed) or was re-added by a newer version (whose own events then
// index it). change(V+1).Removed is
// what only V still references; change(V).Removed is the debt only V's root
// indexes. The gate decides it (judgeManifest): every part and root of a
// trim step is put to it with the candidates of that step and of every
// older one not yet confirmed gone (subject.needs, from proveManifests),
// and it holds the key while there are any. A tombstone's manifests phase
// starts only after its objects phase confirmed every object, so its
// subjects need nothing. The order of one step is:
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
// Steps share delete batches: the parts of every step whose objects are
// confirmed gone go first, together (a part shared with a newer root is
// never among them), then the roots, one per call, oldest first, so a root
// is never gone while an older one remains. A crash between the two leaves
// roots no token can open whose parts are gone: the next walk reaches
// them, finds their parts gone (tolerated for a root being trimmed) and
// deletes them again.
//
// # Never-committed outputs: only the coordinator's own (rules 4 and 11)
//
// A listing of the data prefix only proposes keys. A proposed key is
// reclaimed only if its key is the coordinator's own output pattern
// (contract.OwnedOutputTask: under a prefix that is one of its rewrite
// tasks' identity; guard.OrphanOwnership), no walked root references it or
// names it in its change (exact lookups, again before the delete call),
// and it is older than MaxTaskLifetime + ClockSkew. Any other key no
// manifest knows belongs to another writer (an ingest whose commit has not
// landed, a snapshot import, a bulk load): it is counted
// (Plan.ForeignUncommitted) and never deleted, however old. A key an older
// existing root references is committed debt and goes through the
// predicate above.
//
// # Head regression (guard.HeadRegression)
//
// A head below the highest head the coordinator observed (or whose
// lineage holds that version with other content), or roots above the head
// that no publisher crash explains, refuse the collection
// (RefusedRegression) until an operator's LineageConfirmation names every
// such piece of evidence; what roots above the head reference stays
// protected (regression.go). The roots are found by listing the manifests
// prefix, so a wiped memory does not turn the refusal into deletes. A
// confirmation belongs to one lifetime of the name: it is read for the
// head's incarnation and ignored when it names another
// (guard.LineageIncarnation), so what an operator confirmed for a dropped
// lifetime never answers the re-created one's evidence, nor the reverse.
//
// The evidence is read after the head (the walk), and in normal operation
// the head moves forward in between: the observer records a newer head,
// two commits leave roots above the one walked. So a regression is
// refused only when the head, read again after the evidence, is still the
// walked one (the evidence was recorded before a head read that is below
// it); a head that moved makes the read phase start again on the new head
// (a bounded number of times; then the task fails and is retried, nothing
// deleted, nothing refused). A false refusal pages an operator for nothing.
//
// # Dry run
//
// PlanSweep (and Executor.Plan) compute the plan with read-only ports:
// what would be deleted, what is deferred and why, which roots would be
// trimmed. Executor.Run is Plan + Apply.
package gc
