package main

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/testkit/docscheck"
)

// The docs check's half that needs the synthesized stack: every alarm's
// description links its runbook (a section of docs/operations.md named
// after the alarm), and every dashboard widget has a row in
// docs/observability.md. Failures say what to add where.

func readDoc(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// alarms are the synthesized alarms: name -> description.
func (s *synth) alarms() map[string]string {
	out := map[string]string{}
	for _, id := range s.ofType("AWS::CloudWatch::Alarm") {
		p := props(s.resource[id])
		name := render(p["AlarmName"])
		if p["AlarmName"] == nil { // generated: the name it stands for (fixedNames) is its metadata
			name, _ = s.resource[id]["Metadata"].(map[string]any)[resources.MetadataName].(string)
		}
		out[name] = render(p["AlarmDescription"])
	}
	return out
}

// runbookLink is the end of every alarm description: its runbook section.
var runbookLink = regexp.MustCompile(`Runbook: ` + regexp.QuoteMeta(RunbookBase) + `#([a-z0-9-]+)$`)

// runbookProblems: each alarm's description ends "Runbook:
// docs/operations.md#<section>" and that section exists. (The section is
// named after the alarm without its prefix, docscheck.RunbookAnchor, but the
// check follows the link, so it holds whatever the alarm is called.)
func runbookProblems(prefix string, alarms map[string]string, ops []byte) []string {
	anchors := docscheck.Anchors(ops)
	var out []string
	for _, name := range slices.Sorted(maps.Keys(alarms)) {
		m := runbookLink.FindStringSubmatch(alarms[name])
		if m == nil {
			out = append(out, fmt.Sprintf("alarm %s: its description does not end with its runbook link \"Runbook: %s#%s\" (build it with withRunbook): %q",
				name, RunbookBase, docscheck.RunbookAnchor(prefix, name), alarms[name]))
			continue
		}
		if !anchors[m[1]] {
			out = append(out, fmt.Sprintf("alarm %s: %s has no section #%s: add a runbook section \"### %s\" under \"Runbooks: one per alarm\" saying what the alarm means and what to do",
				name, docscheck.OperationsDoc, m[1], m[1]))
		}
	}
	return out
}

func TestEveryAlarmLinksItsRunbook(t *testing.T) {
	ops := readDoc(t, docscheck.OperationsDoc)
	both(t, func(t *testing.T, s *synth) {
		alarms := s.alarms()
		if len(alarms) != s.c.AlarmCount || len(alarms) < 10 {
			t.Fatalf("%d alarms in the template, the stack counts %d", len(alarms), s.c.AlarmCount)
		}
		for _, p := range runbookProblems(s.c.Definition.Prefix, alarms, ops) {
			t.Error(p)
		}
		for name, desc := range alarms {
			if len(desc) > 1024 {
				t.Errorf("alarm %s: description of %d characters, CloudWatch takes at most 1024", name, len(desc))
			}
		}
	})
}

// The runbook check fails when a section is missing or a description lacks
// its link.
func TestRunbookCheckCatchesAMissingRunbook(t *testing.T) {
	ops := string(readDoc(t, docscheck.OperationsDoc))
	prefix := def.c.Definition.Prefix
	alarms := def.alarms()
	if got := runbookProblems(prefix, alarms, []byte(ops)); len(got) != 0 {
		t.Fatalf("unmutated: %v", got)
	}
	gone := strings.Replace(ops, "\n### gc-refused\n", "\n### gc-refusal\n", 1)
	if gone == ops {
		t.Fatal("docs/operations.md has no ### gc-refused section")
	}
	got := runbookProblems(prefix, alarms, []byte(gone))
	if len(got) != 1 || !strings.Contains(got[0], "has no section #gc-refused") {
		t.Errorf("section removed: %v", got)
	}
	unlinked := map[string]string{}
	for k, v := range alarms {
		unlinked[k] = v
	}
	unlinked[prefix+"-gc-refused"] = "GC refused to delete"
	got = runbookProblems(prefix, unlinked, []byte(ops))
	if len(got) != 1 || !strings.Contains(got[0], "does not end with its runbook link") {
		t.Errorf("link removed: %v", got)
	}
}

// widgetRow: a table row whose first cell is the widget's title.
func widgetProblems(titles []string, obs []byte) []string {
	var out []string
	for _, title := range titles {
		row := regexp.MustCompile(`(?m)^\|\s*` + regexp.QuoteMeta(title) + `\s*\|`)
		if !row.Match(obs) {
			out = append(out, fmt.Sprintf("dashboard widget %q has no row in %s: add \"| %s | <what it shows> |\" to its widget table", title, docscheck.ObservabilityDoc, title))
		}
	}
	return out
}

func (s *synth) widgetTitles(t *testing.T) []string {
	var out []string
	for _, w := range s.dashboard(t)["widgets"].([]any) {
		if title, _ := w.(map[string]any)["properties"].(map[string]any)["title"].(string); title != "" {
			out = append(out, title)
		}
	}
	return out
}

func TestEveryWidgetIsDocumented(t *testing.T) {
	obs := readDoc(t, docscheck.ObservabilityDoc)
	titles := def.widgetTitles(t)
	if len(titles) < 20 {
		t.Fatalf("only %d widget titles: the dashboard read is broken", len(titles))
	}
	for _, p := range widgetProblems(titles, obs) {
		t.Error(p)
	}
	// And the check fails when a row is missing.
	gone := regexp.MustCompile(`(?m)^\| Function throttles \|.*\n`).ReplaceAll(obs, nil)
	if got := widgetProblems(titles, gone); len(got) != 1 || !strings.Contains(got[0], `"Function throttles"`) {
		t.Errorf("row removed: %v", got)
	}
}
