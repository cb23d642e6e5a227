package iamcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/searchfabric/bcc/shared/resources"
)

// Template is a synthesized CloudFormation template.
type Template struct {
	Path      string
	resources map[string]resource
}

type resource struct {
	Type       string
	Properties map[string]any
	Metadata   map[string]any
}

// LoadTemplate reads a template file (cdk.out/<stack>.template.json).
func LoadTemplate(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	var t struct {
		Resources map[string]resource
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("template %s: %w", path, err)
	}
	if len(t.Resources) == 0 {
		return nil, fmt.Errorf("template %s has no resources", path)
	}
	return &Template{Path: path, resources: t.Resources}, nil
}

// Prefix is the resource prefix the template was synthesized with: the one
// whose function names (resources.Definition.FunctionName) it declares, as
// physical names (fixedNames) or as resources.MetadataName.
func (t *Template) Prefix() (string, error) {
	fns := resources.Default("p").Functions
	for _, id := range t.ids("AWS::Lambda::Function") {
		name := t.definitionName(id)
		for _, f := range fns {
			p, ok := strings.CutSuffix(name, "-"+f.Name)
			if ok && resources.Default(p).FunctionName(f.Name) == name {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("template %s: no function named by resources.Default(prefix)", t.Path)
}

func (t *Template) ids(typ string) []string {
	var out []string
	for id, r := range t.resources {
		if r.Type == typ {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Binding ties a template synthesized for From to an environment
// provisioned for To, in a region and account.
type Binding struct {
	From, To        resources.Definition
	Region, Account string
	Partition       string // default "aws"
}

// names maps every physical name the template can declare to the
// environment's name for the same resource.
func (b Binding) names() map[string]string {
	m := map[string]string{
		b.From.Bucket.Name: b.To.Bucket.Name, b.From.Table.Name: b.To.Table.Name,
		b.From.Bucket.NotifyFailureQueue: b.To.Bucket.NotifyFailureQueue,
	}
	for _, q := range b.From.Queues {
		to, _ := b.To.Queue(q.Class)
		m[q.Name], m[q.DLQName] = to.Name, to.DLQName
	}
	for _, f := range b.From.Functions {
		from, to := b.From.FunctionName(f.Name), b.To.FunctionName(f.Name)
		m[from] = to
		m["/aws/lambda/"+from] = "/aws/lambda/" + to
	}
	return m
}

// FunctionPolicies returns, per function (resources.Fn*), the union of the
// identity policies attached to its execution role, resolved for b.
func (t *Template) FunctionPolicies(b Binding) (map[string]Policy, error) {
	if b.Partition == "" {
		b.Partition = "aws"
	}
	r := resolver{t: t, b: b, names: b.names()}
	out := map[string]Policy{}
	for _, f := range b.From.Functions {
		fnID, err := t.functionID(b.From.FunctionName(f.Name))
		if err != nil {
			return nil, err
		}
		roleID, err := refID(t.resources[fnID].Properties["Role"])
		if err != nil {
			return nil, fmt.Errorf("function %s role: %w", f.Name, err)
		}
		role := t.resources[roleID]
		if role.Properties["ManagedPolicyArns"] != nil {
			return nil, fmt.Errorf("function %s: role %s has managed policies, which this checker cannot read from the template", f.Name, roleID)
		}
		var docs []any
		for _, p := range asList(role.Properties["Policies"]) {
			if pm, ok := p.(map[string]any); ok {
				docs = append(docs, pm["PolicyDocument"])
			}
		}
		for _, pid := range t.ids("AWS::IAM::Policy") {
			props := t.resources[pid].Properties
			for _, ro := range asList(props["Roles"]) {
				if id, err := refID(ro); err == nil && id == roleID {
					docs = append(docs, props["PolicyDocument"])
				}
			}
		}
		var pol Policy
		for _, d := range docs {
			resolved, err := r.value(d)
			if err != nil {
				return nil, fmt.Errorf("function %s policy: %w", f.Name, err)
			}
			raw, _ := json.Marshal(resolved)
			p, err := ParsePolicy(raw)
			if err != nil {
				return nil, fmt.Errorf("function %s policy: %w", f.Name, err)
			}
			pol.Statements = append(pol.Statements, p.Statements...)
		}
		if len(pol.Statements) == 0 {
			return nil, fmt.Errorf("function %s: no policy attached to role %s", f.Name, roleID)
		}
		out[f.Name] = pol
	}
	return out, nil
}

func (t *Template) functionID(name string) (string, error) {
	for _, id := range t.ids("AWS::Lambda::Function") {
		if t.definitionName(id) == name {
			return id, nil
		}
	}
	return "", fmt.Errorf("template %s declares no function %s", t.Path, name)
}

func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}

func refID(v any) (string, error) {
	m, _ := v.(map[string]any)
	if id, ok := m["Ref"].(string); ok {
		return id, nil
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
		if id, ok := ga[0].(string); ok {
			return id, nil
		}
	}
	return "", fmt.Errorf("not a reference: %v", v)
}

// resolver evaluates the intrinsic functions of policy documents.
type resolver struct {
	t     *Template
	b     Binding
	names map[string]string
}

// value resolves every intrinsic inside v, keeping its JSON shape.
func (r resolver) value(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 {
			for k := range v {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return r.str(v)
				}
			}
		}
		out := map[string]any{}
		for k, x := range v {
			rx, err := r.value(x)
			if err != nil {
				return nil, err
			}
			out[k] = rx
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			rx, err := r.value(x)
			if err != nil {
				return nil, err
			}
			out[i] = rx
		}
		return out, nil
	}
	return v, nil
}

var subRE = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// str resolves an intrinsic (or a literal) to a string.
func (r resolver) str(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case map[string]any:
		if id, ok := v["Ref"].(string); ok {
			return r.ref(id)
		}
		if ga, ok := v["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
			id, _ := ga[0].(string)
			attr, _ := ga[1].(string)
			return r.getAtt(id, attr)
		}
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 {
			sep, _ := j[0].(string)
			var parts []string
			for _, p := range asList(j[1]) {
				s, err := r.str(p)
				if err != nil {
					return "", err
				}
				parts = append(parts, s)
			}
			return strings.Join(parts, sep), nil
		}
		if s, ok := v["Fn::Sub"].(string); ok {
			return r.sub(s)
		}
	}
	return "", fmt.Errorf("cannot resolve %v", v)
}

func (r resolver) sub(s string) (string, error) {
	var err error
	out := subRE.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		var v string
		var e error
		if id, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
			v, e = r.getAtt(id, attr)
		} else {
			v, e = r.ref(name)
		}
		if e != nil && err == nil {
			err = e
		}
		return v
	})
	return out, err
}

func (r resolver) ref(id string) (string, error) {
	switch id {
	case "AWS::Partition":
		return r.b.Partition, nil
	case "AWS::Region":
		return r.b.Region, nil
	case "AWS::AccountId":
		return r.b.Account, nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	res, ok := r.t.resources[id]
	if !ok {
		return "", fmt.Errorf("Ref %s: no such resource", id)
	}
	name, err := r.physicalName(id)
	if err != nil {
		return "", err
	}
	if res.Type == "AWS::SQS::Queue" {
		return "", fmt.Errorf("Ref %s is a queue URL, which no policy should name", id)
	}
	return name, nil
}

func (r resolver) getAtt(id, attr string) (string, error) {
	res, ok := r.t.resources[id]
	if !ok {
		return "", fmt.Errorf("GetAtt %s.%s: no such resource", id, attr)
	}
	name, err := r.physicalName(id)
	if err != nil {
		return "", err
	}
	p, reg, acct := r.b.Partition, r.b.Region, r.b.Account
	switch {
	case attr == "Arn" && res.Type == "AWS::S3::Bucket":
		return fmt.Sprintf("arn:%s:s3:::%s", p, name), nil
	case attr == "Arn" && res.Type == "AWS::SQS::Queue":
		return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p, reg, acct, name), nil
	case attr == "Arn" && res.Type == "AWS::DynamoDB::Table":
		return fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", p, reg, acct, name), nil
	case attr == "Arn" && res.Type == "AWS::Logs::LogGroup":
		return fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s:*", p, reg, acct, name), nil
	case attr == "Arn" && res.Type == "AWS::Lambda::Function":
		return fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", p, reg, acct, name), nil
	}
	return "", fmt.Errorf("GetAtt %s.%s (%s) is not supported", id, attr, res.Type)
}

// definitionName is the resources.For name a template resource stands for:
// its declared physical name (a deploy with fixedNames), or the name the
// stack recorded as metadata (resources.MetadataName) when CloudFormation
// generates the physical one.
func (t *Template) definitionName(id string) string {
	res := t.resources[id]
	for _, k := range []string{"BucketName", "QueueName", "TableName", "FunctionName", "LogGroupName"} {
		if s, ok := res.Properties[k].(string); ok {
			return s
		}
	}
	name, _ := res.Metadata[resources.MetadataName].(string)
	return name
}

// physicalName is the environment's name of a template resource.
func (r resolver) physicalName(id string) (string, error) {
	res := r.t.resources[id]
	declared := r.t.definitionName(id)
	if _, mapped := r.names[declared]; !mapped && res.Type == "AWS::ApiGatewayV2::Api" && declared != "" {
		// A sandbox's stand-in owner API: only execute-api ARNs name it,
		// which no AWS data-plane call the checker judges can match.
		return declared, nil
	}
	if declared == "" {
		// A created bucket has a generated name: the data bucket is the
		// one at construct path <stack>/DataBucket.
		path, _ := res.Metadata["aws:cdk:path"].(string)
		if res.Type == "AWS::S3::Bucket" && strings.HasSuffix(path, "/DataBucket/Resource") {
			return r.b.To.Bucket.Name, nil
		}
		return "", fmt.Errorf("resource %s (%s) has no name this environment can map", id, res.Type)
	}
	if to, ok := r.names[declared]; ok {
		return to, nil
	}
	return "", fmt.Errorf("resource %s is named %q, which resources.Default(%q) does not declare", id, declared, r.b.From.Prefix)
}
