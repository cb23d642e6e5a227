package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.txt, the docs blocks they feed (docs/bcc.md, docs/operations.md) and events/bcc/*.json")

// cleanEnv is an environment without AWS configuration: no region, no
// credentials, no metadata service.
var cleanEnv = []string{"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}

// transcript is what a reader of the docs sees: the command, its output
// (stdout then stderr) and its exit code.
func transcript(r result) string {
	var b strings.Builder
	b.WriteString("$ bcc " + strings.Join(quoteArgs(r.args), " ") + "\n")
	b.WriteString(r.stdout)
	b.WriteString(r.stderr)
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	b.WriteString("[exit " + strconv.Itoa(r.code) + "]\n")
	return b.String()
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \"'{}") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

// golden compares got with testdata/golden/name.txt (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/bcc -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Fatalf("%s differs from the golden file (go test ./cmd/bcc -run '%s' -update rewrites it):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}

// The command line as a new operator meets it, on the built binary:
// help everywhere (exit 0), an unknown command with a suggestion, no
// positional arguments, conflicting flags refused, and one clear line
// for a missing deployment, region or credentials. Each transcript is a
// golden file; docs/bcc.md shows them (TestDocsShowTheGoldenTranscripts).
func TestCommandLineConventions(t *testing.T) {
	cases := []struct {
		name string
		code int
		args []string
		want []string // in stdout+stderr
		env  []string // the environment besides cleanEnv
	}{
		{"help", exitOK, []string{"--help"}, []string{"Usage:", "Views (read-only):", "status", "Exit codes"}, nil},
		{"unknown-command", exitError, []string{"stauts"}, []string{`unknown command "stauts"`, "Did you mean this?", "\tstatus"}, nil},
		{"help-unknown-command", exitError, []string{"help", "stauts"}, []string{`unknown command "stauts"`, "Did you mean this?", "\tstatus"}, nil},
		{"stack-and-prefix-variables", exitError, []string{"status"}, []string{"BCC_STACK and BCC_PREFIX both name the deployment"}, []string{"BCC_STACK=bcc-coordinator", "BCC_PREFIX=bcc"}},
		{"write-with-override", exitError, []string{"recover", "--confirm", "--stack", "bcc-coordinator"}, []string{"BCC_CCS_ENDPOINT in the environment", "read-only"},
			[]string{"BCC_CCS_ENDPOINT=https://ccs.other.example"}},
		{"positional-argument", exitError, []string{"status", "orders", "--prefix", "bcc"}, []string{"takes no arguments", "--help"}, nil},
		{"unknown-flag", exitError, []string{"status", "--json"}, []string{"unknown flag: --json"}, nil},
		{"bad-output", exitError, []string{"--prefix", "bcc", "-o", "yaml", "status"}, []string{`--output "yaml"`}, nil},
		{"stack-and-prefix", exitError, []string{"--stack", "bcc-coordinator", "--prefix", "bcc", "status"}, []string{"--stack and --prefix"}, nil},
		{"now-with-confirm", exitError, []string{"recover", "--confirm", "--now", "2026-01-01T00:00:00Z", "--prefix", "bcc"}, []string{"--now is for read-only"}, nil},
		{"now-with-yes", exitError, []string{"confirm-lineage", "--collection", "orders", "--by", "alice", "--yes", "--now", "2026-01-01T00:00:00Z", "--prefix", "bcc"}, []string{"--now is for read-only"}, nil},
		{"missing-collection", exitError, []string{"gc-plan", "--prefix", "bcc"}, []string{`"collection"`}, nil},
		{"no-deployment", exitError, []string{"status"}, []string{"which deployment?"}, nil},
		{"no-region", exitError, []string{"--prefix", "bcc", "status"}, []string{"no AWS region"}, nil},
		{"no-credentials", exitError, []string{"--prefix", "bcc", "--region", "eu-west-1", "status"}, []string{"no AWS credentials"}, nil},
		{"bad-policy", exitError, []string{"--prefix", "bcc", "--policy", `{"no_such_field": 1}`, "status"}, []string{"--policy"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := execBCC(t, append(append([]string{}, cleanEnv...), tc.env...), tc.args...)
			all := r.stdout + r.stderr
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Fatalf("output lacks %q:\n%s", w, all)
				}
			}
			if tc.code == exitError && strings.Count(strings.TrimSpace(r.stderr), "\n") > 4 {
				t.Fatalf("an error is a line or two, not a chain:\n%s", r.stderr)
			}
			if strings.Contains(all, "operation error") || strings.Contains(all, "HostID") {
				t.Fatalf("a raw SDK error reached the operator:\n%s", all)
			}
			tr := transcript(r)
			if len(tc.env) > 0 {
				tr = strings.Replace(tr, "$ bcc", "$ "+strings.Join(tc.env, " ")+" bcc", 1)
			}
			golden(t, tc.name, tr)
		})
	}
}

// bcc, bcc -h, bcc help and bcc --help all print the full help and exit 0;
// every command has its own description, examples and flags, each flag
// described.
func TestHelpOfEveryCommand(t *testing.T) {
	want := execBCC(t, cleanEnv, "--help")
	for _, args := range [][]string{{}, {"-h"}, {"help"}} {
		if r := execBCC(t, cleanEnv, args...); r.code != exitOK || r.stdout != want.stdout {
			t.Fatalf("bcc %v: exit %d, not the help:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	flagLine := regexp.MustCompile(`^\s+(-\w, )?--[a-z-]+( \w+)?\s{2,}\S`)
	seen := map[string]string{}
	for _, cmd := range []string{"status", "leases", "recover", "plan", "apply", "gc-plan", "compaction-plan", "confirm-lineage"} {
		r := execBCC(t, cleanEnv, cmd, "--help")
		if h := execBCC(t, cleanEnv, "help", cmd); h.stdout != r.stdout {
			t.Fatalf("bcc help %s differs from bcc %s --help", cmd, cmd)
		}
		if r.code != exitOK || !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "Global flags") {
			t.Fatalf("bcc %s --help: exit %d\n%s", cmd, r.code, r.stdout)
		}
		local := r.stdout[strings.Index(r.stdout, "\nFlags:"):strings.Index(r.stdout, "Global flags")]
		for _, l := range strings.Split(local, "\n")[2:] {
			if strings.TrimSpace(l) != "" && !flagLine.MatchString(l) && !strings.HasPrefix(l, "        ") {
				t.Fatalf("bcc %s: a flag without a description: %q", cmd, l)
			}
		}
		if other, dup := seen[local]; dup {
			t.Fatalf("bcc %s and bcc %s have the same flags", cmd, other)
		}
		seen[local] = cmd
		golden(t, "help-"+cmd, transcript(r))
	}
}

// Shell completion: the scripts, and values completed for --output.
func TestShellCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if r := execBCC(t, cleanEnv, "completion", sh); r.code != exitOK || len(r.stdout) < 500 {
			t.Fatalf("completion %s: exit %d\n%s", sh, r.code, r.stderr)
		}
	}
	r := execBCC(t, cleanEnv, "__complete", "status", "--output", "")
	if !strings.Contains(r.stdout, "json") || !strings.Contains(r.stdout, "table") {
		t.Fatalf("--output completes to json and table:\n%s", r.stdout)
	}
	r = execBCC(t, cleanEnv, "__complete", "sta")
	if !strings.Contains(r.stdout, "status") {
		t.Fatalf("commands complete:\n%s", r.stdout)
	}
}

// make bcc builds the binary to the documented path.
func TestMakeBccBuildsTheBinary(t *testing.T) {
	out, err := exec.Command("make", "-s", "-n", "-C", "../..", "bcc").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n bcc: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "build -o bin/bcc ./cmd/bcc") {
		t.Fatalf("make bcc does not build bin/bcc:\n%s", out)
	}
}

// goldenBlock is a docs block fed by a golden file.
var goldenBlock = regexp.MustCompile("(?s)<!-- golden ([a-z0-9-]+) -->\n(.*?)<!-- /golden -->")

// goldenDocs are the documents that show golden transcripts: the CLI's
// reference, and the operations guide's session (its stale-plan error).
var goldenDocs = []string{"docs/bcc.md", "docs/operations.md"}

// Every transcript docs/bcc.md and docs/operations.md show in a golden
// block is a golden file, byte for byte, and every golden file is shown.
// -update rewrites the blocks from the files.
func TestDocsShowTheGoldenTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	shown := map[string]bool{}
	var errs []string
	for _, rel := range goldenDocs {
		docPath := filepath.Join("..", "..", filepath.FromSlash(rel))
		doc, err := os.ReadFile(docPath)
		if err != nil {
			t.Fatal(err)
		}
		out := goldenBlock.ReplaceAllStringFunc(string(doc), func(block string) string {
			m := goldenBlock.FindStringSubmatch(block)
			name := m[1]
			shown[name] = true
			g, err := os.ReadFile(filepath.Join("testdata", "golden", name+".txt"))
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s shows %q, which no test produces", rel, name))
				return block
			}
			want := "```text\n" + string(g) + "```\n"
			if m[2] != want {
				errs = append(errs, fmt.Sprintf("%s block %q is not its golden file", rel, name))
			}
			return "<!-- golden " + name + " -->\n" + want + "<!-- /golden -->"
		})
		if *update && out != string(doc) {
			if err := os.WriteFile(docPath, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range files {
		if n := strings.TrimSuffix(filepath.Base(f), ".txt"); !shown[n] {
			errs = append(errs, fmt.Sprintf("golden %s is not shown in %s", n, strings.Join(goldenDocs, " or ")))
		}
	}
	if *update {
		return
	}
	if len(errs) > 0 {
		t.Fatalf("%s (go test ./cmd/bcc -run TestDocsShowTheGoldenTranscripts -update)", strings.Join(errs, "\n"))
	}
}
