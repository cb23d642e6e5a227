package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// CfnLintAccepted are the cfn-lint warnings this stack accepts, each with
// why it is the design (or CDK's) and harmless. Errors are never accepted;
// a warning not listed here fails the test.
var CfnLintAccepted = map[string]string{
	"W3005": "CDK declares DependsOn on a function's role next to the Fn::GetAtt of that role (it depends on the role's default " +
		"policy the same way, which is needed): redundant for CloudFormation, harmless, and not ours to change.",
}

// cfn-lint (installed on this machine image) over the synthesized templates
// of every stack variant (the sandbox among them): zero errors, and only
// the accepted warnings.
func TestCfnLintIsClean(t *testing.T) {
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Skip("cfn-lint is not installed (make test-infra requires it)")
	}
	var files []string
	for _, s := range []*synth{def, imp, own} {
		files = append(files, filepath.Join(s.outdir, s.cfg.StackName+".template.json"))
	}
	out, err := exec.Command(bin, append([]string{"-f", "json"}, files...)...).Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) { // cfn-lint exits non-zero when it finds anything
		t.Fatalf("cfn-lint: %v", err)
	}
	var matches []struct {
		Filename, Level, Message string
		Rule                     struct{ Id string }
	}
	if err := json.Unmarshal(out, &matches); err != nil {
		t.Fatalf("cfn-lint output: %v\n%s", err, out)
	}
	seen := map[string]int{}
	for _, m := range matches {
		switch {
		case m.Level == "Error":
			t.Errorf("cfn-lint error %s in %s: %s", m.Rule.Id, filepath.Base(m.Filename), m.Message)
		case CfnLintAccepted[m.Rule.Id] == "":
			t.Errorf("cfn-lint %s %s in %s is not an accepted finding: %s", strings.ToLower(m.Level), m.Rule.Id, filepath.Base(m.Filename), m.Message)
		default:
			seen[m.Rule.Id]++
		}
	}
	var ids []string
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t.Logf("accepted cfn-lint %s x%d: %s", id, seen[id], CfnLintAccepted[id])
	}
}
