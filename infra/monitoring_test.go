package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// dashboard returns the dashboard body as JSON (tokens rendered as ${...}).
func (s *synth) dashboard(t *testing.T) map[string]any {
	t.Helper()
	ids := s.ofType("AWS::CloudWatch::Dashboard")
	if len(ids) != 1 {
		t.Fatalf("%d dashboards", len(ids))
	}
	body := render(props(s.resource[ids[0]])["DashboardBody"])
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("dashboard body is not JSON: %v\n%s", err, body)
	}
	return out
}

// dashboardMetrics lists every metric of every graph as "Namespace MetricName Dim=Value..." or the expression.
func dashboardMetrics(d map[string]any) []string {
	var out []string
	for _, w := range d["widgets"].([]any) {
		p := w.(map[string]any)["properties"].(map[string]any)
		ms, _ := p["metrics"].([]any)
		for _, mm := range ms {
			row := mm.([]any)
			if opts, ok := row[0].(map[string]any); ok {
				out = append(out, fmt.Sprint(opts["expression"]))
				continue
			}
			var parts []string
			for _, x := range row {
				if s, ok := x.(string); ok {
					parts = append(parts, s)
				}
			}
			out = append(out, strings.Join(parts, " "))
		}
	}
	return out
}

func TestDashboardShowsQueuesDLQsFunctionsAndCoordinatorMetrics(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		got := strings.Join(dashboardMetrics(s.dashboard(t)), "\n")
		var want []string
		for _, q := range s.c.Definition.Queues {
			qn := getAtt(s.id(t, exportName(q.Class)+"Queue"), "QueueName")
			dn := getAtt(s.id(t, exportName(q.Class)+"DLQ"), "QueueName")
			want = append(want,
				"AWS/SQS ApproximateNumberOfMessagesVisible QueueName "+qn,
				"AWS/SQS ApproximateAgeOfOldestMessage QueueName "+qn,
				"AWS/SQS ApproximateNumberOfMessagesVisible QueueName "+dn,
			)
		}
		for _, f := range s.c.Definition.Functions {
			fn := ref(s.id(t, exportName(f.Name)+"Function"))
			for _, metric := range []string{"Errors", "Duration", "Throttles", "ConcurrentExecutions"} {
				want = append(want, "AWS/Lambda "+metric+" FunctionName "+fn)
			}
		}
		for _, name := range []string{"HeadsObserved", "DuplicateEventsAbsorbed", "StaleEventsAbsorbed", "TasksEnqueued",
			"StaleResultsDropped", "CutoversAccepted", "ObjectsDeleted", "GCDeferred", "LeaseLost"} {
			want = append(want, fmt.Sprintf(`SEARCH('Namespace="BCC" Deployment="%s" MetricName="%s"', 'Sum', 300)`, s.c.Definition.Prefix, name))
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("dashboard lacks %q", w)
			}
		}
		if t.Failed() {
			t.Logf("dashboard metrics:\n%s", got)
		}
	})
}

func TestAlarmsOnDLQDepthOldestMessageAndFunctionErrors(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		d := s.c.Definition
		var actions any = assertions.Match_Absent()
		if s == imp {
			topic := s.id(t, "AlarmTopic")
			actions = []any{refM(topic)}
			check(t, "alarm topic", func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::SNS::Topic"), m("KmsMasterKeyId", getAttM(s.id(t, "AlarmTopicKey"), "Arn")))
				s.tmpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), m("Protocol", "email", "Endpoint", impEmail, "TopicArn", refM(topic)))
				s.tmpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), m("EnableKeyRotation", true))
			})
		} else {
			check(t, "no topic", func() { s.tmpl.ResourceCountIs(jsii.String("AWS::SNS::Topic"), jsii.Number(0)) })
		}
		check(t, "alarm count", func() {
			s.tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(float64(2*len(d.Queues)+len(d.Functions)+9)))
		})
		check(t, "oldest due item of any class alarm (seed §10)", func() {
			s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
				"Namespace", "BCC", "MetricName", "OldestDueAgeMs", "Statistic", "Maximum",
				"Dimensions", assertions.Match_ArrayWith(&[]any{m("Name", "Deployment", "Value", d.Prefix), m("Name", "Function", "Value", "observer")}),
				"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(DueAgeAlarmThreshold.Milliseconds()), "EvaluationPeriods", float64(3), "AlarmActions", actions,
			))
		})
		check(t, "oldest tombstone age alarm", func() {
			s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
				"Namespace", "BCC", "MetricName", "OldestTombstoneAgeMs", "Statistic", "Maximum",
				"Dimensions", assertions.Match_ArrayWith(&[]any{m("Name", "Deployment", "Value", d.Prefix), m("Name", "Function", "Value", "observer")}),
				"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(TombstoneAgeAlarmThreshold.Milliseconds()), "AlarmActions", actions,
			))
		})
		check(t, "reconcile failures alarm, apart from head notification failures", func() {
			s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
				"Namespace", "BCC", "MetricName", "ReconcileFailures", "Statistic", "Sum",
				"Dimensions", assertions.Match_ArrayWith(&[]any{m("Name", "Deployment", "Value", d.Prefix), m("Name", "Function", "Value", "observer")}),
				"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(0), "EvaluationPeriods", float64(ReconcileFailureAlarmPeriods), "AlarmActions", actions,
			))
		})
		check(t, "gc refused alarm", func() {
			s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
				"Namespace", "BCC", "MetricName", "GCRefused", "Statistic", "Sum",
				"Dimensions", assertions.Match_ArrayWith(&[]any{m("Name", "Deployment", "Value", d.Prefix), m("Name", "Function", "Value", "gc")}),
				"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(0), "AlarmActions", actions,
			))
		})
		check(t, "forged completions alarm", func() {
			s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
				"Namespace", "BCC", "MetricName", "ForgedCompletions", "Statistic", "Sum",
				"Dimensions", assertions.Match_ArrayWith(&[]any{m("Name", "Deployment", "Value", d.Prefix), m("Name", "Function", "Value", "handoff")}),
				"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(0), "AlarmActions", actions,
			))
		})
		check(t, "observer lag alarm", func() {
			s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
				"Namespace", "BCC", "MetricName", "ObserveLagMs", "ExtendedStatistic", "p99",
				"Dimensions", assertions.Match_ArrayWith(&[]any{m("Name", "Deployment", "Value", d.Prefix), m("Name", "Function", "Value", "observer")}),
				"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(ObserveLagAlarmThreshold.Milliseconds()),
				"EvaluationPeriods", float64(3), "AlarmActions", actions,
			))
		})
		for _, q := range d.Queues {
			check(t, q.Class+" DLQ alarm", func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
					"Namespace", "AWS/SQS", "MetricName", "ApproximateNumberOfMessagesVisible",
					"Dimensions", []any{m("Name", "QueueName", "Value", getAttM(s.id(t, exportName(q.Class)+"DLQ"), "QueueName"))},
					"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(0),
					"AlarmActions", actions,
				))
			})
			check(t, q.Class+" oldest message alarm", func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
					"Namespace", "AWS/SQS", "MetricName", "ApproximateAgeOfOldestMessage",
					"Dimensions", []any{m("Name", "QueueName", "Value", getAttM(s.id(t, exportName(q.Class)+"Queue"), "QueueName"))},
					"ComparisonOperator", "GreaterThanThreshold", "Threshold", OldestMessageAlarmThreshold(q.VisibilityTimeout).Seconds(),
					"AlarmActions", actions,
				))
			})
			if th := OldestMessageAlarmThreshold(q.VisibilityTimeout); th < q.VisibilityTimeout {
				t.Errorf("%s oldest-age threshold %s below visibility %s", q.Class, th, q.VisibilityTimeout)
			}
		}
		for _, f := range d.Functions {
			check(t, f.Name+" errors alarm", func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), m(
					"Namespace", "AWS/Lambda", "MetricName", "Errors",
					"Dimensions", []any{m("Name", "FunctionName", "Value", refM(s.id(t, exportName(f.Name)+"Function")))},
					"ComparisonOperator", "GreaterThanThreshold", "Threshold", float64(0), "Statistic", "Sum",
					"AlarmActions", actions,
				))
			})
		}
	})
}

// Two stacks in one account never mix: every alarm on a coordinator (EMF)
// metric and every coordinator metric on the dashboard selects its own
// deployment; AWS metrics are per resource, whose names carry the prefix.
func TestEveryCoordinatorMetricAndAlarmSelectsItsDeployment(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		prefix := s.c.Definition.Prefix
		for _, id := range s.ofType("AWS::CloudWatch::Alarm") {
			p := props(s.resource[id])
			if p["Namespace"] != "BCC" {
				if !strings.HasPrefix(fmt.Sprint(p["Namespace"]), "AWS/") {
					t.Errorf("alarm %s on namespace %v", id, p["Namespace"])
				}
				continue
			}
			if !strings.Contains(render(p["Dimensions"]), `{"Name":"Deployment","Value":"`+prefix+`"}`) {
				t.Errorf("alarm %s (%v) does not select deployment %s: %s", id, p["MetricName"], prefix, render(p["Dimensions"]))
			}
		}
		for _, line := range dashboardMetrics(s.dashboard(t)) {
			if strings.Contains(line, "BCC") && !strings.Contains(line, `Deployment="`+prefix+`"`) && !strings.Contains(line, "Deployment "+prefix) {
				t.Errorf("dashboard metric does not select deployment %s: %s", prefix, line)
			}
		}
	})
}

// Issue 16 item 4: every §10 signal (seed 000) has its own widget showing
// its series, and every coordinator metric a signal names is one the
// product emits (its name appears in a metrics call under shared/).
func TestEverySection10SignalHasAWidget(t *testing.T) {
	emitted := emittedMetrics(t)
	emittedKind := emittedWith(t, `\.(?:AddDim|DurationDim)\("([A-Za-z][A-Za-z0-9]*)", "Kind"`)
	// The signals §10 gives a task class: each is shown per Kind.
	for _, name := range []string{"Queue depth by task class", "Age of the oldest due item per class", "Stale-head task invalidation rate",
		"Lease timeout and reassignment rate", "Publish conflicts and rebuilds of rewrite tasks"} {
		i := slices.IndexFunc(Section10Signals, func(s Signal) bool { return s.Name == name })
		if i < 0 || len(Section10Signals[i].Kind) == 0 {
			t.Errorf("§10 signal %q has no series by Kind", name)
		}
	}
	both(t, func(t *testing.T, s *synth) {
		widgets := map[string]string{}
		for _, w := range s.dashboard(t)["widgets"].([]any) {
			p := w.(map[string]any)["properties"].(map[string]any)
			title, _ := p["title"].(string)
			b, _ := json.Marshal(p["metrics"])
			widgets[title] = string(b)
			if strings.Contains(title, "§") {
				t.Errorf("widget title %q cites a design-note section: a user reads the dashboard, not the note", title)
			}
		}
		if len(Section10Signals) != 9 {
			t.Fatalf("§10 lists 9 signals, the table has %d", len(Section10Signals))
		}
		for _, sig := range Section10Signals {
			got, ok := widgets[sig.Name]
			if !ok {
				t.Errorf("no widget for §10 signal %q", sig.Name)
				continue
			}
			for _, name := range sig.EMF {
				if !strings.Contains(got, `MetricName=\"`+name+`\"`) {
					t.Errorf("widget %q lacks %s", sig.Name, name)
				}
				if s == def && !emitted[name] {
					t.Errorf("signal %q names %s, which no function emits", sig.Name, name)
				}
			}
			// A signal that has a Kind (task class) shows it per Kind, and
			// the product emits it with that dimension.
			for _, name := range sig.Kind {
				if !regexp.MustCompile(`\{BCC,Deployment,Function,Kind\} Deployment=\\"[^\\]+\\" MetricName=\\"` + name + `\\"`).MatchString(got) {
					t.Errorf("widget %q does not show %s per Kind: %s", sig.Name, name, got)
				}
				if s == def && !emittedKind[name] {
					t.Errorf("signal %q shows %s per Kind, which no function emits with a Kind dimension", sig.Name, name)
				}
			}
			for _, name := range append(append([]string{}, sig.Queue...), sig.Lambda...) {
				if !strings.Contains(got, `"`+name+`"`) {
					t.Errorf("widget %q lacks %s", sig.Name, name)
				}
			}
			if len(sig.EMF)+len(sig.Kind)+len(sig.Queue)+len(sig.Lambda) == 0 {
				t.Errorf("signal %q shows nothing", sig.Name)
			}
		}
	})
}

// emittedMetrics are the metric names passed to a metrics call
// (Add, AddDim, Duration) in the product's sources.
func emittedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	return emittedWith(t, `\.(?:Add|AddDim|Duration|DurationDim)\("([A-Za-z][A-Za-z0-9]*)"`)
}

// emittedWith are the first submatches of expr in the product's sources.
func emittedWith(t *testing.T, expr string) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(expr)
	out := map[string]bool{}
	err := filepath.WalkDir("../shared", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every EMF metric a function emits (a metrics call under shared/) is on
// some dashboard widget: a new metric without a widget is seen by nobody.
func TestEveryEmittedMetricIsOnAWidget(t *testing.T) {
	emitted := emittedMetrics(t)
	if len(emitted) < 50 {
		t.Fatalf("found only %d emitted metric names under shared/: the scan is broken", len(emitted))
	}
	both(t, func(t *testing.T, s *synth) {
		var shown strings.Builder
		for _, w := range s.dashboard(t)["widgets"].([]any) {
			b, _ := json.Marshal(w.(map[string]any)["properties"].(map[string]any)["metrics"])
			shown.Write(b)
		}
		for _, name := range slices.Sorted(maps.Keys(emitted)) {
			if !strings.Contains(shown.String(), `MetricName=\"`+name+`\"`) && !strings.Contains(shown.String(), `"`+name+`"`) {
				t.Errorf("metric %s is emitted but on no dashboard widget", name)
			}
		}
	})
}
