package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// Parse reads a BCC_POLICY override: the JSON object's keys replace
// Default()'s values, everything else keeps its default. It is strict (an
// unknown key, a key in another casing, a duplicate key, a value of the
// wrong type or trailing data is an error naming the key) and the result
// must Validate. An empty or blank input is Default().
func Parse(data []byte) (Policy, error) {
	p := Default()
	if len(bytes.TrimSpace(data)) == 0 {
		return p, nil
	}
	if err := checkKeys(json.NewDecoder(bytes.NewReader(data)), reflect.TypeFor[Policy](), ""); err != nil {
		return p, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return p, &FieldError{Field: te.Field, Problem: fmt.Sprintf("a JSON %s is not a %s", te.Value, te.Type)}
		}
		return p, fmt.Errorf("policy: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return p, errors.New("policy: trailing data after the JSON object")
	}
	return p, p.Validate()
}

// durationType is decoded by its own UnmarshalJSON, not as an object.
var durationType = reflect.TypeFor[Duration]()

// checkKeys walks one JSON value of type t and fails on a key t does not
// declare exactly (encoding/json would match it case-insensitively or drop
// it) or declares twice in the same object.
func checkKeys(dec *json.Decoder, t reflect.Type, path string) error {
	if t.Kind() != reflect.Struct || t == durationType {
		// A leaf: decode it alone so that a bad value is named by its key.
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("policy: %s: %w", orTop(path), err)
		}
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return &FieldError{Field: path, Problem: fmt.Sprintf("%s is not a %s", raw, t)}
			}
			return &FieldError{Field: path, Problem: err.Error()}
		}
		return nil
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("policy: %s: %w", orTop(path), err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return &FieldError{Field: orTop(path), Problem: fmt.Sprintf("must be a JSON object, got %v", tok)}
	}
	fields := map[string]reflect.Type{}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("policy: %s: %w", orTop(path), err)
		}
		key := tok.(string)
		field := join(path, key)
		ft, ok := fields[key]
		if !ok {
			return &FieldError{Field: field, Problem: "unknown key (known: " + strings.Join(sorted(names), ", ") + ")"}
		}
		if seen[key] {
			return &FieldError{Field: field, Problem: "appears twice"}
		}
		seen[key] = true
		if err := checkKeys(dec, ft, field); err != nil {
			return err
		}
	}
	_, err = dec.Token() // '}'
	return err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
