package contract

import (
	"errors"
	"fmt"
)

// Sentinel errors to branch on.
var (
	// ErrUnknownField: the document has a field this reader does not
	// understand, including a name that differs from a field's only in case.
	ErrUnknownField = errors.New("unknown field")
	// ErrSchemaVersion: the document's schema_version is missing or newer than supported.
	ErrSchemaVersion = errors.New("unsupported schema_version")
	// ErrInvalid: the document decoded but violates the contract.
	ErrInvalid = errors.New("invalid document")
	// ErrDuplicateField: a member name appears twice in one object of the
	// document. It is also ErrInvalid (errors.Is), so callers that treat an
	// invalid document as a definite answer treat this one the same way.
	ErrDuplicateField = fmt.Errorf("duplicate field: %w", ErrInvalid)
	// ErrChecksumMismatch: the bytes do not hash to the pinned checksum.
	ErrChecksumMismatch = errors.New("checksum mismatch")
)

// DecodeError carries where a document failed to decode or validate.
type DecodeError struct {
	Doc    string // document kind, e.g. "manifest"
	Where  string // object key or message id, when known
	Reason string
	Err    error // one of the sentinels above
}

func (e *DecodeError) Error() string {
	where := ""
	if e.Where != "" {
		where = " at " + e.Where
	}
	return fmt.Sprintf("%s%s: %v: %s", e.Doc, where, e.Err, e.Reason)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ChecksumError carries both checksums of a mismatch.
type ChecksumError struct {
	Where    string
	Expected string
	Actual   string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: checksum mismatch: pinned %s, read %s", e.Where, e.Expected, e.Actual)
}

func (e *ChecksumError) Unwrap() error { return ErrChecksumMismatch }
