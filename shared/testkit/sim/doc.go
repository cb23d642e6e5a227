// Package sim is the coordinator's deterministic fault simulation, in the
// style of SlateDB's deterministic simulation and TigerBeetle's VOPR: one
// seed drives one PCG stream that decides every step of a schedule over the
// REAL use cases (observe, compact, lease, handoff, gc) and the owners'
// stand-ins (the stand-in publisher over an in-memory S3, an in-memory CCS
// and watermark), with faults injected at every port call and invariants
// checked after every step. Any failure replays from its seed.
//
// Ports have AWS semantics: MemBucket (S3 conditional writes, DeleteObjects),
// Queue (SQS FIFO groups, dedup window, visibility, DLQ), StateStore and
// LeaseStore (DynamoDB conditional writes), CCS (idempotent intents).
//
// Faults: crashes before and after every port call (the invocation dies; its
// message stays in flight until the visibility timeout), throttling,
// ambiguous writes in both directions (applied but reported failed; not
// applied and reported unknown), cutover transport timeouts, lost,
// duplicated, delayed and reordered head notifications, duplicated and
// redelivered queue messages, DLQ redrive, lease expiry and takeover in the
// middle of a task, concurrent appends (publisher CAS conflicts) in the
// middle of a task, wipes of the coordinator's state, a stalled, regressed,
// corrupt or missing watermark, readers holding versions, clock skew
// between functions (bounded by ClockSkew), CCS facts changes and
// tombstones.
//
// Invariants: pinned-delete (a), stale-cutover / delete-gain (b), readable
// (c), release-dependencies (d), converged (e), plus lease-exclusive (the
// lease contract) and debt-indexed (outstanding debt stays findable from the
// head: no leaked committed object).
package sim
