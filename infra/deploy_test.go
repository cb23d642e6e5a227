package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/resources"
)

// Every function, CDK's notifications handler and the sandbox's stand-ins
// included, logs in Lambda's JSON format to a log group of this template,
// and every log group has a retention: none is created by Lambda on first
// use and kept forever.
func TestEveryFunctionLogsJSONToALogGroupWithRetention(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		groups, fns := 0, 0
		for id, r := range s.resource {
			switch r["Type"] {
			case "AWS::Logs::LogGroup":
				groups++
				if _, ok := props(r)["RetentionInDays"]; !ok {
					t.Errorf("log group %s has no retention", id)
				}
			case "AWS::Lambda::Function":
				fns++
				lc, _ := props(r)["LoggingConfig"].(map[string]any)
				if lc["LogFormat"] != "JSON" {
					t.Errorf("function %s logs %v, want JSON", id, lc["LogFormat"])
				}
				lg := render(lc["LogGroup"])
				if !strings.HasPrefix(lg, "${") {
					t.Errorf("function %s logs to %q, not to a log group of this stack", id, lg)
					continue
				}
				gid := strings.TrimSuffix(strings.TrimPrefix(lg, "${"), "}")
				if g, ok := s.resource[gid]; !ok || g["Type"] != "AWS::Logs::LogGroup" {
					t.Errorf("function %s logs to %s, not a log group of this stack", id, lg)
				}
			}
		}
		want := len(s.c.Definition.Functions) + 1 // + the notifications handler
		if s == def {
			want += len(resources.SandboxDefinition().Functions)
		}
		if fns != want || groups < fns {
			t.Errorf("%d functions (want %d), %d log groups", fns, want, groups)
		}
	})
}

// nameProps are the properties that set a physical name.
var nameProps = []string{"BucketName", "QueueName", "TableName", "FunctionName", "LogGroupName", "RuleName", "AlarmName", "DashboardName", "TopicName", "RoleName", "ManagedPolicyName"}

// Physical names are generated unless the deploy asks for fixed ones: a
// change that replaces a resource, or a second stack, never collides. With
// fixedNames (imp) they are resources.For's, except what is retained.
func TestNoFixedPhysicalNamesUnlessAskedFor(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		fixed := map[string]bool{}
		for id, r := range s.resource {
			keys := nameProps
			if r["Type"] == "AWS::Events::Rule" {
				keys = append(slices.Clip(keys), "Name")
			}
			for _, k := range keys {
				if v, ok := props(r)[k].(string); ok {
					fixed[v] = true
					if !s.cfg.FixedNames {
						t.Errorf("%s %s has the fixed %s %q", r["Type"], id, k, v)
					}
				}
			}
		}
		if !s.cfg.FixedNames {
			return
		}
		d := s.c.Definition
		want := []string{d.Table.Name, d.FunctionName(resources.FnGC), "/aws/lambda/" + d.FunctionName(resources.FnGC), d.Bucket.EventRule, d.Prefix + "-coordinator"}
		for _, q := range d.Queues {
			want = append(want, q.Name)
		}
		for _, w := range want {
			if !fixed[w] {
				t.Errorf("fixedNames: no resource named %q (have %v)", w, sortedKeys(fixed))
			}
		}
	})
}

// Every resource a policy can name carries the resources.For name it
// stands for (iamcheck binds templates to embedded environments by it).
func TestResourcesCarryTheirDefinitionName(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		d := s.c.Definition
		named := map[string]bool{}
		for _, r := range s.resource {
			if md, ok := r["Metadata"].(map[string]any); ok {
				if n, ok := md[resources.MetadataName].(string); ok {
					named[n] = true
				}
			}
		}
		want := []string{d.Table.Name, d.Bucket.NotifyFailureQueue}
		for _, q := range d.Queues {
			want = append(want, q.Name, q.DLQName)
		}
		for _, f := range d.Functions {
			want = append(want, d.FunctionName(f.Name), "/aws/lambda/"+d.FunctionName(f.Name))
		}
		for _, w := range want {
			if !named[w] {
				t.Errorf("no resource carries %s=%q", resources.MetadataName, w)
			}
		}
	})
}

// DLQs (and the observer's failure queue) are retained by make destroy and
// by a replacement: their messages are what an operator still has to see.
func TestDLQsAreRetained(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		ids := []string{s.id(t, "ObserverFailuresQueue")}
		for _, q := range s.c.Definition.Queues {
			ids = append(ids, s.id(t, exportName(q.Class)+"DLQ"))
		}
		for _, id := range ids {
			r := s.resource[id]
			if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("DLQ %s: DeletionPolicy %v, UpdateReplacePolicy %v, want Retain", id, r["DeletionPolicy"], r["UpdateReplacePolicy"])
			}
		}
		for _, q := range s.c.Definition.Queues {
			if r := s.resource[s.id(t, exportName(q.Class)+"Queue")]; r["DeletionPolicy"] == "Retain" {
				t.Errorf("task queue %s is retained: its messages are re-derivable, it should go with the stack", q.Class)
			}
		}
	})
}

// The deployment's name is a tag on every resource that takes tags.
func TestResourcesAreTaggedWithTheDeployment(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		for _, typ := range []string{"AWS::Lambda::Function", "AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::IAM::Role", "AWS::Logs::LogGroup"} {
			for id, r := range s.resource {
				if r["Type"] != typ {
					continue
				}
				tags := list(props(r)["Tags"])
				if !slices.ContainsFunc(tags, func(v any) bool {
					m, _ := v.(map[string]any)
					return m["Key"] == TagDeployment && m["Value"] == s.cfg.Prefix
				}) {
					t.Errorf("%s %s lacks the tag %s=%s (tags %v)", typ, id, TagDeployment, s.cfg.Prefix, tags)
				}
			}
		}
	})
}
