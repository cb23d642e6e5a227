package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/searchfabric/bcc/shared/contract/strictjson"
)

// Parse reads a BCC_POLICY override: the JSON object's keys replace
// Default()'s values, everything else keeps its default. It is strict (an
// unknown key, a key in another casing, a duplicate key, a value of the
// wrong type or trailing data is an error naming the key: the member-name
// rules are package strictjson's, the same as for the contract's
// documents) and the result must Validate. An empty or blank input is
// Default().
func Parse(data []byte) (Policy, error) {
	p := Default()
	if len(bytes.TrimSpace(data)) == 0 {
		return p, nil
	}
	if err := strictjson.Check(data, reflect.TypeFor[Policy](), strictjson.RejectUnknown); err != nil {
		var ne *strictjson.NameError
		if errors.As(err, &ne) && !errors.Is(err, strictjson.ErrSyntax) {
			return p, &FieldError{Field: join(strings.TrimPrefix(strings.TrimPrefix(ne.Path, "$"), "."), ne.Name), Problem: ne.Err.Error()}
		}
		return p, fmt.Errorf("policy: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			problem := fmt.Sprintf("a JSON %s is not a %s", te.Value, te.Type)
			if te.Type == durationType {
				problem = te.Value // Duration's own explanation
			}
			return p, &FieldError{Field: te.Field, Problem: problem}
		}
		return p, fmt.Errorf("policy: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return p, errors.New("policy: trailing data after the JSON object")
	}
	return p, p.Validate()
}

var durationType = reflect.TypeFor[Duration]()

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
