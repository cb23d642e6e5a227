// Package publisher is the stand-in Manifest Publisher: the only writer of
// manifest_committed_head.json. It builds immutable manifest roots and
// content-addressed parts and moves the head with a real S3 conditional
// write (If-Match on the head's ETag), so two writers can never both win.
//
// Commit protocol: write changed parts (content addressed, idempotent), write
// the new root under a key that carries its checksum (If-None-Match), then
// CAS the head. A crash before the CAS leaves only unreferenced objects. An
// ambiguous CAS, and a CAS refused with 412, are resolved by re-reading the
// head: a 412 may be the SDK's retry of our own CAS, applied but its answer
// lost, and the head then names our root (whose key carries a checksum
// unique to this commit). So one append is committed once, and a cutover
// already applied is answered "accepted", never "conflict" (SYSTEM rules 6
// and 13).
//
// Cutover: a candidate is accepted only when the head is still its base
// (strict) or, with Options.AcceptRebase, when every object it removes is
// still present — the latter mimics owners that validate by file presence
// (like Iceberg's RewriteFiles) and exists so tests can show that the
// coordinator's own guards hold even against a permissive owner. A request
// already applied (its id is in a recent root's origin) is answered
// "accepted" again, with the version it committed: the publisher is
// idempotent per request id, so a caller may resend a request whose answer
// it lost as often as it likes (within the idempotency walk of recent
// roots; older than that its base has moved on and it answers conflict,
// nothing applied).
//
// Retirement (retire.go): the only removal of a head. A dropped lifetime's
// tombstone cleanup asks for it naming the exact head it read; the head is
// deleted with If-Match on the ETag just read, so a head written in between
// (a re-created name's v1) is never removed, and every answer is decided
// from the head (gone is accepted: a resend, another run, or the SDK's
// retry of our own applied delete meeting 404).
package publisher
