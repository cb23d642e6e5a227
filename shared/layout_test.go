// Package shared_test checks the layout rules of shared/README.md against
// the real import graph (go list -deps): what ships in the functions, and
// which layer may import which.
package shared_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/searchfabric/bcc"

// pkg is one package of the build graph (non-test imports only).
type pkg struct {
	ImportPath string
	Imports    []string // direct
	Deps       []string // transitive
	Standard   bool
}

// layout is what shared/README.md says.
type layout struct {
	layer  map[string]string          // package (module-relative) -> layer
	ships  map[string]bool            // package -> "ships" column
	allow  map[string]map[string]bool // layer -> layers it may import
	sdkOK  map[string]bool            // layer -> may depend on the AWS SDK, smithy, the Lambda runtime
	layers []string
}

// shippedLayers are the layers a function may link.
var shippedLayers = []string{"foundation", "core", "adapters", "lambda"}

// forbiddenSDK are the module prefixes foundation and core never depend on.
var forbiddenSDK = []string{"github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go", "github.com/aws/aws-lambda-go"}

func TestLayoutRules(t *testing.T) {
	l := readLayout(t)
	g := loadGraph(t)
	if v := check(g, l); len(v) > 0 {
		t.Fatalf("%d layout violations (see shared/README.md):\n  %s", len(v), strings.Join(v, "\n  "))
	}
}

// The checker catches what the rules forbid: the real graph plus one
// injected edge per rule must produce exactly that rule's violation. (The
// same was tried by editing the code; see the h17 report.)
func TestLayoutRulesCatchViolations(t *testing.T) {
	l := readLayout(t)
	cases := []struct {
		name      string
		from, imp string // module-relative, or a full external path
		want      string
	}{
		{"a function links test code", "functions/gc", "shared/testkit/memprobe", "functions/gc links shared/testkit/memprobe"},
		{"a function links the embedded stack through lambda", "shared/lambda/app", "shared/devstack/localaws", "shared/lambda/app (lambda) imports shared/devstack/localaws (devstack)"},
		{"a core package imports smithy", "shared/core/observe", "github.com/aws/smithy-go", "shared/core/observe (core) depends on github.com/aws/smithy-go"},
		{"a foundation package imports the SDK", "shared/policy", "github.com/aws/aws-sdk-go-v2/service/s3", "shared/policy (foundation) depends on github.com/aws/aws-sdk-go-v2/service/s3"},
		{"a core package imports an adapter", "shared/core/gc", "shared/adapters/awsio", "shared/core/gc (core) imports shared/adapters/awsio (adapters)"},
		{"contract imports a package of ours", "shared/contract", "shared/awslimit", "shared/contract imports shared/awslimit"},
		{"an unlisted package", "shared/core/gc", "shared/core/newthing", "shared/core/newthing is not in the table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := loadGraph(t)
			inject(g, tc.from, tc.imp)
			v := check(g, l)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Fatalf("injected %s -> %s; violations %v, want one containing %q", tc.from, tc.imp, v, tc.want)
			}
		})
	}
}

// inject adds from -> imp to the graph, and imp (with its deps) to the deps
// of every package that depends on from.
func inject(g map[string]*pkg, from, imp string) {
	full := func(p string) string {
		if strings.HasPrefix(p, "shared/") || strings.HasPrefix(p, "functions/") {
			return module + "/" + p
		}
		return p
	}
	f, i := full(from), full(imp)
	if g[i] == nil {
		g[i] = &pkg{ImportPath: i, Standard: false}
	}
	added := append([]string{i}, g[i].Deps...)
	g[f].Imports = append(g[f].Imports, i)
	for _, p := range g {
		if p.ImportPath == f || slices.Contains(p.Deps, f) {
			p.Deps = append(p.Deps, added...)
		}
	}
}

// check returns every violation of the layout rules in g.
func check(g map[string]*pkg, l layout) []string {
	var v []string
	rel := func(p string) (string, bool) { return strings.CutPrefix(p, module+"/") }
	shipped := map[string]bool{}
	for _, p := range sortedPkgs(g) {
		r, ours := rel(p.ImportPath)
		if !ours || !strings.HasPrefix(r, "functions/") {
			continue
		}
		for _, d := range p.Deps {
			dr, ours := rel(d)
			if !ours {
				continue
			}
			shipped[dr] = true
			if !slices.Contains(shippedLayers, l.layer[dr]) {
				v = append(v, fmt.Sprintf("%s links %s (%s): functions link only %s", r, dr, orUnlisted(l.layer[dr]), strings.Join(shippedLayers, ", ")))
			}
		}
	}
	for _, p := range sortedPkgs(g) {
		r, ours := rel(p.ImportPath)
		if !ours || !strings.HasPrefix(r, "shared/") {
			continue
		}
		layer, listed := l.layer[r]
		if !listed {
			v = append(v, fmt.Sprintf("%s is not in the table of shared/README.md", r))
			continue
		}
		if l.ships[r] != shipped[r] {
			v = append(v, fmt.Sprintf("%s: README says ships=%v, the functions link it: %v", r, l.ships[r], shipped[r]))
		}
		for _, imp := range p.Imports {
			ir, ours := rel(imp)
			if !ours {
				continue
			}
			if (r == "shared/contract" || strings.HasPrefix(r, "shared/contract/")) && !strings.HasPrefix(ir, "shared/contract/") {
				v = append(v, fmt.Sprintf("%s imports %s: the wire documents import no package of ours outside shared/contract", r, ir))
			}
			il, ok := l.layer[ir]
			switch {
			case !ok:
				v = append(v, fmt.Sprintf("%s is not in the table of shared/README.md (imported by %s)", ir, r))
			case !l.allow[layer][il]:
				v = append(v, fmt.Sprintf("%s (%s) imports %s (%s): %s may import only %s", r, layer, ir, il, layer, strings.Join(sortedKeys(l.allow[layer]), ", ")))
			}
		}
		if !l.sdkOK[layer] {
			for _, d := range p.Deps {
				for _, f := range forbiddenSDK {
					if d == f || strings.HasPrefix(d, f+"/") {
						v = append(v, fmt.Sprintf("%s (%s) depends on %s: %s packages never reach the AWS SDK, smithy or the Lambda runtime", r, layer, d, layer))
					}
				}
			}
		}
	}
	for r := range l.layer {
		if g[module+"/"+r] == nil {
			v = append(v, fmt.Sprintf("%s is in the table of shared/README.md but is not a package", r))
		}
	}
	slices.Sort(v)
	return slices.Compact(v)
}

func orUnlisted(layer string) string {
	if layer == "" {
		return "unlisted"
	}
	return layer
}

func sortedPkgs(g map[string]*pkg) []*pkg {
	out := slices.Collect(maps.Values(g))
	slices.SortFunc(out, func(a, b *pkg) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return out
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k, ok := range m {
		if ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// loadGraph lists every package of the module with its non-test imports and
// transitive dependencies.
func loadGraph(t *testing.T) map[string]*pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Deps,Standard", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if p.Standard || p.ImportPath == module+"/shared" { // this test's own package
			continue
		}
		g[p.ImportPath] = &p
	}
	return g
}

// readLayout parses the two tables of shared/README.md.
func readLayout(t *testing.T) layout {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := layout{layer: map[string]string{}, ships: map[string]bool{}, allow: map[string]map[string]bool{}, sdkOK: map[string]bool{}}
	cell := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		name := cell(cells[0])
		switch {
		case strings.HasPrefix(name, "shared/") && len(cells) >= 3:
			l.layer[name] = cell(cells[1])
			l.ships[name] = cell(cells[2]) == "yes"
		case len(cells) >= 3:
			l.layers = append(l.layers, name)
			l.allow[name] = map[string]bool{}
			for _, a := range strings.Split(cells[1], ",") {
				l.allow[name][cell(a)] = true
			}
			l.sdkOK[name] = cell(cells[2]) == "yes"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for p, layer := range l.layer {
		if l.allow[layer] == nil {
			t.Fatalf("shared/README.md: %s has layer %q, which the layers table does not define", p, layer)
		}
	}
	if len(l.layer) < 10 || len(l.layers) < 5 {
		t.Fatalf("shared/README.md: found %d packages and %d layers; the tables did not parse", len(l.layer), len(l.layers))
	}
	return l
}
