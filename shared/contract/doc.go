// Package contract defines the wire documents that cross an owner boundary:
// the committed head pointer, the manifest (a small root plus content-addressed
// parts), task messages and leases, the completion carrier every executor
// reports with, the publisher's cutover request and answer, the CCS release
// intent request and answer, CCS scheduling facts and the query plane's
// global_safe_ts watermark.
//
// Invariants:
//   - Every document carries schema_version. A reader refuses a document whose
//     schema_version is newer than it understands.
//   - Decoding is strict: a field the reader does not understand is an error
//     (ErrUnknownField) and never silently dropped. Destructive work (delete,
//     cutover, release) must not proceed from a document that failed to decode;
//     a manifest we cannot fully understand may reference objects we would
//     otherwise think unreferenced.
//   - Member names are exact and unique (package strictjson): a name that
//     differs from a field's only in case, or a name given twice in one
//     object, is refused (ErrUnknownField, ErrDuplicateField), because
//     encoding/json would silently take one of the values while a
//     case-sensitive reader elsewhere (the publisher, the query plane)
//     takes another. What Decode accepts, every reader reads the same way.
//   - Checksums are "sha256:<lowercase hex>" of the exact stored bytes. The head
//     pins the root by checksum; the root pins each part and its parent by
//     checksum, so a reader that starts from a verified head verifies every
//     byte it reads.
//   - The manifest root's change (added/removed) is an index into the full
//     object set, which lives in the parts. The full set stays the truth.
//   - Identities (task ids, intent ids, cutover request ids) are deterministic
//     functions of their inputs so that retries and duplicates collapse.
package contract
