package main

import (
	"os/exec"
	"strings"
	"testing"
)

// make deploy first prints what it creates and what it needs.
func TestPlanSaysWhatItCreatesAndNeeds(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		var b strings.Builder
		if err := WritePlan(&b, s.cfg); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		d := s.c.Definition
		want := []string{"Stack " + s.cfg.StackName, d.Table.Name, "CDK bootstrap stack", "make bootstrap", "AWS credentials"}
		for _, q := range d.Queues {
			want = append(want, q.Name, q.DLQName)
		}
		for _, f := range d.Functions {
			want = append(want, d.FunctionName(f.Name))
		}
		absent := []string{}
		if s == def {
			want = append(want, "generated name", "MISSING -c publisherEndpoint", "MISSING -c ccsEndpoint", "ALARM_EMAIL or ALARM_TOPIC_ARN", "a notification on the bucket")
		} else {
			want = append(want, "uses your bucket "+impBucket, "rule "+d.Bucket.EventRule, "VPC "+impVpc, "X-Ray",
				"execute-api:Invoke on arn:aws:execute-api:eu-west-1:<this account>:a1b2c3d4e5/prod/POST/v1/cutover", impCCSArn, "gateway endpoints for S3 and DynamoDB")
			absent = append(absent, "MISSING", "ALARM_EMAIL")
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
