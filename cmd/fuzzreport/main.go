// Command fuzzreport runs every fuzz target of the repository for a fixed
// time and writes what happened: a markdown table on stdout and in
// <out>/fuzz.md, the same data in <out>/fuzz.json and each target's raw
// `go test` output in <out>/fuzz/<Target>.log.
//
// Discovery: `go test -list '^Fuzz' ./...` (a new target is run without
// being registered anywhere). Each target runs alone, one after another:
//
//	go test -run '^$' -fuzz '^<Target>$' -fuzztime <t> -fuzzminimizetime <m> -parallel <p> <pkg>
//
// A finding is a failing input: the go tool writes it to the package's
// testdata/fuzz/<Target>/, where `make test` replays it from then on. The
// exit status is non-zero when any target found something or failed to
// run. Executions are the fuzzer's own count (the last progress line).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Result is one target's run.
type Result struct {
	Package     string  `json:"package"`
	Target      string  `json:"target"`
	Seconds     float64 `json:"seconds"`
	Execs       int64   `json:"execs"`
	Interesting int64   `json:"new_interesting"`
	Corpus      int64   `json:"corpus_total"`
	Findings    int     `json:"findings"`
	Status      string  `json:"status"` // ok, finding, error
	Detail      string  `json:"detail,omitempty"`
}

var progress = regexp.MustCompile(`execs: (\d+) .*new interesting: (\d+) \(total: (\d+)\)`)

func main() {
	fuzztime := flag.String("fuzztime", "30s", "time per target (go test -fuzztime)")
	minimize := flag.String("minimizetime", "200x", "minimization budget per new input (go test -fuzzminimizetime; a duration spends all of it on every large input)")
	parallel := flag.Int("parallel", 0, "fuzzing workers per target (0: GOMAXPROCS)")
	only := flag.String("only", "", "run only targets whose name matches this regexp")
	out := flag.String("out", "out", "report directory")
	flag.Parse()
	if err := run(*fuzztime, *minimize, *parallel, *only, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fuzzreport:", err)
		os.Exit(1)
	}
}

type target struct{ pkg, name string }

func run(fuzztime, minimize string, parallel int, only, out string, stdout io.Writer) error {
	var filter *regexp.Regexp
	if only != "" {
		var err error
		if filter, err = regexp.Compile(only); err != nil {
			return fmt.Errorf("-only: %w", err)
		}
	}
	targets, err := discover()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "fuzz"), 0o755); err != nil {
		return err
	}
	var results []Result
	for _, t := range targets {
		if filter != nil && !filter.MatchString(t.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "fuzz %s %s for %s\n", t.pkg, t.name, fuzztime)
		r := fuzzOne(t, fuzztime, minimize, parallel, filepath.Join(out, "fuzz", t.name+".log"))
		fmt.Fprintf(os.Stderr, "  %s: %d execs, %d new interesting, %s\n", r.Status, r.Execs, r.Interesting, r.Detail)
		results = append(results, r)
	}
	if len(results) == 0 {
		return fmt.Errorf("no fuzz target matched")
	}
	md := markdown(results, fuzztime)
	fmt.Fprint(stdout, md)
	if err := os.WriteFile(filepath.Join(out, "fuzz.md"), []byte(md), 0o644); err != nil {
		return err
	}
	j, _ := json.MarshalIndent(struct {
		Fuzztime string   `json:"fuzztime"`
		Date     string   `json:"date"`
		Results  []Result `json:"results"`
	}{fuzztime, time.Now().UTC().Format(time.RFC3339), results}, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "fuzz.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	var bad []string
	for _, r := range results {
		if r.Status != "ok" {
			bad = append(bad, r.Target+" ("+r.Status+")")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d target(s) did not run clean: %s (inputs in testdata/fuzz, logs in %s/fuzz)", len(bad), strings.Join(bad, ", "), out)
	}
	return nil
}

// discover lists every fuzz target with its package.
func discover() ([]target, error) {
	cmd := exec.Command("go", "test", "-list", "^Fuzz", "./...")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go test -list: %v: %s", err, stderr.String())
	}
	var targets, pending []target
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && strings.HasPrefix(f[0], "Fuzz"):
			pending = append(pending, target{name: f[0]})
		case len(f) >= 2 && f[0] == "ok":
			for _, t := range pending {
				t.pkg = f[1]
				targets = append(targets, t)
			}
			pending = nil
		}
	}
	return targets, nil
}

func fuzzOne(t target, fuzztime, minimize string, parallel int, logPath string) Result {
	r := Result{Package: t.pkg, Target: t.name}
	args := []string{"test", "-run", "^$", "-fuzz", "^" + t.name + "$", "-fuzztime", fuzztime, "-fuzzminimizetime", minimize}
	if parallel > 0 {
		args = append(args, "-parallel", strconv.Itoa(parallel))
	}
	args = append(args, t.pkg)
	before := failingInputs(t)
	start := time.Now()
	cmd := exec.Command("go", args...)
	var outBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	runErr := cmd.Run()
	r.Seconds = time.Since(start).Seconds()
	_ = os.WriteFile(logPath, outBuf.Bytes(), 0o644)
	for _, line := range strings.Split(outBuf.String(), "\n") {
		if m := progress.FindStringSubmatch(line); m != nil {
			r.Execs, _ = strconv.ParseInt(m[1], 10, 64)
			r.Interesting, _ = strconv.ParseInt(m[2], 10, 64)
			r.Corpus, _ = strconv.ParseInt(m[3], 10, 64)
		}
	}
	r.Findings = failingInputs(t) - before
	switch {
	case r.Findings > 0 || strings.Contains(outBuf.String(), "Failing input written to"):
		r.Status, r.Detail = "finding", lastLines(outBuf.String(), "Failing input written to", "--- FAIL")
		r.Findings = max(r.Findings, 1)
	case runErr != nil:
		r.Status, r.Detail = "error", lastLines(outBuf.String(), "FAIL", "panic")
	default:
		r.Status = "ok"
	}
	return r
}

// failingInputs counts the files in the target's testdata/fuzz directory
// (a new failing input lands there).
func failingInputs(t target) int {
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", t.pkg)
	b, err := cmd.Output()
	if err != nil {
		return 0
	}
	entries, _ := os.ReadDir(filepath.Join(strings.TrimSpace(string(b)), "testdata", "fuzz", t.name))
	return len(entries)
}

func lastLines(s string, marks ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, m := range marks {
			if strings.Contains(l, m) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	if len(out) > 3 {
		out = out[len(out)-3:]
	}
	return strings.Join(out, " | ")
}

func markdown(results []Result, fuzztime string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| target | package | wall time (with build) | executions | new interesting (corpus) | findings |\n|---|---|---|---|---|---|\n")
	var execs int64
	findings := 0
	for _, r := range results {
		status := strconv.Itoa(r.Findings)
		if r.Status == "error" {
			status = "error: " + r.Detail
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %.0f s | %s | %d (%d) | %s |\n", r.Target, strings.TrimPrefix(r.Package, "github.com/searchfabric/bcc/"), r.Seconds, group(r.Execs), r.Interesting, r.Corpus, status)
		execs += r.Execs
		findings += r.Findings
	}
	fmt.Fprintf(&b, "\n%d targets, -fuzztime %s each: %s executions, %d findings.\n", len(results), fuzztime, group(execs), findings)
	return b.String()
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
