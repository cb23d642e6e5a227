package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/contract/strictjson"
)

// docTypes are the JSON documents of the commands (schema.go), by command.
var docTypes = map[string]func() any{
	"status":          func() any { return &statusDoc{} },
	"leases":          func() any { return &leasesDoc{} },
	"recover":         func() any { return &recoverDoc{} },
	"plan":            func() any { return &planDoc{} },
	"apply":           func() any { return &applyDoc{} },
	"gc-plan":         func() any { return &gcPlanDoc{} },
	"compaction-plan": func() any { return &compactionDoc{} },
	"confirm-lineage": func() any { return &confirmDoc{} },
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// jsonFields maps a struct type's JSON member names to their types
// (embedded structs flattened, as encoding/json does).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range jsonFields(ft) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

var rawMessage = reflect.TypeOf(json.RawMessage{})

// shape walks a decoded JSON value along its Go type and reports every
// member path (map keys as *, list elements as []), every null and every
// member name that is not snake_case.
func shape(v any, t reflect.Type, path string, paths map[string]bool, bad *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		*bad = append(*bad, path+": null")
		return
	}
	if t == rawMessage || t.Kind() == reflect.Interface {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.PkgPath() == "time" {
			return
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		for k, sub := range obj {
			p := path + "." + k
			paths[p] = true
			if !snake.MatchString(k) {
				*bad = append(*bad, p+": not snake_case")
			}
			if ft, ok := fields[k]; ok {
				shape(sub, ft, p, paths, bad)
			}
		}
	case reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for _, sub := range obj {
				paths[path+".*"] = true
				shape(sub, t.Elem(), path+".*", paths, bad)
			}
		}
	case reflect.Slice, reflect.Array:
		if l, ok := v.([]any); ok {
			for _, sub := range l {
				shape(sub, t.Elem(), path+"[]", paths, bad)
			}
		}
	}
}

// checkDocument decodes b strictly as command's document and checks the
// schema's rules; it returns the member paths.
func checkDocument(t *testing.T, command string, b []byte) map[string]bool {
	t.Helper()
	doc := docTypes[command]()
	if err := strictjson.Unmarshal(b, doc, strictjson.RejectUnknown); err != nil {
		t.Fatalf("%s: not its document (strict decoding): %v\n%s", command, err, b)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	if generic["schema_version"] != float64(schemaVersion) || generic["command"] != command {
		t.Fatalf("%s: schema_version %v command %v", command, generic["schema_version"], generic["command"])
	}
	paths := map[string]bool{}
	var bad []string
	shape(generic, reflect.TypeOf(doc), "$", paths, &bad)
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%s: %d schema violations:\n  %s", command, len(bad), strings.Join(bad, "\n  "))
	}
	return paths
}

func examplePath(command string) string {
	return filepath.Join("..", "..", "events", "bcc", command+".json")
}

// The examples under events/bcc/ are documents of their commands, decoded
// strictly, snake_case, no null.
func TestJSONExamples(t *testing.T) {
	for command := range docTypes {
		b, err := os.ReadFile(examplePath(command))
		if err != nil {
			t.Fatalf("%v (TestJSONOutputIsTheSchema -update writes the examples)", err)
		}
		checkDocument(t, command, b)
	}
}

// Every command's JSON output, from a populated embedded stack and then
// from the same stack in other states (a collection dropped by CCS with
// its cleanup under way, a lineage confirmation recorded, the watermark
// unreadable, a collection without a head): its document decoded
// strictly, schema_version, snake_case everywhere, [] for an empty list
// and no null; every member an output has is in the command's example.
// -update rewrites the examples: the runs' outputs merged, and every
// member their document can carry that no run printed filled in with a
// placeholder of its type (TestJSONExamplesShowEveryMember).
func TestJSONOutputIsTheSchema(t *testing.T) {
	e := populated(t)
	outputs := map[string][]string{}
	run := func(args ...string) string {
		t.Helper()
		if args[0] != "apply" {
			args = append(args, "--now", nowOf(e))
		}
		r := e.cli(args[0], append(args[1:], "-o", "json")...)
		if r.code == exitError {
			t.Fatalf("%s: %s", args[0], r.stderr)
		}
		outputs[args[0]] = append(outputs[args[0]], r.stdout)
		return r.stdout
	}
	views := func(gc ...string) {
		t.Helper()
		run("status")
		run("leases")
		run("recover")
		run("compaction-plan")
		for _, c := range gc {
			run("gc-plan", "--collection", c)
		}
		run("confirm-lineage", "--collection", "c3", "--by", "alice", "--reason", "restored v2")
		planFile := filepath.Join(t.TempDir(), "plan.json")
		if err := os.WriteFile(planFile, []byte(run("plan")), 0o644); err != nil {
			t.Fatal(err)
		}
		run("apply", "--plan", planFile)
	}
	views("c1")
	// Other states: c2 dropped by CCS, its cleanup under way; a lineage
	// confirmation for c3; the watermark unreadable; "fresh" known to CCS
	// without a head.
	f, err := e.CCS.Facts(e.ctx, "c2")
	if err != nil {
		t.Fatal(err)
	}
	f.Tombstoned, f.ReservationHorizonUnixMs = true, e.clk.Now().UnixMilli()
	if f, err = e.CCS.PutFacts(e.ctx, f); err != nil {
		t.Fatal(err)
	}
	h, _ := e.Lineage.Head(e.ctx, "c2")
	runGC(t, e, contract.NewTask(contract.KindTombstoneCleanup, "c2", h.Version, h.ManifestChecksum, f.FactsVersion, e.clk.Now().UnixMilli()))
	if r := e.cli("confirm-lineage", "--collection", "c3", "--by", "alice", "--reason", "restored v2", "--yes"); r.code != exitOK {
		t.Fatalf("confirm: %+v", r)
	}
	run("gc-plan", "--collection", "c3")
	if _, err := e.Clients.S3.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Config.WatermarkBucket), Key: aws.String(e.Config.WatermarkKey)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CCS.Create(e.ctx, "fresh", "", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	views("c1", "c2", "c3")
	for command, outs := range outputs {
		got := map[string]bool{}
		for _, out := range outs {
			for p := range checkDocument(t, command, []byte(out)) {
				got[p] = true
			}
		}
		if *update {
			b := exampleOf(t, command, outs)
			b = bytes.ReplaceAll(b, []byte(e.Stack.URL()), []byte("http://127.0.0.1:4566"))
			if err := os.MkdirAll(filepath.Dir(examplePath(command)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(examplePath(command), b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(examplePath(command))
		if err != nil {
			t.Fatal(err)
		}
		want := checkDocument(t, command, b)
		var missing []string
		for p := range got {
			if !want[p] {
				missing = append(missing, p)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: the output has members its example %s lacks (document them in docs/bcc.md, then -update):\n  %s", command, examplePath(command), strings.Join(missing, "\n  "))
		}
	}
}

// Every member a command's document can carry (every struct member
// reachable from its Go type, map keys as *, not only what one run
// happened to print) is snake_case and is in the command's example, so
// the example documents the whole schema and a strict client built from
// it reads every output.
func TestJSONExamplesShowEveryMember(t *testing.T) {
	for command, mk := range docTypes {
		b, err := os.ReadFile(examplePath(command))
		if err != nil {
			t.Fatal(err)
		}
		have := checkDocument(t, command, b)
		var missing, bad []string
		for p := range reachable(reflect.TypeOf(mk())) {
			if !have[p] {
				missing = append(missing, p)
			}
			if i := strings.LastIndexAny(p, ".]"); !snake.MatchString(p[i+1:]) && p[i+1:] != "*" {
				bad = append(bad, p)
			}
		}
		sort.Strings(missing)
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s: %d members its document can carry are not snake_case:\n  %s", command, len(bad), strings.Join(bad, "\n  "))
		}
		if len(missing) > 0 {
			t.Errorf("%s: %d members its document can carry are not in %s (go test ./cmd/bcc -run TestJSONOutputIsTheSchema -update):\n  %s",
				command, len(missing), examplePath(command), strings.Join(missing, "\n  "))
		}
	}
}

// reachable is every member path a document of type t can carry, in
// shape's notation ($.member, [] for a list's elements, .* for a map's
// values).
func reachable(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	var walk func(t reflect.Type, path string, on map[reflect.Type]bool)
	walk = func(t reflect.Type, path string, on map[reflect.Type]bool) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == rawMessage || t.Kind() == reflect.Interface || t.PkgPath() == "time" {
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			if on[t] {
				return
			}
			on[t] = true
			defer delete(on, t)
			for name, ft := range jsonFields(t) {
				out[path+"."+name] = true
				walk(ft, path+"."+name, on)
			}
		case reflect.Map:
			out[path+".*"] = true
			walk(t.Elem(), path+".*", on)
		case reflect.Slice, reflect.Array:
			walk(t.Elem(), path+"[]", on)
		}
	}
	walk(t, "$", map[reflect.Type]bool{})
	return out
}

// exampleOf is a command's example: the documents outs merged (members
// of each; a list holds elements of several runs where they show members
// the others lack), then every member its document can carry that none
// printed, filled in from a placeholder document of its type.
func exampleOf(t *testing.T, command string, outs []string) []byte {
	t.Helper()
	// The richest run first: the others only add what it lacks.
	var docs []any
	for _, out := range outs {
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, v)
	}
	size := func(v any) int {
		m := map[string]bool{}
		memberPaths(v, "", m)
		return len(m)
	}
	sort.SliceStable(docs, func(i, j int) bool { return size(docs[i]) > size(docs[j]) })
	var doc any
	for _, v := range docs {
		doc = mergeJSON(doc, v)
	}
	full := placeholder(reflect.TypeOf(docTypes[command]()).Elem(), "")
	b, err := json.Marshal(full.Addr().Interface())
	if err != nil {
		t.Fatal(err)
	}
	var ph any
	if err := json.Unmarshal(b, &ph); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0)
	for p := range reachable(reflect.TypeOf(docTypes[command]())) {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		doc = ensurePath(doc, ph, parsePath(p))
	}
	// Through the document's type: members in its order, as bcc prints.
	b, err = json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	typed := docTypes[command]()
	if err := strictjson.Unmarshal(b, typed, strictjson.RejectUnknown); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(typed); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// mergeJSON merges b into a: an object takes the members it lacks (and
// merges those both have), a list of objects takes the elements of b
// that show members none of its own has.
func mergeJSON(a, b any) any {
	switch av := a.(type) {
	case nil:
		return b
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return a
		}
		for k, v := range bv {
			av[k] = mergeJSON(av[k], v)
		}
		return av
	case []any:
		bv, ok := b.([]any)
		if !ok {
			return a
		}
		seen := map[string]bool{}
		for _, e := range av {
			memberPaths(e, "", seen)
		}
		for _, e := range bv {
			mine := map[string]bool{}
			memberPaths(e, "", mine)
			for p := range mine {
				if !seen[p] {
					av = append(av, e)
					for q := range mine {
						seen[q] = true
					}
					break
				}
			}
		}
		return av
	}
	return a
}

func memberPaths(v any, path string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			out[path+"."+k] = true
			memberPaths(sub, path+"."+k, out)
		}
	case []any:
		for _, sub := range x {
			memberPaths(sub, path+"[]", out)
		}
	}
}

// pathSeg is one step of a member path: a member name, [] (a list's
// elements) or * (a map's values).
type pathSeg struct {
	list, anyKey bool
	name         string
}

func parsePath(p string) []pathSeg {
	var out []pathSeg
	p = strings.TrimPrefix(p, "$")
	for p != "" {
		switch {
		case strings.HasPrefix(p, "[]"):
			out, p = append(out, pathSeg{list: true}), p[2:]
		case strings.HasPrefix(p, ".*"):
			out, p = append(out, pathSeg{anyKey: true}), p[2:]
		default:
			p = p[1:]
			i := strings.IndexAny(p, ".[")
			if i < 0 {
				i = len(p)
			}
			out, p = append(out, pathSeg{name: p[:i]}), p[i:]
		}
	}
	return out
}

// nodesAt are the values at path in v (every element of a list, every
// value of a map).
func nodesAt(v any, path []pathSeg) []any {
	if len(path) == 0 {
		return []any{v}
	}
	var out []any
	s := path[0]
	switch x := v.(type) {
	case map[string]any:
		if s.anyKey {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = append(out, nodesAt(x[k], path[1:])...)
			}
		} else if sub, ok := x[s.name]; ok && !s.list {
			out = append(out, nodesAt(sub, path[1:])...)
		}
	case []any:
		if s.list {
			for _, sub := range x {
				out = append(out, nodesAt(sub, path[1:])...)
			}
		}
	}
	return out
}

// ensurePath makes path present in doc, taking what it lacks from the
// placeholder document ph (which has every path): a missing member goes
// into the first object that can hold it, a missing list element or map
// entry is the placeholder's.
func ensurePath(doc, ph any, path []pathSeg) any {
	if len(path) == 0 || len(nodesAt(doc, path)) > 0 {
		return doc
	}
	parent := path[:len(path)-1]
	doc = ensurePath(doc, ph, parent)
	last := path[len(path)-1]
	from := nodesAt(ph, path)
	if len(from) == 0 {
		return doc
	}
	if last.list { // the list at parent is empty: give it the placeholder's element
		grand, key := parent[:len(parent)-1], parent[len(parent)-1].name
		for _, g := range nodesAt(doc, grand) {
			if m, ok := g.(map[string]any); ok {
				if l, ok := m[key].([]any); ok {
					m[key] = append(l, deepCopy(from[0]))
					return doc
				}
			}
		}
		return doc
	}
	for _, n := range nodesAt(doc, parent) {
		m, ok := n.(map[string]any)
		if !ok {
			continue
		}
		if last.anyKey {
			src := nodesAt(ph, parent)[0].(map[string]any)
			for k, v := range src {
				m[k] = deepCopy(v)
			}
		} else {
			m[last.name] = deepCopy(from[0])
		}
		return doc
	}
	return doc
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var c any
	_ = json.Unmarshal(b, &c)
	return c
}

// placeholder is a value of t with every member set: a string is
// "<member>", a number 1, a boolean true, a list one element, a map one
// entry ("key"), a pointer set; a type reached again inside itself is
// left zero.
func placeholder(t reflect.Type, name string) reflect.Value {
	v := reflect.New(t).Elem()
	fillPlaceholder(v, name, map[reflect.Type]bool{})
	return v
}

func fillPlaceholder(v reflect.Value, name string, on map[reflect.Type]bool) {
	t := v.Type()
	switch {
	case t == rawMessage:
		v.SetBytes([]byte("{}"))
		return
	case t == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)))
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if on[t.Elem()] {
			return
		}
		v.Set(reflect.New(t.Elem()))
		fillPlaceholder(v.Elem(), name, on)
	case reflect.Struct:
		if on[t] {
			return
		}
		on[t] = true
		defer delete(on, t)
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			embedded := f.Anonymous && f.Type.Kind() == reflect.Struct // its members are settable, it is not
			if tag == "-" || !f.IsExported() && !f.Anonymous || !v.Field(i).CanSet() && !embedded {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			fillPlaceholder(v.Field(i), tag, on)
		}
	case reflect.Slice:
		l := reflect.MakeSlice(t, 1, 1)
		fillPlaceholder(l.Index(0), name, on)
		v.Set(l)
	case reflect.Map:
		m := reflect.MakeMap(t)
		k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
		fillPlaceholder(k, "key", on)
		fillPlaceholder(e, name, on)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("<" + name + ">")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Interface:
		v.Set(reflect.ValueOf("<" + name + ">"))
	}
}

func nowOf(e *testEnv) string { return fmt.Sprint(e.clk.Now().UnixMilli()) }
