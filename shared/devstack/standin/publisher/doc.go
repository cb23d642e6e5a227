// Package publisher is the stand-in Manifest Publisher: the only writer of
// manifest_committed_head.json. It builds immutable manifest roots and
// content-addressed parts and moves the head with a real S3 conditional
// write (If-Match on the head's ETag), so two writers can never both win.
//
// Commit protocol: write changed parts (content addressed, idempotent), write
// the new root under a key that carries its checksum (If-None-Match), then
// CAS the head. A crash before the CAS leaves only unreferenced objects. An
// ambiguous CAS is resolved by re-reading the head.
//
// Cutover: a candidate is accepted only when the head is still its base
// (strict) or, with Options.AcceptRebase, when every object it removes is
// still present — the latter mimics owners that validate by file presence
// (like Iceberg's RewriteFiles) and exists so tests can show that the
// coordinator's own guards hold even against a permissive owner. A request
// already applied (its id is in a recent root's origin) is answered
// "accepted" again: duplicates are harmless.
package publisher
