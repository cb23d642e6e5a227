package docscheck

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Problem is one thing the documentation gets wrong, with where and what to do.
type Problem struct {
	File string // repository-relative
	Line int    // 1-based; 0: the file as a whole
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return p.File + ": " + p.Msg
}

// Facts are what the code says must be documented.
type Facts struct {
	PolicyFields []string // JSON paths, e.g. gc.batch_size (PolicyFields)
	Metrics      []string // emitted metric names (EmittedMetrics)
}

// The files that answer "what is this setting" and "what is this metric".
const (
	ConfigurationDoc = "docs/configuration.md"
	ObservabilityDoc = "docs/observability.md"
	OperationsDoc    = "docs/operations.md"
)

// Check runs every check over the repository tree fsys (its root is the
// repository root) against facts.
func Check(fsys fs.FS, facts Facts) []Problem {
	docs, err := MarkdownFiles(fsys)
	if err != nil {
		return []Problem{{File: ".", Msg: "listing Markdown files: " + err.Error()}}
	}
	var out []Problem
	out = append(out, CheckLinks(fsys, docs)...)
	out = append(out, CheckMakeTargets(fsys, docs)...)
	out = append(out, CheckDefined(fsys, ConfigurationDoc, "BCC_POLICY field", policyRow, facts.PolicyFields,
		"| `%s` | <default> | <validation> | <what it does> |")...)
	out = append(out, CheckDefined(fsys, ObservabilityDoc, "metric", metricRow, facts.Metrics,
		"| `%s` | <function> | <dimension> | <what it counts> |")...)
	return out
}

// skipDirs are trees that are not the project's documentation.
var skipDirs = map[string]bool{"node_modules": true, "cdk.out": true, "build": true, "out": true, ".git": true, "testdata": true}

// MarkdownFiles lists every .md file of the tree outside skipDirs, sorted.
func MarkdownFiles(fsys fs.FS) ([]string, error) {
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// line is one line of a Markdown file with what fencing says about it.
type line struct {
	n      int
	text   string
	fenced bool // inside a ``` block
}

// paragraphs joins each run of non-blank lines outside fences (a code span
// or a link may wrap across lines) into one line numbered by its first; a
// table row or a heading stays alone. Fenced lines come through as they are.
func paragraphs(b []byte) []line {
	var out []line
	var cur *line
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for _, l := range lines(b) {
		t := strings.TrimSpace(l.text)
		switch {
		case l.fenced:
			flush()
			out = append(out, l)
		case t == "":
			flush()
		case strings.HasPrefix(t, "|") || strings.HasPrefix(t, "#"):
			flush()
			out = append(out, l)
		case cur == nil:
			c := l
			cur = &c
		default:
			cur.text += " " + t
		}
	}
	flush()
	return out
}

func lines(b []byte) []line {
	var out []line
	fenced := false
	for i, t := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(t), "```") {
			fenced = !fenced
			out = append(out, line{n: i + 1, text: t, fenced: true})
			continue
		}
		out = append(out, line{n: i + 1, text: t, fenced: fenced})
	}
	return out
}

var (
	codeSpan   = regexp.MustCompile("`[^`]*`")
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// Anchors are the fragment identifiers GitHub gives a Markdown file: one
// per heading (lowercased; punctuation other than '-' and '_' dropped;
// spaces to '-'; a repeated slug gets -1, -2, ...) plus explicit
// <a id=...>/<a name=...> anchors.
func Anchors(md []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines(md) {
		if l.fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n, dup := seen[s]; dup {
			seen[s] = n + 1
			s = fmt.Sprintf("%s-%d", s, n+1)
		} else {
			seen[s] = 0
		}
		out[s] = true
	}
	return out
}

// Slug is GitHub's anchor for a heading's text.
func Slug(text string) string {
	text = mdLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckLinks: every relative link of docs resolves to a file or directory
// of fsys, and an anchor into a Markdown file names one of its headings.
func CheckLinks(fsys fs.FS, docs []string) []Problem {
	var out []Problem
	anchors := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := anchors[p]; ok {
			return a, nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		anchors[p] = Anchors(b)
		return anchors[p], nil
	}
	for _, doc := range docs {
		b, err := fs.ReadFile(fsys, doc)
		if err != nil {
			out = append(out, Problem{File: doc, Msg: err.Error()})
			continue
		}
		for _, l := range paragraphs(b) {
			if l.fenced {
				continue
			}
			text := codeSpan.ReplaceAllString(l.text, "")
			for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				resolved := doc
				if file != "" {
					if path.IsAbs(file) {
						out = append(out, Problem{File: doc, Line: l.n, Msg: fmt.Sprintf("link %q is absolute: use a path relative to %s", target, doc)})
						continue
					}
					resolved = path.Join(path.Dir(doc), file)
					if _, err := fs.Stat(fsys, resolved); err != nil {
						out = append(out, Problem{File: doc, Line: l.n, Msg: fmt.Sprintf("link %q: %s does not exist", target, resolved)})
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(resolved, ".md") {
					continue
				}
				a, err := anchorsOf(resolved)
				if err != nil {
					out = append(out, Problem{File: doc, Line: l.n, Msg: fmt.Sprintf("link %q: %v", target, err)})
					continue
				}
				if !a[anchor] {
					out = append(out, Problem{File: doc, Line: l.n, Msg: fmt.Sprintf("link %q: %s has no heading with anchor #%s", target, resolved, anchor)})
				}
			}
		}
	}
	return out
}

var (
	makeRule    = regexp.MustCompile(`^([A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*)[ \t]*::?(?:[^=]|$)`)
	makeInCode  = regexp.MustCompile("`make ([^`]*)`")
	makeFenced  = regexp.MustCompile(`^\s*(?:\$\s+)?make\s+(.*)$`)
	makeWord    = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
	makeVariant = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\??=`) // VAR=value, VAR?=value
)

// MakeTargets are the targets the Makefile and mk/*.mk define.
func MakeTargets(fsys fs.FS) (map[string]bool, error) {
	files := []string{"Makefile"}
	mk, err := fs.Glob(fsys, "mk/*.mk")
	if err != nil {
		return nil, err
	}
	files = append(files, mk...)
	out := map[string]bool{}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		for _, t := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(t, "\t") || strings.HasPrefix(t, "#") {
				continue
			}
			if m := makeRule.FindStringSubmatch(t); m != nil {
				for _, name := range strings.Fields(m[1]) {
					out[name] = true
				}
			}
		}
	}
	return out, nil
}

// MakeMentions are the make targets a document names in code: `make X ...`
// spans and fenced lines starting with make (VAR=value words skipped).
func MakeMentions(md []byte) []struct {
	Line   int
	Target string
} {
	var out []struct {
		Line   int
		Target string
	}
	add := func(n int, args string) {
		for _, w := range strings.Fields(args) {
			if makeVariant.MatchString(w) || strings.HasPrefix(w, "-") {
				continue
			}
			if makeWord.MatchString(w) {
				out = append(out, struct {
					Line   int
					Target string
				}{n, w})
			}
			return // only the first target word
		}
	}
	for _, l := range paragraphs(md) {
		if l.fenced {
			if m := makeFenced.FindStringSubmatch(l.text); m != nil {
				add(l.n, m[1])
			}
			continue
		}
		for _, m := range makeInCode.FindAllStringSubmatch(l.text, -1) {
			add(l.n, m[1])
		}
	}
	return out
}

// CheckMakeTargets: every make target docs name exists.
func CheckMakeTargets(fsys fs.FS, docs []string) []Problem {
	targets, err := MakeTargets(fsys)
	if err != nil {
		return []Problem{{File: "Makefile", Msg: err.Error()}}
	}
	var out []Problem
	for _, doc := range docs {
		b, err := fs.ReadFile(fsys, doc)
		if err != nil {
			out = append(out, Problem{File: doc, Msg: err.Error()})
			continue
		}
		for _, m := range MakeMentions(b) {
			if !targets[m.Target] {
				out = append(out, Problem{File: doc, Line: m.Line, Msg: fmt.Sprintf("names `make %s`, but no Makefile or mk/*.mk defines target %q", m.Target, m.Target)})
			}
		}
	}
	return out
}

// A defining row's first cell is exactly one code span.
var (
	policyRow = regexp.MustCompile("^\\|\\s*`([a-z][a-z0-9_]*(?:\\.[a-z][a-z0-9_]*)*)`\\s*\\|")
	metricRow = regexp.MustCompile("^\\|\\s*`([A-Z][A-Za-z0-9]*)`\\s*\\|")
)

// DefiningRows counts, per name, the table rows of md whose first cell is
// exactly one code span matching row, with the line of each.
func DefiningRows(md []byte, row *regexp.Regexp) map[string][]int {
	out := map[string][]int{}
	for _, l := range lines(md) {
		if l.fenced {
			continue
		}
		if m := row.FindStringSubmatch(l.text); m != nil {
			out[m[1]] = append(out[m[1]], l.n)
		}
	}
	return out
}

// CheckDefined: every one of names has exactly one defining row in doc, and
// every defining row names one of names. rowTemplate (one %s) is the row to
// add, shown in the failure.
func CheckDefined(fsys fs.FS, doc, what string, row *regexp.Regexp, names []string, rowTemplate string) []Problem {
	b, err := fs.ReadFile(fsys, doc)
	if err != nil {
		return []Problem{{File: doc, Msg: fmt.Sprintf("cannot read the file that documents every %s: %v", what, err)}}
	}
	rows := DefiningRows(b, row)
	var out []Problem
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
		switch at := rows[n]; {
		case len(at) == 0:
			out = append(out, Problem{File: doc, Msg: fmt.Sprintf("%s %s is not documented: add one row to the table, "+rowTemplate, what, n, n)})
		case len(at) > 1:
			out = append(out, Problem{File: doc, Line: at[1], Msg: fmt.Sprintf("%s %s has %d defining rows (lines %v): keep exactly one", what, n, len(at), at)})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(rows)) {
		if !known[n] {
			out = append(out, Problem{File: doc, Line: rows[n][0], Msg: fmt.Sprintf("a row documents %s %s, which does not exist (renamed or removed?): fix or delete the row", what, n)})
		}
	}
	return out
}

// PolicyFields are the JSON paths of every leaf of a policy value (a struct
// field that is not itself a struct of fields), dotted: "gc.batch_size",
// "budgets.class_concurrency.gc". Types with their own JSON form (a
// Duration, a CollectionSet) are leaves.
func PolicyFields(v any) []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			p := prefix + name
			if f.Type.Kind() == reflect.Struct && !hasOwnJSON(f.Type) {
				walk(f.Type, p+".")
				continue
			}
			out = append(out, p)
		}
	}
	walk(reflect.TypeOf(v), "")
	return out
}

func hasOwnJSON(t reflect.Type) bool {
	for _, m := range []string{"UnmarshalJSON", "MarshalJSON"} {
		if _, ok := t.MethodByName(m); ok {
			return true
		}
		if _, ok := reflect.PointerTo(t).MethodByName(m); ok {
			return true
		}
	}
	return false
}

// EmitExpr matches a metrics.Recorder call naming a metric by literal; its
// first group is the name. infra's dashboard test uses the same expression.
const EmitExpr = `\.(?:Add|AddDim|Duration|DurationDim)\("([A-Za-z][A-Za-z0-9]*)"`

var emit = regexp.MustCompile(EmitExpr)

// EmittedMetrics are the metric names passed to a metrics call in the
// non-test Go sources under dir of fsys, sorted.
func EmittedMetrics(fsys fs.FS, dir string) ([]string, error) {
	seen := map[string]bool{}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		for _, m := range emit.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
		}
		return nil
	})
	return slices.Sorted(maps.Keys(seen)), err
}

// RunbookAnchor is the runbook section of the alarm named name in a
// deployment with prefix: the name without "<prefix>-".
func RunbookAnchor(prefix, name string) string {
	return strings.TrimPrefix(name, prefix+"-")
}
