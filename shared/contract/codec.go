package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/searchfabric/bcc/shared/contract/strictjson"
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
// Unknown fields, member names that are not exactly a field's name (a case
// variant), duplicate member names, trailing data, a missing or newer
// schema_version and contract violations are all reported as *DecodeError.
// Every document type decodes through here: what it accepts, every
// case-sensitive reader of the same bytes reads the same way.
func Decode(doc, where string, b []byte, v validator) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return classify(doc, where, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &DecodeError{Doc: doc, Where: where, Reason: "trailing data after the document", Err: ErrInvalid}
	}
	if err := strictjson.Check(b, reflect.TypeOf(v), strictjson.RejectUnknown); err != nil {
		return nameError(doc, where, err)
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

// nameError reports a member name encoding/json accepted but a
// case-sensitive, duplicate-rejecting reader would read differently.
func nameError(doc, where string, err error) error {
	de := &DecodeError{Doc: doc, Where: where, Reason: err.Error(), Err: ErrInvalid}
	var ne *strictjson.NameError
	if errors.As(err, &ne) {
		switch {
		case errors.Is(err, strictjson.ErrDuplicateName):
			de.Err, de.Reason = ErrDuplicateField, fmt.Sprintf("field %q appears twice in the object at %s", ne.Name, ne.Path)
		case errors.Is(err, strictjson.ErrInexactName):
			de.Err, de.Reason = ErrUnknownField, fmt.Sprintf("field %q at %s is not understood by schema_version %d readers (the field is %q: names are case-sensitive)", ne.Name, ne.Path, SchemaVersion, ne.Field)
		case errors.Is(err, strictjson.ErrUnknownName):
			de.Err, de.Reason = ErrUnknownField, fmt.Sprintf("field %q at %s is not understood by schema_version %d readers", ne.Name, ne.Path, SchemaVersion)
		}
	}
	return de
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
