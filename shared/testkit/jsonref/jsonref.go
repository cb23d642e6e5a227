// Package jsonref is a reference JSON reader for property tests: it reads a
// document the way a careful case-sensitive reader elsewhere would (the
// publisher, the query plane), so a fuzz target can compare what the
// product decoded with what was written.
//
// Parse builds a generic tree (objects as map[string]any, numbers as
// json.Number) and refuses duplicate member names. Covered says whether
// every member of one tree appears with an equal value in another (null
// members and zero values dropped by omitempty aside): for a document the
// product accepted, Covered(Parse(input), Parse(Encode(decoded))) must hold,
// or the product read something other than what the writer wrote.
package jsonref

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
)

// ErrDuplicate: a member name appears twice in one object.
var ErrDuplicate = errors.New("duplicate member name")

// Parse reads one JSON value with exact, duplicate-rejecting semantics.
func Parse(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("%w: %q", ErrDuplicate, k)
				}
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			_, err := dec.Token()
			return m, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// Covered reports nil when every member of in is in out with an equal value
// (recursively), else an error naming the first difference. A null member
// of in is skipped (decoding null leaves the zero value); a member absent
// from out is accepted when in's value is a zero value (omitempty).
func Covered(in, out any) error { return covered("$", in, out) }

func covered(path string, in, out any) error {
	switch a := in.(type) {
	case nil:
		return nil // null leaves the zero value
	case map[string]any:
		b, ok := out.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: object read as %s", path, show(out))
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok {
				if av == nil || zero(av) {
					continue
				}
				return fmt.Errorf("%s.%s: written %s, not read", path, k, show(av))
			}
			if err := covered(path+"."+k, av, bv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		b, ok := out.([]any)
		if !ok {
			return fmt.Errorf("%s: array of %d read as %s", path, len(a), show(out))
		}
		if len(a) != len(b) {
			return fmt.Errorf("%s: %d elements written, %d read", path, len(a), len(b))
		}
		for i := range a {
			if err := covered(path+"["+strconv.Itoa(i)+"]", a[i], b[i]); err != nil {
				return err
			}
		}
		return nil
	case json.Number:
		b, ok := out.(json.Number)
		if !ok || !sameNumber(a, b) {
			return fmt.Errorf("%s: number %s read as %s", path, a, show(out))
		}
		return nil
	default:
		if in != out {
			return fmt.Errorf("%s: %s read as %s", path, show(in), show(out))
		}
		return nil
	}
}

// sameNumber compares integer literals exactly and anything else at float64
// precision (what encoding/json decodes a free-form number to). It never
// expands an exponent, so 1e999999999 costs nothing.
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, okx := new(big.Int).SetString(string(a), 10)
	y, oky := new(big.Int).SetString(string(b), 10)
	if okx && oky {
		return x.Cmp(y) == 0
	}
	fx, errx := strconv.ParseFloat(string(a), 64)
	fy, erry := strconv.ParseFloat(string(b), 64)
	return errx == nil && erry == nil && fx == fy
}

func zero(v any) bool {
	switch t := v.(type) {
	case string:
		return t == ""
	case bool:
		return !t
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		return err == nil && f == 0
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 80 {
		return fmt.Sprintf("%T", v)
	}
	return string(b)
}
