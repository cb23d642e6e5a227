// Package lease is the task lease use case: one holder works on one task at
// a time, so the coordinator avoids duplicate work. A lease is never what
// keeps data safe (the owners' fences are: the publisher's head CAS, GC's
// re-check, CCS's idempotent intents); losing or wiping every lease record
// only costs duplicate work.
//
// Rules:
//   - Acquire takes a lease that is free or expired, incrementing its epoch
//     and recording the holder and expiry; a task marked done is never
//     re-acquired (ErrDone); a live lease of another holder is refused
//     (ErrHeld).
//   - Extend (heartbeat) and Complete succeed only while the stored epoch and
//     holder are still the caller's; otherwise the caller lost the lease
//     (ErrLost) and must stop without reporting.
//   - A holder heartbeats every policy lease_heartbeat_ms (30 s by
//     default) while it works — during a long merge too, not only between
//     outputs (Keeper) — and the lease lasts lease_duration_ms without one,
//     which policy validation keeps at >= 2 heartbeats (the grace floor):
//     a single late heartbeat never frees a live holder's lease.
//   - A lease fences one task identity: presenting it for another task,
//     collection, kind or base is ErrScope, refused before any write.
//   - Refusals are typed (HeldError, LostError, ScopeError carry the
//     evidence) and match their sentinels with errors.Is.
//   - An acquire refused by a record that is exactly what it wrote (holder,
//     acquired-at, expiry and base fence) is our own earlier attempt,
//     applied and then retried by the SDK after its answer was lost: it is
//     the lease we asked for, not another holder's (SYSTEM rule 13; guard
//     own_write). Extend and Complete need no such rule: their conditions
//     (epoch and holder) still hold for their own applied retry.
//   - Classify judges a lease record for the operator (healthy, suspect,
//     terminal contradiction, identity mismatch, not held, invalid,
//     indeterminate) from the record, the head and the facts at one time,
//     without reading or writing. How overdue a holder is comes from the
//     record alone: every acquire and heartbeat writes the holder's
//     heartbeat time and interval (WithHeartbeat), and a reader's own
//     lease policy is an input that never judges a holder (rule 16); a
//     record without them is never suspect. Only suspect and terminal leases are
//     releasable, and a release is a write conditioned on exactly the
//     epoch, holder and expiry that were classified (awsio.LeaseTable.Release).
//   - Every write is a conditional write in the Store. With the
//     guard.Set.LeaseCondition guard off (mutation proofs only) the writes
//     are unconditional, which is exactly the bug the guard exists against.
package lease
