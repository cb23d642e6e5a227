// Package lineage reads committed-manifest lineage for the coordinator's
// executors: the head, roots verified against the checksum that names them,
// and parts verified as they are read. Nothing here lists a prefix: every
// object read is named by a head, a parent link or a part reference.
//
// Every document is read with a bounded reader (GetLimited) and refused
// above its documented limit (contract.Max*Bytes); a change too large for
// its root is streamed from its change parts (EachChange, ChangeHolds),
// one part at a time.
//
// Invariants: a reader starts from the head (never trusts a queued hint),
// verifies every byte it reads against a pinned checksum, and surfaces any
// decode failure (including unknown fields) as an error so that callers can
// fail closed. Walking stops at the first missing parent: GC deletes roots
// oldest-first, so a missing parent means everything older is gone, while a
// missing head or retained root is an error.
package lineage
