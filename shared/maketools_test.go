package shared

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bsdCP is a cp that accepts only BSD cp's options, as macOS's does
// (neither --parents nor -t, both GNU's).
const bsdCP = `#!/usr/bin/env bash
for a in "$@"; do
	case "$a" in
	--) break ;;
	--*) echo "cp: illegal option -- ${a#-}" >&2; exit 64 ;;
	-*t*) echo "cp: illegal option -- t" >&2; exit 64 ;;
	esac
done
exec /bin/cp "$@"
`

// reachedMake stands in for make: it checks that the clean copy holds the
// tree and stops there (the synthesis is not what this test checks).
const reachedMake = `#!/usr/bin/env bash
test -f go.mod && test -f infra/go.mod && test -f mk/infra.mk || { echo "make: the clean copy lacks the tree" >&2; exit 1; }
echo "make reached in a copy of the tree"
`

// Review of issue 28 (prerequisites, a developer on a Mac).

// TestSynthFreshCopiesTheTreeWithBSDcp runs mk/synth-fresh.sh (make
// synth-fresh, which CI and a developer run) as on a Mac: with BSD cp on
// PATH it must get past copying the tree into its clean directory.
func TestSynthFreshCopiesTheTreeWithBSDcp(t *testing.T) {
	for _, tool := range []string{"bash", "git", "xargs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not in PATH", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	shim := t.TempDir()
	for name, body := range map[string]string{"cp": bsdCP, "make": reachedMake} {
		if err := os.WriteFile(filepath.Join(shim, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(root, "mk", "synth-fresh.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH"), "TMPDIR="+t.TempDir())
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "make reached in a copy of the tree") {
		t.Fatalf("mk/synth-fresh.sh with BSD cp did not get past copying the tree:\n%s", out)
	}
}

// TestRaceTargetsNameAMissingCCompiler: make test (test-go) and make
// test-race run the race detector, which needs cgo and so a C compiler.
// On a machine without one (a fresh Mac without the command line tools, a
// slim Linux image) the target must say so in one line naming it, as it
// does for every other missing tool, not Go's "-race requires cgo".
func TestRaceTargetsNameAMissingCCompiler(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir() // go, make and bash only: no cc, gcc or clang
	for _, tool := range []string{"go", "make", "bash"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not in PATH", tool)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CC=") && !strings.HasPrefix(kv, "CGO_ENABLED=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "make"), "-s", "-C", root, "test-race", "RACE_PKGS=./shared/guard/", "RACE_FLAGS=-run=^$")
	cmd.Env = append(env, "PATH="+bin)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make test-race without a C compiler succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "test-race: needs a C compiler") {
		t.Fatalf("make test-race without a C compiler does not say what is missing:\n%s", out)
	}
}
