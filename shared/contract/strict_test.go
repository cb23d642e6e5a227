package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// documents maps every document type (every type with a validate method)
// to its example in events/ and a constructor. TestEveryDocumentIsRegistered
// fails when a document type is missing here, so a new document cannot
// skip the strict-name tests below.
var documents = map[string]struct {
	example string
	new     func() validator
}{
	"Head":                 {"head.json", func() validator { return &Head{} }},
	"Manifest":             {"manifest-root.json", func() validator { return &Manifest{} }},
	"Part":                 {"manifest-part.json", func() validator { return &Part{} }},
	"Task":                 {"task.json", func() validator { return &Task{} }},
	"Completion":           {"completion-rewrite.json", func() validator { return &Completion{} }},
	"CutoverRequest":       {"cutover-request.json", func() validator { return &CutoverRequest{} }},
	"CutoverAnswer":        {"cutover-answer.json", func() validator { return &CutoverAnswer{} }},
	"RetireRequest":        {"retire-request.json", func() validator { return &RetireRequest{} }},
	"RetireAnswer":         {"retire-answer.json", func() validator { return &RetireAnswer{} }},
	"CollectionFacts":      {"ccs-facts.json", func() validator { return &CollectionFacts{} }},
	"NamespaceFacts":       {"ccs-namespace-facts.json", func() validator { return &NamespaceFacts{} }},
	"ReleaseIntentRequest": {"release-intent-request.json", func() validator { return &ReleaseIntentRequest{} }},
	"ReleaseIntentAnswer":  {"release-intent-answer.json", func() validator { return &ReleaseIntentAnswer{} }},
	"Watermark":            {"watermark.json", func() validator { return &Watermark{} }},
	"LineageConfirmation":  {"lineage-confirmation.json", func() validator { return &LineageConfirmation{} }},
	"ChangePart":           {"manifest-change-part.json", func() validator { return &ChangePart{} }},
	"ReconcileRequest":     {"reconcile-request.json", func() validator { return &ReconcileRequest{} }},
	"TombstonedNamespaces": {"ccs-tombstoned-namespaces.json", func() validator { return &TombstonedNamespaces{} }},
	"tombstonedPage":       {"ccs-tombstoned-namespaces.json", func() validator { return &tombstonedPage{} }},
	"NamespaceRelease":     {"handoff-namespace-release.json", func() validator { return &NamespaceRelease{} }},
}

// extraExamples are further events/ files of a registered type.
var extraExamples = map[string]string{"completion-cleanup.json": "Completion", "ccs-facts-tombstoned.json": "CollectionFacts"}

// packageAST parses the package's non-test sources.
func packageAST(t *testing.T) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

func receiverType(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) != 1 {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// Every document type is registered above (so the tests below cover it),
// and every exported Decode* function goes through Decode (directly or via
// another Decode* function).
func TestEveryDocumentIsRegistered(t *testing.T) {
	var docs []string
	for _, f := range packageAST(t) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Name.Name == "validate" {
				docs = append(docs, receiverType(fd))
			}
			if fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Decode") && fd.Name.Name != "Decode" && fd.Name.IsExported() {
				calls := false
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if ce, ok := n.(*ast.CallExpr); ok {
						if id, ok := ce.Fun.(*ast.Ident); ok && strings.HasPrefix(id.Name, "Decode") {
							calls = true
						}
					}
					return true
				})
				if !calls {
					t.Errorf("%s does not decode through Decode (strict names)", fd.Name.Name)
				}
			}
		}
	}
	sort.Strings(docs)
	if len(docs) == 0 {
		t.Fatal("found no document types")
	}
	for _, d := range docs {
		if _, ok := documents[d]; !ok {
			t.Errorf("document type %s is not registered in strict_test.go (add its events/ example and constructor)", d)
		}
	}
	for name, d := range documents {
		if got := reflect.TypeOf(d.new()).Elem().Name(); got != name {
			t.Errorf("documents[%q] constructs %s", name, got)
		}
	}
}

// ---- an order-preserving JSON tree, so duplicates can be written ----

type member struct {
	name  string
	value node
}

type node struct {
	members []member // object (non-nil, maybe empty) when isObj
	isObj   bool
	elems   []node // array when isArr
	isArr   bool
	raw     json.RawMessage // scalar
}

func parseNode(dec *json.Decoder) (node, error) {
	tok, err := dec.Token()
	if err != nil {
		return node{}, err
	}
	switch tok {
	case json.Delim('{'):
		n := node{isObj: true, members: []member{}}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return n, err
			}
			v, err := parseNode(dec)
			if err != nil {
				return n, err
			}
			n.members = append(n.members, member{name: k.(string), value: v})
		}
		_, err := dec.Token()
		return n, err
	case json.Delim('['):
		n := node{isArr: true}
		for dec.More() {
			v, err := parseNode(dec)
			if err != nil {
				return n, err
			}
			n.elems = append(n.elems, v)
		}
		_, err := dec.Token()
		return n, err
	}
	b, err := json.Marshal(tok)
	return node{raw: b}, err
}

func (n node) write(buf *bytes.Buffer) {
	switch {
	case n.isObj:
		buf.WriteByte('{')
		for i, m := range n.members {
			if i > 0 {
				buf.WriteByte(',')
			}
			if strings.HasPrefix(m.name, `\u`) { // pre-escaped name
				buf.WriteString(`"` + m.name + `"`)
			} else {
				k, _ := json.Marshal(m.name)
				buf.Write(k)
			}
			buf.WriteByte(':')
			m.value.write(buf)
		}
		buf.WriteByte('}')
	case n.isArr:
		buf.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				buf.WriteByte(',')
			}
			e.write(buf)
		}
		buf.WriteByte(']')
	default:
		buf.Write(n.raw)
	}
}

// site is one object member of a document: its location and whether the
// object holding it is a struct (names are fields) or a map (names are data).
type site struct {
	path     []int // alternating: member index, then element index for arrays
	name     string
	inStruct bool
}

// sites lists every object member at every depth, walking the Go type
// alongside to know struct objects from map objects.
func sites(n node, t reflect.Type, path []int, out *[]site) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.isObj:
		for i, m := range n.members {
			p := append(append([]int{}, path...), i)
			var child reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				*out = append(*out, site{path: p, name: m.name, inStruct: true})
				f, ok := fieldByJSONName(t, m.name)
				if !ok {
					continue
				}
				child = f
			case reflect.Map:
				*out = append(*out, site{path: p, name: m.name})
				child = t.Elem()
			default:
				continue
			}
			sites(m.value, child, p, out)
		}
	case n.isArr && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, e := range n.elems {
			sites(e, t.Elem(), append(append([]int{}, path...), i), out)
		}
	}
}

func fieldByJSONName(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

// edit applies fn to the object holding the member at path (a copy of n).
func edit(n node, path []int, fn func(members []member, i int) []member) node {
	if n.isObj {
		ms := append([]member{}, n.members...)
		if len(path) == 1 {
			return node{isObj: true, members: fn(ms, path[0])}
		}
		ms[path[0]].value = edit(ms[path[0]].value, path[1:], fn)
		return node{isObj: true, members: ms}
	}
	es := append([]node{}, n.elems...)
	es[path[0]] = edit(es[path[0]], path[1:], fn)
	return node{isArr: true, elems: es}
}

func caseVariant(name string) string {
	r := []rune(name)
	for i, c := range r {
		if unicode.IsLetter(c) {
			if unicode.IsUpper(c) {
				r[i] = unicode.ToLower(c)
			} else {
				r[i] = unicode.ToUpper(c)
			}
			return string(r)
		}
	}
	return ""
}

// escapedName writes name with its first character as a \u escape: the
// same name after unescaping.
func escapedName(name string) string {
	return fmt.Sprintf(`\u%04x`, name[0]) + name[1:]
}

// TestStrictNamesPerDocument: for every document kind and every object
// member at every depth of its events/ example, a duplicate of the member,
// a case variant of its name (instead of it, or beside it as in
// {"objects":[A,B],"Objects":[A]}) are refused with where it is; the same
// name written with an escape is the same name and accepted.
func TestStrictNamesPerDocument(t *testing.T) {
	files := map[string]string{}
	for typ, d := range documents {
		files[d.example] = typ
	}
	for f, typ := range extraExamples {
		files[f] = typ
	}
	for file, typ := range files {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "events", file))
			if err != nil {
				t.Fatal(err)
			}
			newDoc := documents[typ].new
			if err := Decode(typ, file, b, newDoc()); err != nil {
				t.Fatalf("example does not decode: %v", err)
			}
			root, err := parseNode(json.NewDecoder(bytes.NewReader(b)))
			if err != nil {
				t.Fatal(err)
			}
			var all []site
			sites(root, reflect.TypeOf(newDoc()), nil, &all)
			if len(all) < 3 {
				t.Fatalf("only %d members found", len(all))
			}
			try := func(what string, s site, n node, want error) {
				t.Helper()
				var buf bytes.Buffer
				n.write(&buf)
				err := Decode(typ, file, buf.Bytes(), newDoc())
				switch {
				case want == nil && err != nil:
					t.Errorf("%s of %q: %v\n%s", what, s.name, err, buf.Bytes())
				case want != nil && !errors.Is(err, want):
					t.Errorf("%s of %q: err = %v, want %v", what, s.name, err, want)
				case want != nil && !strings.Contains(err.Error(), file):
					t.Errorf("%s of %q: err = %v does not say where", what, s.name, err)
				}
			}
			for _, s := range all {
				try("duplicate", s, edit(root, s.path, func(ms []member, i int) []member {
					return append(ms[:i+1:i+1], append([]member{ms[i]}, ms[i+1:]...)...)
				}), ErrDuplicateField)
				try("escaped name", s, edit(root, s.path, func(ms []member, i int) []member {
					ms[i].name = escapedName(ms[i].name)
					return ms
				}), nil)
				if !s.inStruct {
					continue
				}
				v := caseVariant(s.name)
				try("case variant", s, edit(root, s.path, func(ms []member, i int) []member {
					ms[i].name = v
					return ms
				}), ErrUnknownField)
				try("case variant beside it", s, edit(root, s.path, func(ms []member, i int) []member {
					return append(ms[:i+1:i+1], append([]member{{name: v, value: ms[i].value}}, ms[i+1:]...)...)
				}), ErrUnknownField)
			}
		})
	}
}

// The manifest part: objects [A, B] and "Objects" [A] decoded as
// [A] before; now refused, naming the field and the part's key.
func TestCaseVariantPartIsRefused(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "manifest-part.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p Part
	if err := Decode("manifest part", "k", b, &p); err != nil {
		t.Fatal(err)
	}
	first, _ := json.Marshal(p.Objects[:1])
	in := append(bytes.TrimSuffix(bytes.TrimSpace(b), []byte("}")), []byte(`,"Objects":`+string(first)+`}`)...)
	var naive Part
	if err := json.Unmarshal(in, &naive); err != nil || len(naive.Objects) != 1 {
		t.Fatalf("encoding/json reads %d objects (%v): the differential this test pins is gone", len(naive.Objects), err)
	}
	err = Decode("manifest part", "collections/orders/manifests/parts/x.json", in, &Part{})
	if !errors.Is(err, ErrUnknownField) || !strings.Contains(err.Error(), `"Objects"`) || !strings.Contains(err.Error(), "collections/orders/manifests/parts/x.json") {
		t.Fatalf("err = %v", err)
	}
}
