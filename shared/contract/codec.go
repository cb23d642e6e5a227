package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// SchemaVersion is the version of every document this build writes and the
// newest it reads.
const SchemaVersion = 1

// Checksum returns the contract checksum of b: "sha256:<hex>".
func Checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// VerifyChecksum reports a *ChecksumError when b does not hash to want.
func VerifyChecksum(where string, b []byte, want string) error {
	if got := Checksum(b); got != want {
		return &ChecksumError{Where: where, Expected: want, Actual: got}
	}
	return nil
}

// validator is implemented by every document.
type validator interface{ validate() error }

// Decode strictly decodes one JSON document of kind doc read from where into v.
// Unknown fields, trailing data, a missing or newer schema_version and contract
// violations are all reported as *DecodeError.
func Decode(doc, where string, b []byte, v validator) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return classify(doc, where, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &DecodeError{Doc: doc, Where: where, Reason: "trailing data after the document", Err: ErrInvalid}
	}
	if err := v.validate(); err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Doc, de.Where = doc, where
			return de
		}
		return &DecodeError{Doc: doc, Where: where, Reason: err.Error(), Err: ErrInvalid}
	}
	return nil
}

func classify(doc, where string, err error) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return &DecodeError{Doc: doc, Where: where, Reason: fmt.Sprintf("field %q is not understood by schema_version %d readers", field, SchemaVersion), Err: ErrUnknownField}
	}
	return &DecodeError{Doc: doc, Where: where, Reason: msg, Err: ErrInvalid}
}

// Encode returns the canonical JSON encoding of v (no trailing newline).
func Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

func checkSchema(v int) error {
	switch {
	case v == 0:
		return &DecodeError{Reason: "schema_version is missing", Err: ErrSchemaVersion}
	case v > SchemaVersion:
		return &DecodeError{Reason: fmt.Sprintf("schema_version %d is newer than %d", v, SchemaVersion), Err: ErrSchemaVersion}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return &DecodeError{Reason: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

func validChecksum(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
