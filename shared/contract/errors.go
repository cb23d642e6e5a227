package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// RejectedEntry is one entry of an owner's listing that the contract
// rejects. It fails alone (SYSTEM rule 17): the listing's other entries
// are read as usual, and nothing is ever derived from this one.
type RejectedEntry struct {
	Where string // the listing, its page and the entry's index
	Name  string // the name the entry gives ("" when it gives none); untrusted: quote it
	Err   error  // why (a *DecodeError)
}

func (r RejectedEntry) Error() string {
	return fmt.Sprintf("entry %q at %s: %v", r.Name, r.Where, r.Err)
}

// RejectedEntriesError reports the entries of one listing the contract
// rejected, each alone; it comes with the entries that were accepted. It
// is ErrInvalid (errors.Is), and errors.As finds each entry's error.
type RejectedEntriesError struct {
	Listing string
	Entries []RejectedEntry
}

func (e *RejectedEntriesError) Error() string {
	parts := make([]string, len(e.Entries))
	for i, r := range e.Entries {
		parts[i] = r.Error()
	}
	return fmt.Sprintf("%s: %d entries rejected (the others are read): %s", e.Listing, len(e.Entries), strings.Join(parts, "; "))
}

func (e *RejectedEntriesError) Unwrap() []error {
	out := make([]error, 0, len(e.Entries)+1)
	for _, r := range e.Entries {
		out = append(out, r.Err)
	}
	return append(out, ErrInvalid)
}

// maxListedName bounds how much of a rejected entry's name reaches an
// error (and so the logs).
const maxListedName = 128

// listedName is the name a rejected listing entry gives: the string
// member field of raw when it is an object that has one, raw itself when
// it is a string; "" otherwise. Cut to maxListedName bytes.
func listedName(raw []byte, field string) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || json.Unmarshal(obj[field], &s) != nil {
			return ""
		}
	}
	if len(s) > maxListedName {
		s = s[:maxListedName]
	}
	return s
}
