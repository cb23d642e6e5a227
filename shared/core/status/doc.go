// Package status is the operator's read-only view of the coordinator and
// the reconcile plan derived from it (seed 001's desired / current /
// status, mapped onto this coordinator).
//
// Invariants:
//   - Collecting a snapshot writes nothing: every port is a read (the
//     CLI's call-counting test proves zero AWS writes for every read-only
//     command).
//   - One as_of: every judgment in a snapshot (lease heartbeats, GC
//     eligibility, due debt) is made at the snapshot's as_of, never at the
//     time each source happened to be read.
//   - Unknown is never a guess: when a source cannot be read, the state
//     it would decide is Unknown with the read error as its reason, and
//     nothing is planned from it.
//   - Planning is a pure function of the snapshot and the policy; the
//     reconciliation rule is observe.PlanReconcile (one home), so what
//     `bcc plan` shows is what the scheduled reconciliation enqueues.
//   - A plan carries the fingerprint of the snapshot facts it was derived
//     from; applying it re-collects and refuses when the fingerprint moved.
package status
