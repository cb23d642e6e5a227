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
//   - Every write is a conditional write in the Store. With the
//     guard.Set.LeaseCondition guard off (mutation proofs only) the writes
//     are unconditional, which is exactly the bug the guard exists against.
package lease
