package model

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A configuration of the model: its scope and mutation (-D names), and
// the property a mutation must violate ("" for a run that must pass).
type config struct {
	defines []string
	want    string
}

// The properties, by the text of their assertion.
var properties = map[string]string{
	"P1 readable":    "assertion violated (got==want)",
	"P2 no dangling": "assertion violated live[n]",
	"P3 lifetime":    "assertion violated (life[n]==hlife)",
	"P4 stale facts": "assertion violated  !(stale_applied)",
}

var configs = []config{
	// The protocol as it is, and with a publisher without the capability.
	{[]string{"SCOPE_DATA"}, ""},
	{[]string{"SCOPE_DATA", "NOCAP"}, ""},
	{[]string{"SCOPE_LIFE"}, ""},
	{[]string{"SCOPE_LIFE", "NOCAP"}, ""},
	// Each clause of the check removed: a counterexample.
	{[]string{"SCOPE_DATA", "MUT_INPUT"}, "P1 readable"},
	{[]string{"SCOPE_DATA", "MUT_SUM"}, "P1 readable"},
	{[]string{"SCOPE_DATA", "MUT_DEL"}, "P1 readable"},
	{[]string{"SCOPE_LIFE", "MUT_INC"}, "P3 lifetime"},
	{[]string{"SCOPE_LIFE", "MUT_FACTS"}, "P4 stale facts"},
	// GC without its retained-version gate: rule 3's re-add window.
	{[]string{"SCOPE_DATA", "MUT_GC_RETAIN"}, "P2 no dangling"},
}

// The model holds every property exhaustively in each scope, and loses
// one to a counterexample with each clause of the publisher's check
// removed. Run by make model-check (BCC_MODEL_CHECK=1).
func TestModelCheck(t *testing.T) {
	if os.Getenv("BCC_MODEL_CHECK") == "" {
		t.Skip("model check: run by make model-check (BCC_MODEL_CHECK=1; needs spin and gcc)")
	}
	for _, tool := range []string{"spin", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (Debian package spin; .ci/run installs it): %v", tool, err)
		}
	}
	model, err := filepath.Abs("cutover.pml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configs {
		name := strings.Join(c.defines, "+")
		t.Run(name, func(t *testing.T) {
			out := verify(t, model, c.defines)
			errs := regexp.MustCompile(`errors: (\d+)`).FindStringSubmatch(out)
			if errs == nil {
				t.Fatalf("no verification result:\n%s", out)
			}
			if c.want == "" {
				if errs[1] != "0" || strings.Contains(out, "MEMLIM") || strings.Contains(out, "Search not completed") {
					t.Fatalf("want a complete search without errors:\n%s", out)
				}
				t.Logf("%s: every property holds: %s", name, summary(out))
				return
			}
			if errs[1] == "0" || !strings.Contains(out, properties[c.want]) {
				t.Fatalf("want a counterexample to %s:\n%s", c.want, out)
			}
			t.Logf("%s: counterexample to %s: %s", name, c.want, summary(out))
		})
	}
}

// verify generates, compiles and runs the verifier of the model under
// defines, and returns its report.
func verify(t *testing.T, model string, defines []string) string {
	t.Helper()
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil && name != "./pan" {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	args := []string{}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	run("spin", append(args, "-a", model)...)
	run("gcc", "-O2", "-w", "-DSAFETY", "-DCOLLAPSE", "-DMEMLIM=2048", "-o", "pan", "pan.c")
	return run("./pan", "-m10000", "-w22")
}

func summary(out string) string {
	var parts []string
	for _, re := range []string{`errors: \d+`, `\d+ states, stored`, `depth reached \d+`} {
		if m := regexp.MustCompile(re).FindString(out); m != "" {
			parts = append(parts, m)
		}
	}
	return strings.Join(parts, ", ")
}
