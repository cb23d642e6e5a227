package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract/strictjson"
	"github.com/searchfabric/bcc/shared/testkit/jsonref"
)

type entry struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

type Embedded struct {
	Shared string `json:"shared"`
}

// custom decodes itself through an alias, as aws-lambda-go's S3Object does
// (encoding/json folds case inside it too).
type custom struct {
	Key     string `json:"key"`
	Decoded string `json:"-"`
}

func (c *custom) UnmarshalJSON(b []byte) error {
	type alias custom
	if err := json.Unmarshal(b, (*alias)(c)); err != nil {
		return err
	}
	c.Decoded = strings.ToUpper(c.Key)
	return nil
}

type doc struct {
	Custom *custom `json:"custom,omitempty"`
	Embedded
	Version int               `json:"schema_version"`
	Objects []entry           `json:"objects"`
	Next    *doc              `json:"next,omitempty"`
	Counts  map[string]int    `json:"counts,omitempty"`
	Extra   any               `json:"extra,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Grid    [][]entry         `json:"grid,omitempty"`
	ByName  map[string]*entry `json:"by_name,omitempty"`
	Skipped string            `json:"-"`
	Untag   string
}

func check(s string, mode strictjson.Unknown) error {
	return strictjson.Check([]byte(s), reflect.TypeFor[doc](), mode)
}

// The example: encoding/json keeps the last of two names that fold
// together, so a manifest part listing A and B decodes as A alone.
func TestCaseVariantDuplicateIsRefused(t *testing.T) {
	in := `{"schema_version":1,"objects":[{"key":"A"},{"key":"B"}],"Objects":[{"key":"A"}]}`
	var d doc
	if err := json.Unmarshal([]byte(in), &d); err != nil || len(d.Objects) != 1 {
		t.Fatalf("encoding/json no longer keeps the last case variant (%v, %d objects): revisit this package", err, len(d.Objects))
	}
	err := strictjson.Unmarshal([]byte(in), &d, strictjson.RejectUnknown)
	var ne *strictjson.NameError
	if !errors.As(err, &ne) || !errors.Is(err, strictjson.ErrInexactName) || ne.Name != "Objects" || ne.Field != "objects" || ne.Path != "$" {
		t.Fatalf("err = %v, want Objects refused as an inexact name at $", err)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		in      string
		mode    strictjson.Unknown
		want    error
		path    string
		message string
	}{
		{in: `{"schema_version":1,"objects":[{"key":"a","size":1}],"shared":"x","Untag":"u"}`},
		{in: `{"schema_version":1,"schema_version":2}`, want: strictjson.ErrDuplicateName, path: "$"},
		{in: `{"objects":[{"key":"a","key":"b"}]}`, want: strictjson.ErrDuplicateName, path: "$.objects[0]"},
		{in: `{"objects":[{},{"KEY":"b"}]}`, want: strictjson.ErrInexactName, path: "$.objects[1]", message: `(the field is "key")`},
		{in: `{"\u006fbjects":[]}`},                                  // an escape that unescapes to the exact name
		{in: `{"\u004fbjects":[]}`, want: strictjson.ErrInexactName}, // to a case variant
		{in: `{"objects":[],"\u006fbjects":[]}`, want: strictjson.ErrDuplicateName},
		{in: `{"ſhared":"x"}`, want: strictjson.ErrInexactName},  // U+017F folds to S in encoding/json
		{in: `{"untag":"x"}`, want: strictjson.ErrInexactName},   // untagged fields are matched by Go name
		{in: `{"skipped":"x"}`, want: strictjson.ErrUnknownName}, // json:"-"
		{in: `{"zorder":true}`, want: strictjson.ErrUnknownName}, // unknown
		{in: `{"zorder":true}`, mode: strictjson.IgnoreUnknown},  // allowed when unknowns are
		{in: `{"zorder":1,"zorder":2}`, mode: strictjson.IgnoreUnknown, want: strictjson.ErrDuplicateName},
		{in: `{"Objects":[]}`, mode: strictjson.IgnoreUnknown, want: strictjson.ErrInexactName},
		{in: `{"next":{"next":{"objects":[{"Size":1}]}}}`, want: strictjson.ErrInexactName, path: "$.next.next.objects[0]"},
		{in: `{"counts":{"a":1,"A":2}}`}, // map keys are data, exact by nature
		{in: `{"counts":{"a":1,"a":2}}`, want: strictjson.ErrDuplicateName, path: "$.counts"},
		{in: `{"by_name":{"x":{"key":"k","Key":"k"}}}`, want: strictjson.ErrInexactName, path: "$.by_name.x"},
		{in: `{"extra":{"anything":{"goes":1,"Goes":2}}}`}, // free-form: names are not fields
		{in: `{"extra":[{"a":1,"a":2}]}`, want: strictjson.ErrDuplicateName, path: "$.extra[0]"},
		{in: `{"raw":{"a":1,"a":2}}`, want: strictjson.ErrDuplicateName, path: "$.raw"},
		{in: `{"grid":[[{"key":"a"}],[{"kEy":"b"}]]}`, want: strictjson.ErrInexactName, path: "$.grid[1][0]"},
		{in: `{"objects":[{"key":"a\"b\\","size":-1.5e3}], "extra": [true, false, null, "x"]}`},
		{in: `{"custom":{"key":"a","Key":"b"}}`, want: strictjson.ErrInexactName, path: "$.custom"}, // a custom decoder folding case
		{in: `{"custom":{"key":"a","key":"b"}}`, want: strictjson.ErrDuplicateName},
		{in: `{"custom":{"key":"a","other":1}}`, want: strictjson.ErrUnknownName},
		{in: `{"custom":{"key":"a","other":1}}`, mode: strictjson.IgnoreUnknown},
		{in: `{"objects":`, want: strictjson.ErrSyntax},
		{in: `{"a" 1}`, want: strictjson.ErrSyntax, mode: strictjson.IgnoreUnknown},
		{in: `{} x`, want: strictjson.ErrSyntax},
		{in: `[`, want: strictjson.ErrSyntax},
		{in: `"abc`, want: strictjson.ErrSyntax},
		{in: ``, want: strictjson.ErrSyntax},
		{in: `{"objects":[,]}`, want: strictjson.ErrSyntax},
	} {
		err := check(tc.in, tc.mode)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: err = %v, want %v", tc.in, err, tc.want)
		case tc.path != "" && !strings.Contains(err.Error(), " at "+tc.path+":"):
			t.Errorf("%s: err = %v, want path %s", tc.in, err, tc.path)
		case tc.message != "" && !strings.Contains(err.Error(), tc.message):
			t.Errorf("%s: err = %v, want %q", tc.in, err, tc.message)
		}
	}
}

// encoding/json really does assign every variant refused above; if it
// stops doing so for one of them the refusal is merely conservative.
func TestRefusedVariantsAreRealDifferentials(t *testing.T) {
	for _, in := range []string{`{"ſhared":"x"}`, `{"SHARED":"x"}`, `{"\u0053hared":"x"}`} {
		var d doc
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.Shared != "x" {
			t.Errorf("%s: encoding/json does not assign it (%v, %q)", in, err, d.Shared)
		}
	}
}

func TestDeepNestingIsBounded(t *testing.T) {
	in := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	if err := check(`{"extra":`+in+`}`, strictjson.RejectUnknown); !errors.Is(err, strictjson.ErrSyntax) {
		t.Fatalf("err = %v, want nesting refused", err)
	}
}

func TestUnmarshalRefusesTrailingDataAndUnknown(t *testing.T) {
	var d doc
	if err := strictjson.Unmarshal([]byte(`{"schema_version":1} {}`), &d, strictjson.RejectUnknown); err == nil {
		t.Fatal("trailing data accepted")
	}
	if err := strictjson.Unmarshal([]byte(`{"zorder":1}`), &d, strictjson.RejectUnknown); err == nil {
		t.Fatal("unknown field accepted")
	}
	if err := strictjson.Unmarshal([]byte(`{"zorder":1,"schema_version":3}`), &d, strictjson.IgnoreUnknown); err != nil || d.Version != 3 {
		t.Fatalf("IgnoreUnknown: %v, %+v", err, d)
	}
}

// FuzzCheck: Check never panics; on any document Unmarshal accepts, what
// encoding/json decoded is exactly what a case-sensitive,
// duplicate-rejecting reader reads (jsonref), and re-encoding is stable.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"schema_version":1,"objects":[{"key":"a","size":1}],"shared":"x","Untag":"u"}`,
		`{"schema_version":1,"objects":[{"key":"A"},{"key":"B"}],"Objects":[{"key":"A"}]}`,
		`{"next":{"objects":[{"key":"\u0041"}]},"counts":{"a":1},"extra":{"x":[1,2,{"y":null}]}}`,
		`{"by_name":{"x":{"key":"k"}},"grid":[[{"size":2}]],"raw":{"a":[1]}}`,
		`{"ſhared":"x"}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, ignoreUnknown bool) {
		tm := time.AfterFunc(2*time.Second, func() { panic(fmt.Sprintf("HANG %q %v", in, ignoreUnknown)) })
		defer tm.Stop()
		mode := strictjson.RejectUnknown
		if ignoreUnknown {
			mode = strictjson.IgnoreUnknown
		}
		_ = strictjson.Check(in, reflect.TypeFor[doc](), mode)
		var d doc
		if err := strictjson.Unmarshal(in, &d, mode); err != nil {
			return
		}
		written, err := jsonref.Parse(in)
		if err != nil {
			t.Fatalf("accepted, but a duplicate-rejecting reader refuses it: %v", err)
		}
		out, err := json.Marshal(&d)
		if err != nil {
			t.Fatal(err)
		}
		read, err := jsonref.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if mode == strictjson.RejectUnknown {
			if err := jsonref.Covered(written, read); err != nil {
				t.Fatalf("decoded value differs from the document: %v\nin:  %s\nout: %s", err, in, out)
			}
		}
		var d2 doc
		if err := strictjson.Unmarshal(out, &d2, strictjson.RejectUnknown); err != nil {
			t.Fatalf("re-encoding is refused: %v\n%s", err, out)
		}
		if out2, _ := json.Marshal(&d2); string(out2) != string(out) {
			t.Fatalf("decode->encode->decode is not stable:\n%s\n%s", out, out2)
		}
	})
}
