package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Unknown says what Check does with a member name that is no field of the
// target struct (and no case variant of one).
type Unknown int

const (
	// RejectUnknown reports it as ErrUnknownName (contract documents).
	RejectUnknown Unknown = iota
	// IgnoreUnknown lets it pass, as encoding/json does by default (AWS
	// envelopes, which gain fields over time). Its value is still checked
	// for duplicate names.
	IgnoreUnknown
)

// Sentinel errors carried by *NameError.
var (
	// ErrDuplicateName: a member name appears twice in one object.
	ErrDuplicateName = errors.New("duplicate member name")
	// ErrInexactName: a member name differs from a field name only in case
	// (encoding/json would assign it to that field).
	ErrInexactName = errors.New("member name is not the exact field name")
	// ErrUnknownName: a member name is no field of the target type.
	ErrUnknownName = errors.New("unknown member name")
	// ErrSyntax: the bytes are not one JSON value (Check only; Unmarshal
	// reports encoding/json's own syntax errors).
	ErrSyntax = errors.New("invalid JSON")
)

// NameError is a rejected member name and where it is.
type NameError struct {
	Path  string // JSONPath-like location of the object holding the member, "$" for the root
	Name  string // the member name after unescaping
	Field string // the exact field name, for ErrInexactName
	Err   error  // one of the sentinels above
}

func (e *NameError) Error() string {
	switch {
	case e.Err == ErrSyntax:
		return fmt.Sprintf("%v at %s: %s", e.Err, e.Path, e.Name)
	case e.Field != "":
		return fmt.Sprintf("member %q at %s: %v (the field is %q)", e.Name, e.Path, e.Err, e.Field)
	}
	return fmt.Sprintf("member %q at %s: %v", e.Name, e.Path, e.Err)
}

func (e *NameError) Unwrap() error { return e.Err }

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Check verifies the member names of the JSON value in data against type t
// (see the package documentation). Trailing bytes after the value other
// than white space are a syntax error.
func Check(data []byte, t reflect.Type, unknown Unknown) error {
	c := checker{b: data, unknown: unknown}
	i, err := c.value(0, infoFor(t))
	if err == nil {
		if i = c.ws(i); i != len(data) {
			err = c.syntax(i, "data after the value")
		}
	}
	if err != nil {
		var ne *NameError
		if errors.As(err, &ne) {
			ne.Path = "$" + ne.Path
		}
		return err
	}
	return nil
}

// Unmarshal decodes data into v (a non-nil pointer) with encoding/json,
// refusing trailing data and, with RejectUnknown, unknown fields; then it
// runs Check. encoding/json's errors are returned as they are; a name Check
// refuses is a *NameError.
func Unmarshal(data []byte, v any, unknown Unknown) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if unknown == RejectUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &NameError{Path: "$", Name: "trailing data after the value", Err: ErrSyntax}
	}
	return Check(data, reflect.TypeOf(v), unknown)
}

// ---- type shapes ----

type shape uint8

const (
	free    shape = iota // any value; only duplicate names are checked inside
	object               // a struct
	mapping              // a map: names are keys, values are elem
	list                 // a slice or array of elem
)

type info struct {
	shape    shape
	elem     *info          // mapping, list
	fields   map[string]int // exact name -> index in children (object)
	folded   map[string]string
	children []*info
	names    []string
}

var (
	freeInfo    = &info{shape: free}
	cache       sync.Map // reflect.Type -> *info
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

func infoFor(t reflect.Type) *info {
	if t == nil {
		return freeInfo
	}
	if v, ok := cache.Load(t); ok {
		return v.(*info)
	}
	building := map[reflect.Type]*info{}
	in := build(t, building)
	for bt, bi := range building {
		cache.LoadOrStore(bt, bi)
	}
	return in
}

func build(t reflect.Type, building map[reflect.Type]*info) *info {
	if v, ok := cache.Load(t); ok {
		return v.(*info)
	}
	if in, ok := building[t]; ok {
		return in
	}
	custom := t.Implements(unmarshaler) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshaler))
	if custom && t.Kind() != reflect.Struct && t.Kind() != reflect.Pointer {
		return freeInfo
	}
	switch t.Kind() {
	case reflect.Pointer:
		e := t
		for hops := 0; e.Kind() == reflect.Pointer; hops++ {
			if hops > 64 { // type P *P
				return freeInfo
			}
			e = e.Elem()
		}
		return build(e, building)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(unmarshaler) {
			return freeInfo // []byte is a base64 string
		}
		in := &info{shape: list}
		building[t] = in
		in.elem = build(t.Elem(), building)
		return in
	case reflect.Map:
		in := &info{shape: mapping}
		building[t] = in
		in.elem = build(t.Elem(), building)
		return in
	case reflect.Struct:
		// A struct with its own UnmarshalJSON is checked by its fields too:
		// aws-lambda-go's S3Object decodes through an alias of itself, so
		// encoding/json folds case inside it as well.
		in := &info{shape: object, fields: map[string]int{}, folded: map[string]string{}}
		building[t] = in
		for _, f := range jsonFields(t) {
			in.fields[f.name] = len(in.children)
			in.names = append(in.names, f.name)
			in.children = append(in.children, build(f.typ, building))
			if k := string(foldName([]byte(f.name))); in.folded[k] == "" {
				in.folded[k] = f.name
			}
		}
		return in
	}
	return freeInfo
}

type field struct {
	name   string
	typ    reflect.Type
	depth  int
	tagged bool
}

// jsonFields lists the JSON members of struct t as encoding/json sees them:
// exported fields (or embedded structs) not tagged "-", named by their tag
// or Go name, embedded untagged structs flattened, and a name held by
// several fields resolved by depth, then by a tag, else dropped.
func jsonFields(t reflect.Type) []field {
	var all []field
	var walk func(t reflect.Type, depth int, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, depth int, seen map[reflect.Type]bool) {
		if seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			ft := sf.Type
			if sf.Anonymous {
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if !sf.IsExported() && ft.Kind() != reflect.Struct {
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := cutComma(tag)
			if !validTag(name) {
				name = ""
			}
			if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				walk(ft, depth+1, seen)
				continue
			}
			tagged := name != ""
			if !tagged {
				name = sf.Name
			}
			all = append(all, field{name: name, typ: sf.Type, depth: depth, tagged: tagged})
		}
	}
	walk(t, 0, map[reflect.Type]bool{})
	byName := map[string][]field{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []field
	for _, name := range order {
		fs := byName[name]
		minDepth := fs[0].depth
		for _, f := range fs {
			minDepth = min(minDepth, f.depth)
		}
		var top, tagged []field
		for _, f := range fs {
			if f.depth == minDepth {
				top = append(top, f)
				if f.tagged {
					tagged = append(tagged, f)
				}
			}
		}
		switch {
		case len(top) == 1:
			out = append(out, top[0])
		case len(tagged) == 1:
			out = append(out, tagged[0])
		}
	}
	return out
}

func cutComma(s string) (string, string, bool) {
	if i := bytes.IndexByte([]byte(s), ','); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// validTag mirrors encoding/json's isValidTag.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case bytes.ContainsRune([]byte("!#$%&()*+-./:;<=>?@[]^_{|}~ "), c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// foldName is encoding/json's name folding (Go 1.21+).
func foldName(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return out
}

// ---- the scanner ----

type checker struct {
	b       []byte
	unknown Unknown
	depth   int
}

func (c *checker) syntax(i int, what string) error {
	return &NameError{Name: fmt.Sprintf("%s at byte %d", what, i), Err: ErrSyntax}
}

func (c *checker) ws(i int) int {
	for i < len(c.b) {
		switch c.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value checks the value starting at (or after white space from) i and
// returns the index after it.
func (c *checker) value(i int, in *info) (int, error) {
	i = c.ws(i)
	if i >= len(c.b) {
		return i, c.syntax(i, "unexpected end")
	}
	switch c.b[i] {
	case '{':
		return c.object(i, in)
	case '[':
		return c.array(i, in)
	case '"':
		end, _, err := c.str(i, false)
		return end + 1, err
	}
	start := i
	for i < len(c.b) {
		switch c.b[i] {
		case ',', ']', '}', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
			if i == start {
				return i, c.syntax(i, "unexpected character")
			}
			return i, nil
		}
		i++
	}
	return i, nil
}

// str returns the index of the closing quote of the string opening at i,
// and, when names is set, whether it holds an escape or a non-ASCII byte.
func (c *checker) str(i int, names bool) (end int, special bool, err error) {
	j := i + 1
	k := bytes.IndexByte(c.b[j:], '"')
	if k < 0 {
		return len(c.b), false, c.syntax(i, "unterminated string")
	}
	seg := c.b[j : j+k]
	if bytes.IndexByte(seg, '\\') < 0 {
		if names {
			for _, ch := range seg {
				if ch >= utf8.RuneSelf {
					return j + k, true, nil
				}
			}
		}
		return j + k, false, nil
	}
	for p := j; p < len(c.b); p++ {
		switch c.b[p] {
		case '\\':
			p++
		case '"':
			return p, true, nil
		}
	}
	return len(c.b), true, c.syntax(i, "unterminated string")
}

func (c *checker) enter(i int) error {
	c.depth++
	if c.depth > maxDepth {
		return c.syntax(i, "nesting too deep")
	}
	return nil
}

func (c *checker) array(i int, in *info) (int, error) {
	if err := c.enter(i); err != nil {
		return i, err
	}
	defer func() { c.depth-- }()
	elem := freeInfo
	if in.shape == list {
		elem = in.elem
	}
	i = c.ws(i + 1)
	if i < len(c.b) && c.b[i] == ']' {
		return i + 1, nil
	}
	for n := 0; ; n++ {
		var err error
		if i, err = c.value(i, elem); err != nil {
			return i, prefix(err, "["+strconv.Itoa(n)+"]")
		}
		i = c.ws(i)
		if i >= len(c.b) {
			return i, c.syntax(i, "unterminated array")
		}
		switch c.b[i] {
		case ',':
			i++
		case ']':
			return i + 1, nil
		default:
			return i, c.syntax(i, "expected , or ]")
		}
	}
}

func (c *checker) object(i int, in *info) (int, error) {
	if err := c.enter(i); err != nil {
		return i, err
	}
	defer func() { c.depth-- }()
	var seenBits uint64
	var seenIdx []bool
	var seenNames map[string]struct{}
	if in.shape == object && len(in.children) > 64 {
		seenIdx = make([]bool, len(in.children))
	}
	i = c.ws(i + 1)
	if i < len(c.b) && c.b[i] == '}' {
		return i + 1, nil
	}
	for {
		i = c.ws(i)
		if i >= len(c.b) || c.b[i] != '"' {
			return i, c.syntax(i, "expected a member name")
		}
		end, special, err := c.str(i, true)
		if err != nil {
			return end, err
		}
		raw := c.b[i+1 : end]
		nameStart := i
		i = c.ws(end + 1)
		if i >= len(c.b) || c.b[i] != ':' {
			return i, c.syntax(i, "expected :")
		}
		i++
		var name string
		if special {
			var ok bool
			if name, ok = unquote(c.b[nameStart : end+1]); !ok {
				return i, c.syntax(nameStart, "bad member name")
			}
		}
		child := freeInfo
		dupByName := true
		if in.shape == object {
			var idx int
			var ok bool
			if special {
				idx, ok = in.fields[name]
			} else {
				idx, ok = in.fields[string(raw)]
			}
			switch {
			case ok:
				dupByName = false
				dup := false
				if seenIdx != nil {
					dup, seenIdx[idx] = seenIdx[idx], true
				} else {
					bit := uint64(1) << uint(idx)
					dup = seenBits&bit != 0
					seenBits |= bit
				}
				if dup {
					return i, &NameError{Name: nameOf(special, name, raw), Err: ErrDuplicateName}
				}
				child = in.children[idx]
			default:
				n := nameOf(special, name, raw)
				if exact, ok := in.folded[string(foldName([]byte(n)))]; ok {
					return i, &NameError{Name: n, Field: exact, Err: ErrInexactName}
				}
				if c.unknown == RejectUnknown {
					return i, &NameError{Name: n, Err: ErrUnknownName}
				}
			}
		} else if in.shape == mapping {
			child = in.elem
		}
		if dupByName {
			n := nameOf(special, name, raw)
			if seenNames == nil {
				seenNames = map[string]struct{}{}
			}
			if _, dup := seenNames[n]; dup {
				return i, &NameError{Name: n, Err: ErrDuplicateName}
			}
			seenNames[n] = struct{}{}
		}
		if i, err = c.value(i, child); err != nil {
			return i, prefix(err, "."+quotePath(nameOf(special, name, raw)))
		}
		i = c.ws(i)
		if i >= len(c.b) {
			return i, c.syntax(i, "unterminated object")
		}
		switch c.b[i] {
		case ',':
			i++
		case '}':
			return i + 1, nil
		default:
			return i, c.syntax(i, "expected , or }")
		}
	}
}

// unquote unescapes a JSON string exactly as encoding/json does (invalid
// UTF-8 becomes U+FFFD).
func unquote(quoted []byte) (string, bool) {
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err == nil
}

func nameOf(special bool, unescaped string, raw []byte) string {
	if special {
		return unescaped
	}
	return string(raw)
}

func prefix(err error, seg string) error {
	var ne *NameError
	if errors.As(err, &ne) {
		ne.Path = seg + ne.Path
	}
	return err
}

// quotePath renders a member name in a path: bare when it is a plain
// identifier, quoted otherwise.
func quotePath(s string) string {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch == '_' || ch == '-' || '0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z') {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
