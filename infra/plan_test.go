package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// make deploy first prints what it creates and what it needs.
func TestPlanSaysWhatItCreatesAndNeeds(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		var b strings.Builder
		cfg := s.cfg
		if s == def {
			cfg.NoAlarmDestination = true // make plan refuses without a decision (TestMakePlanRefuses...)
		}
		if err := WritePlan(&b, cfg); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		d := s.c.Definition
		want := []string{"Stack " + s.cfg.StackName, d.Table.Name, "CDK bootstrap stack", "make bootstrap", "AWS credentials", TagDeployment + "=" + s.cfg.Prefix, "JSON logs"}
		for _, q := range d.Queues {
			want = append(want, q.Name, q.DLQName)
		}
		for _, f := range d.Functions {
			want = append(want, d.FunctionName(f.Name))
		}
		absent := []string{"MISSING"}
		switch s {
		case def:
			want = append(want, "generated name", "SANDBOX", "stand-in Manifest Publisher", "a notification on the bucket")
		case own:
			want = append(want, "generated name", "execute-api:Invoke on arn:aws:execute-api:us-east-1:<this account>:p1b2c3d4e5/prod/POST/cutover",
				"NO_ALARM_DESTINATION=true was given")
			absent = append(absent, "SANDBOX")
		default:
			want = append(want, "uses your bucket "+impBucket, "rule "+d.Bucket.EventRule, "VPC "+impVpc, "X-Ray",
				"execute-api:Invoke on arn:aws:execute-api:eu-west-1:<this account>:a1b2c3d4e5/prod/POST/v1/cutover", strings.TrimSuffix(impCCSArn, "/*")+"/POST*/release-intents", "gateway endpoints for S3 and DynamoDB")
			want = append(want, "DynamoDB table "+d.Table.Name)
			absent = append(absent, "ALARM_EMAIL", "SANDBOX")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("plan lacks %q:\n%s", w, out)
			}
		}
		for _, a := range absent {
			if strings.Contains(out, a) {
				t.Errorf("plan says %q:\n%s", a, out)
			}
		}
	})
	if err := checkContextKeys(contextArgs{"prefx": "acme"}); err == nil || !strings.Contains(err.Error(), "not a context key") {
		t.Fatalf("a mistyped context key: %v", err)
	}
}

// make plan (and so make deploy, which runs it first) refuses a deploy
// whose alarms would notify no one unless told that none is wanted, and
// one without owner endpoints unless it is a sandbox: the real target,
// with cdk.json's context.
func TestMakePlanRefusesWithoutAlarmDestinationOrOwners(t *testing.T) {
	owners := []string{"PUBLISHER_ENDPOINT=" + ownPublisher, "CCS_ENDPOINT=" + ownCCS}
	for _, tc := range []struct {
		name string
		args []string
		want string // in the output; "" = success
	}{
		{"no alarm destination", owners, ErrNoAlarmDestination + ": the stack's alarms would change state and notify no one"},
		{"none wanted", append(owners, "NO_ALARM_DESTINATION=true"), ""},
		{"an email", append(owners, "ALARM_EMAIL=oncall@example.com"), ""},
		{"no owners", []string{"ALARM_EMAIL=oncall@example.com"}, ErrNoOwners + ": publisherEndpoint (PUBLISHER_ENDPOINT) and ccsEndpoint (CCS_ENDPOINT) not set"},
		{"sandbox, no alarm destination", []string{"SANDBOX=true"}, ErrNoAlarmDestination},
		{"sandbox", []string{"SANDBOX=true", "NO_ALARM_DESTINATION=true"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("make", append([]string{"-s", "-C", "..", "plan"}, tc.args...)...)
			cmd.Env = append(os.Environ(), "MAKEFLAGS=")
			out, err := cmd.CombinedOutput()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("make plan %v refused: %v\n%s", tc.args, err, out)
			case tc.want != "" && err == nil:
				t.Fatalf("make plan %v succeeded, want a refusal with %q:\n%s", tc.args, tc.want, out)
			case tc.want != "" && !strings.Contains(string(out), tc.want):
				t.Fatalf("make plan %v: output lacks %q:\n%s", tc.args, tc.want, out)
			case tc.want == "" && !strings.Contains(string(out), "It needs:"):
				t.Fatalf("make plan %v printed no plan:\n%s", tc.args, out)
			}
		})
	}
}

// The bootstrap order a fresh clone follows works: `make bootstrap` and
// `make deploy` build the functions before the CLI runs the app (which
// refuses to synthesize without them), and deploy prints its plan first.
func TestBootstrapAndDeployBuildFunctionsFirst(t *testing.T) {
	out, err := exec.Command("make", "-C", "..", "-n", "bootstrap").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n bootstrap: %v\n%s", err, out)
	}
	build, boot := strings.Index(string(out), "go build"), strings.Index(string(out), "cdk --no-notices bootstrap")
	if build < 0 || boot < 0 || build > boot {
		t.Fatalf("make bootstrap does not build the functions before cdk bootstrap:\n%s", out)
	}
	out, err = exec.Command("make", "-C", "..", "-n", "deploy").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n deploy: %v\n%s", err, out)
	}
	plan, build, deploy := strings.Index(string(out), "go run . -plan"), strings.Index(string(out), "go build"), strings.Index(string(out), "cdk --no-notices deploy")
	if plan < 0 || build < 0 || deploy < 0 || plan > deploy || build > deploy {
		t.Fatalf("make deploy does not print the plan and build before cdk deploy:\n%s", out)
	}
}
