package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Review of issue 28 (sandbox mode): in every stack, each function that
// calls an owner gets, as its BCC_*_ENDPOINT, the owner URL the stack says
// the functions call (outputs PublisherEndpoint / CcsEndpoint): in a
// sandbox the stand-in API's, which the roles are granted
// execute-api:Invoke on. An empty value leaves the deployed functions
// without owners (no CCS: every scheduled reconciliation fails; no
// publisher: every cutover and retire fails): the sandbox alarms by design.
func TestFunctionsCallTheOwnerURLsOfTheOutputs(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		outs, _ := s.json["Outputs"].(map[string]any)
		out := func(name string) string {
			o, _ := outs[name].(map[string]any)
			return render(o["Value"])
		}
		urls := map[string]string{
			resources.EnvPublisherEndpoint: out(resources.OutPublisherEndpoint),
			resources.EnvCCSEndpoint:       out(resources.OutCCSEndpoint),
		}
		for _, f := range s.c.Definition.Functions {
			env := props(s.resource[s.id(t, exportName(f.Name)+"Function")])["Environment"].(map[string]any)["Variables"].(map[string]any)
			for k, want := range urls {
				if !slices.Contains(f.Env, k) {
					continue
				}
				if got := render(env[k]); got != want || got == "" {
					t.Errorf("%s: %s = %q, want the stack's owner URL %q", f.Name, k, got, want)
				}
			}
		}
	})
}

// Review of issue 28 (operator hand-over): the BccCommand output is a
// ready command line. Spelled out with --prefix, bcc derives every queue's
// name from the prefix (resources.For: <prefix>-<class>.fifo,
// <prefix>-<class>-dlq.fifo, the observer failures queue) and looks it up
// by that name; so each queue the stack has must then carry exactly that
// physical name. With FIXED_NAMES=true the DLQs and the observer failures
// queue keep generated names (retained: a redeploy must not collide), so
// `bcc status` on a healthy fixed-names stack finds none of them (Unknown
// depths, a failing exit) unless the command reads the stack's outputs.
func TestBccCommandFindsEveryQueueOfTheStack(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		outs, _ := s.json["Outputs"].(map[string]any)
		o, _ := outs[OutBccCommand].(map[string]any)
		cmd := render(o["Value"])
		if cmd == "" {
			t.Fatalf("no %s output", OutBccCommand)
		}
		if strings.Contains(cmd, "--stack ") {
			return // bcc reads every queue's URL from the outputs (TestStackOutputs)
		}
		if !strings.Contains(cmd, "--prefix "+s.c.Definition.Prefix+" ") {
			t.Fatalf("%s = %q: neither --stack nor --prefix", OutBccCommand, cmd)
		}
		for _, id := range s.ofType("AWS::SQS::Queue") {
			md, _ := s.resource[id]["Metadata"].(map[string]any)
			name, _ := md[resources.MetadataName].(string)
			if got, _ := props(s.resource[id])["QueueName"].(string); got != name {
				t.Errorf("%s = %q derives queue %s's name %q, but the stack names it %q (generated when empty): bcc finds no such queue",
					OutBccCommand, cmd, id, name, got)
			}
		}
	})
}

// Review of issue 28 (first try on a real account): README's "Deploy in
// five commands" runs `make bootstrap` with no parameters and, later,
// `make destroy PREFIX=acme`. The CDK CLI synthesizes the app for both
// (bootstrap to find the stacks' environments, destroy to select the stack
// by name), and the app refuses a stack without owner endpoints before it
// creates anything: both commands failed with "no owner endpoints", though
// neither deploys a template. Here the context each make target hands the
// app (read from make -n) must pass the app's checks (validate: what
// NewCoordinatorStack runs first) and name the stack the deploy created.
func TestBootstrapAndDestroyNeedNoOwnerEndpoints(t *testing.T) {
	base, err := cdkJSONContext()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target string
		args   []string
		stack  string
	}{
		{"bootstrap", nil, "bcc-coordinator"},
		{"destroy", []string{"PREFIX=acme"}, "acme-coordinator"},
		{"destroy", []string{"PREFIX=acme", "SANDBOX=true"}, "acme-sandbox"},
		{"deploy", []string{"PREFIX=acme", "SANDBOX=true", "NO_ALARM_DESTINATION=true"}, "acme-sandbox"},
		{"deploy", []string{"PREFIX=acme", "PUBLISHER_ENDPOINT=" + ownPublisher, "CCS_ENDPOINT=" + ownCCS, "NO_ALARM_DESTINATION=true"}, "acme-coordinator"},
		{"destroy", []string{"PREFIX=acme", "PUBLISHER_ENDPOINT=" + ownPublisher, "CCS_ENDPOINT=" + ownCCS}, "acme-coordinator"},
	} {
		t.Run(tc.target+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command("make", append([]string{"-s", "-n", "-C", "..", tc.target}, tc.args...)...)
			cmd.Env = append(os.Environ(), "MAKEFLAGS=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n %s: %v\n%s", tc.target, err, out)
			}
			var line string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "cdk --no-notices "+tc.target) {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("make -n %s runs no cdk %s:\n%s", tc.target, tc.target, out)
			}
			ctx := map[string]any{}
			for k, v := range base {
				ctx[k] = v
			}
			fields := strings.Fields(line)
			for i := 0; i+1 < len(fields); i++ {
				if fields[i] == "-c" {
					k, v, _ := strings.Cut(fields[i+1], "=")
					ctx[k] = v
				}
			}
			cfg, err := configFrom(func(k string) any { return ctx[k] })
			if err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Parse([]byte(cfg.Policy))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Prefix == "" {
				cfg.Prefix = DefaultPrefix
			}
			if err := validate(resources.For(cfg.Prefix, pol), cfg); err != nil {
				t.Fatalf("make %s %v: the app refuses its context: %v\n%s", tc.target, tc.args, err, line)
			}
			if cfg.StackName != tc.stack {
				t.Fatalf("make %s %v synthesizes stack %q, want %q", tc.target, tc.args, cfg.StackName, tc.stack)
			}
		})
	}
}

// Review of issue 28 item 2 ("lands in the observer-failures queue, which
// the alarm text calls head notifications"): the observer's asynchronous
// invocations that fail every attempt go to the failures queue (its
// EventInvokeConfig), and the reconcile schedule invokes that same
// function asynchronously, so a scheduled reconciliation that fails (CCS
// unreachable) lands in the queue too. The alarm on that queue must say
// so; it named head notifications only, and its runbook told the operator
// to read "the S3 event".
func TestObserverFailuresAlarmNamesEverySourceOfItsQueue(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		observer := s.id(t, exportName(s.c.Definition.Bucket.NotifyFunction)+"Function")
		failures := s.id(t, "ObserverFailuresQueue")
		toQueue := false
		for _, id := range s.ofType("AWS::Lambda::EventInvokeConfig") {
			p := props(s.resource[id])
			dest := render(p["DestinationConfig"].(map[string]any)["OnFailure"].(map[string]any)["Destination"])
			if render(p["FunctionName"]) == ref(observer) && dest == getAtt(failures, "Arn") {
				toQueue = true
			}
		}
		scheduled := false
		for _, id := range s.ofType("AWS::Events::Rule") {
			p := props(s.resource[id])
			if p["ScheduleExpression"] == nil {
				continue
			}
			for _, tg := range p["Targets"].([]any) {
				if render(tg.(map[string]any)["Arn"]) == getAtt(observer, "Arn") {
					scheduled = true
				}
			}
		}
		if !toQueue || !scheduled {
			t.Fatalf("observer failures to the queue %v, observer on a schedule %v: the premise changed", toQueue, scheduled)
		}
		alarms := 0
		for _, id := range s.ofType("AWS::CloudWatch::Alarm") {
			p := props(s.resource[id])
			dims, _ := p["Dimensions"].([]any)
			onQueue := false
			for _, d := range dims {
				if render(d.(map[string]any)["Value"]) == getAtt(failures, "QueueName") {
					onQueue = true
				}
			}
			if !onQueue {
				continue
			}
			alarms++
			desc := render(p["AlarmDescription"])
			if !strings.Contains(desc, "head notification") || !strings.Contains(desc, "scheduled reconciliation") {
				t.Errorf("alarm %s on the observer failures queue: %q names not both of its sources (head notifications, scheduled reconciliations)", id, desc)
			}
		}
		if alarms == 0 {
			t.Fatal("no alarm on the observer failures queue")
		}
	})
}
