// Package strictjson closes the parser differentials of encoding/json for
// documents read from another writer.
//
// encoding/json matches member names to struct fields case-insensitively and
// keeps the last of duplicate names, so {"objects":[A,B],"Objects":[A]}
// decodes as objects = [A] while a case-sensitive reader elsewhere (the
// publisher, the query plane) sees [A, B]. A reader that acts on a document
// (a delete, a cutover, a release) must read exactly what every other reader
// reads, or it must refuse it.
//
// Check is a pre-pass over the document's tokens that walks the target
// type's JSON shape (reflection of its json tags, recursively: structs,
// embedded structs, pointers, slices, arrays, maps) and rejects
//
//   - a member name that appears twice in one object (ErrDuplicateName),
//     after unescaping, in every object (struct, map or free-form value);
//   - a member name that is not exactly a field name but equals one under
//     encoding/json's case folding (ErrInexactName);
//   - with RejectUnknown, any other name that is not a field (ErrUnknownName).
//
// Unmarshal is encoding/json decoding with those rules, trailing data
// refused. Every error from Check is a *NameError saying the member's path
// ($.objects[1].key style) and name.
//
// Invariants:
//   - Check never panics and never loops on any input, valid JSON or not; its
//     recursion is bounded by the same nesting limit as encoding/json.
//   - On valid JSON, a document Check accepts decodes (encoding/json) to the
//     same value a case-sensitive, duplicate-rejecting reader would build:
//     every member encoding/json assigns is the one whose name is exactly
//     the field's, and it is the only one.
//   - Values whose type is an interface or a non-struct implementing
//     json.Unmarshaler (json.RawMessage included) are free-form: only
//     duplicate names are checked inside them. A struct implementing
//     json.Unmarshaler is checked by its fields like any struct: a decoder
//     that delegates to encoding/json through an alias folds case too
//     (found by FuzzObserverEvent in aws-lambda-go's S3Object). A custom
//     decoder whose JSON shape differs from its fields must not be checked
//     with RejectUnknown.
//   - The happy path does not allocate per member for plain ASCII names.
package strictjson
