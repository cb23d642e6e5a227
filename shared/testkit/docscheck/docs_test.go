package docscheck_test

import (
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/testkit/docscheck"
)

// root is the repository root, seen from this package.
const root = "../../.."

// facts reads what the code says must be documented.
func facts(t *testing.T, fsys fs.FS) docscheck.Facts {
	t.Helper()
	metrics, err := docscheck.EmittedMetrics(fsys, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(metrics) < 50 {
		t.Fatalf("found only %d emitted metric names under shared/: the scan is broken", len(metrics))
	}
	fields := docscheck.PolicyFields(policy.Default())
	if len(fields) < 40 || !slices.Contains(fields, "gc.batch_size") || !slices.Contains(fields, "budgets.class_concurrency.gc") {
		t.Fatalf("policy fields %v: the walk is broken", fields)
	}
	return docscheck.Facts{PolicyFields: fields, Metrics: metrics}
}

// TestDocs is the documentation check of `make test`: links and anchors
// resolve, named make targets exist, every BCC_POLICY field and every
// emitted metric is documented exactly once. Each failure names the file
// and the row to add or fix.
func TestDocs(t *testing.T) {
	fsys := os.DirFS(root)
	for _, p := range docscheck.Check(fsys, facts(t, fsys)) {
		t.Error(p)
	}
}

// TestDefaultsBlockIsThePolicy: the JSON block configuration.md calls "the
// whole policy, with its defaults" parses to exactly policy.Default().
func TestDefaultsBlockIsThePolicy(t *testing.T) {
	b, err := os.ReadFile(root + "/" + docscheck.ConfigurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	block := jsonBlock(t, string(b))
	p, err := policy.Parse([]byte(block))
	if err != nil {
		t.Fatalf("%s: the defaults block does not parse: %v", docscheck.ConfigurationDoc, err)
	}
	if !reflect.DeepEqual(p, policy.Default()) {
		t.Errorf("%s: the defaults block is not policy.Default(): update it", docscheck.ConfigurationDoc)
	}
}

func jsonBlock(t *testing.T, md string) string {
	t.Helper()
	_, after, ok := strings.Cut(md, "```json\n")
	if !ok {
		t.Fatalf("%s has no ```json block", docscheck.ConfigurationDoc)
	}
	block, _, _ := strings.Cut(after, "```")
	return block
}

// overlay is the real tree's documentation, make files and Go sources in
// memory, to mutate.
func overlay(t *testing.T) fstest.MapFS {
	t.Helper()
	real := os.DirFS(root)
	out := fstest.MapFS{}
	err := fs.WalkDir(real, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "cdk.out", "build", "out", ".git", "testdata":
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".mk") || strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".png") || p == "Makefile" {
			b, err := fs.ReadFile(real, p)
			if err != nil {
				return err
			}
			out[p] = &fstest.MapFile{Data: b}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// edit replaces old (which must occur) by new in file of fsys.
func edit(t *testing.T, fsys fstest.MapFS, file, old, new string) {
	t.Helper()
	f, ok := fsys[file]
	if !ok || !strings.Contains(string(f.Data), old) {
		t.Fatalf("%s does not contain %q", file, old)
	}
	fsys[file] = &fstest.MapFile{Data: []byte(strings.Replace(string(f.Data), old, new, 1))}
}

// dropLine removes the first line of file starting with prefix.
func dropLine(t *testing.T, fsys fstest.MapFS, file, prefix string) {
	t.Helper()
	lines := strings.Split(string(fsys[file].Data), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
	if i < 0 {
		t.Fatalf("%s has no line starting %q", file, prefix)
	}
	fsys[file] = &fstest.MapFile{Data: []byte(strings.Join(slices.Delete(lines, i, i+1), "\n"))}
}

// The check fails for each kind of missing documentation: each mutation of
// a copy of the real tree yields exactly the problem it should, and the
// unmutated copy none.
func TestCheckCatchesEachMissingKind(t *testing.T) {
	clean := overlay(t)
	base := facts(t, clean)
	if got := docscheck.Check(clean, base); len(got) != 0 {
		t.Fatalf("the unmutated tree has problems (TestDocs lists them): %v", got)
	}
	cases := []struct {
		name   string
		mutate func(fsys fstest.MapFS, f *docscheck.Facts)
		want   string // in the one problem's text
	}{
		{"a new metric without a row", func(fsys fstest.MapFS, f *docscheck.Facts) {
			fsys["shared/core/newthing/newthing.go"] = &fstest.MapFile{Data: []byte("package newthing\n\nfunc f(m rec) { m.AddDim(\"WidgetsFrobbed\", \"Kind\", \"gc\", 1) }\n")}
			var err error
			if f.Metrics, err = docscheck.EmittedMetrics(fsys, "shared"); err != nil {
				t.Fatal(err)
			}
		}, "docs/observability.md: metric WidgetsFrobbed is not documented: add one row to the table, | `WidgetsFrobbed` |"},
		{"a metric's row removed", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			dropLine(t, fsys, docscheck.ObservabilityDoc, "| `GCRefused` |")
		}, "metric GCRefused is not documented"},
		{"a metric documented twice", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			edit(t, fsys, docscheck.ObservabilityDoc, "\n| `GCRefused` |", "\n| `GCRefused` | again | | |\n| `GCRefused` |")
		}, "metric GCRefused has 2 defining rows"},
		{"a row for a metric nobody emits", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			edit(t, fsys, docscheck.ObservabilityDoc, "\n| `GCRefused` |", "\n| `GCRefusedd` | gc | | |\n| `GCRefused` |")
		}, "a row documents metric GCRefusedd, which does not exist"},
		{"a new policy field without a row", func(_ fstest.MapFS, f *docscheck.Facts) {
			type grown struct {
				policy.Policy
				Extra struct {
					Knob int `json:"knob_ms"`
				} `json:"extra"`
			}
			f.PolicyFields = docscheck.PolicyFields(grown{})
		}, "docs/configuration.md: BCC_POLICY field extra.knob_ms is not documented: add one row to the table, | `extra.knob_ms` |"},
		{"a policy field's row removed", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			dropLine(t, fsys, docscheck.ConfigurationDoc, "| `gc.batch_size` |")
		}, "BCC_POLICY field gc.batch_size is not documented"},
		{"a link to a missing file", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			edit(t, fsys, "README.md", "(docs/safety.md)", "(docs/safty.md)")
		}, `README.md:`},
		{"a link to a missing anchor", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			edit(t, fsys, docscheck.OperationsDoc, "\n### gc-refused\n", "\n### gc-refusal\n")
		}, "has no heading with anchor #gc-refused"},
		{"a make target that does not exist", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			edit(t, fsys, "README.md", "`make demo`", "`make demo-fast`")
		}, "names `make demo-fast`, but no Makefile or mk/*.mk defines target"},
		{"a make target that does not exist, its code span wrapped", func(fsys fstest.MapFS, _ *docscheck.Facts) {
			edit(t, fsys, "docs/deploying.md", "`make localstack-up`", "`make\nlocalstack-upp`")
		}, "names `make localstack-upp`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := overlay(t)
			f := docscheck.Facts{PolicyFields: slices.Clone(base.PolicyFields), Metrics: slices.Clone(base.Metrics)}
			c.mutate(fsys, &f)
			got := docscheck.Check(fsys, f)
			if len(got) == 0 {
				t.Fatalf("the check passed; want a problem containing %q", c.want)
			}
			var all []string
			found := false
			for _, p := range got {
				all = append(all, p.String())
				found = found || strings.Contains(p.String(), c.want)
			}
			if !found {
				t.Errorf("problems %q; want one containing %q", all, c.want)
			}
		})
	}
}

func TestSlugFollowsGitHub(t *testing.T) {
	for in, want := range map[string]string{
		"Priority and fairness (the scheduling policy)":               "priority-and-fairness-the-scheduling-policy",
		"What the coordinator owns under `data/`":                     "what-the-coordinator-owns-under-data",
		"The operator CLI: `bcc`":                                     "the-operator-cli-bcc",
		"Retention windows are their own class (`retention_reclaim`)": "retention-windows-are-their-own-class-retention_reclaim",
		"gc-refused":              "gc-refused",
		"Runbooks: one per alarm": "runbooks-one-per-alarm",
	} {
		if got := docscheck.Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
	a := docscheck.Anchors([]byte("# A\n## B\n```\n# not a heading\n```\n## B\n<a id=\"x\"></a>\n"))
	for _, want := range []string{"a", "b", "b-1", "x"} {
		if !a[want] {
			t.Errorf("anchor %q missing from %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a fenced line counted as a heading")
	}
}
