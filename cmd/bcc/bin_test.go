package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The exit codes are a contract of the binary (`go run` turns every
// non-zero exit into 1), so the tests that hold them run the built binary.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds cmd/bcc once per test run.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "bcc-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "bcc")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build ./cmd/bcc: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
	args           []string
}

// execBCC runs the built binary with args and exactly env (plus HOME and
// PATH), so no variable of the developer's shell leaks in.
func execBCC(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), args: args}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("bcc %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// cli runs the built binary against the environment: its endpoint, prefix
// and CCS. Time comes from the system's clock unless args say --now.
func (e *testEnv) cli(cmd string, args ...string) result {
	e.t.Helper()
	all := append([]string{cmd, "--stack", e.StackName(), "--endpoint-url", e.Stack.URL()}, args...)
	r := execBCC(e.t, nil, all...)
	e.t.Logf("bcc %s (exit %d)\n%s%s", strings.Join(all, " "), r.code, r.stdout, r.stderr)
	return r
}

// err is the run's stderr as an error when it exited 1.
func (r result) err() error {
	if r.code == exitError {
		return errors.New(strings.TrimSpace(r.stderr))
	}
	return nil
}
