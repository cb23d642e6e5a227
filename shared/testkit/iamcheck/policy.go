package iamcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ErrUnsupported: the policy uses an element this evaluator does not judge.
var ErrUnsupported = errors.New("unsupported policy element")

// Statement is one statement of an identity-based policy.
type Statement struct {
	Sid       string
	Effect    string   // Allow or Deny
	Actions   []string // e.g. s3:GetObject, sqs:*
	Resources []string // ARNs, with '*' and '?' wildcards
	// Conditions all must hold for the statement to apply. Judged:
	// dynamodb:LeadingKeys with StringLike (plain, ForAnyValue: or
	// ForAllValues:); s3:if-none-match and s3:ObjectCreationOperation
	// with Null and Bool. Any other condition is ErrUnsupported.
	Conditions []Condition
}

// Condition is one condition of a statement: Op over Key's values.
type Condition struct {
	Op     string // StringLike, ForAnyValue:StringLike, ForAllValues:StringLike, Null or Bool
	Key    string // dynamodb:LeadingKeys, s3:if-none-match, s3:ObjectCreationOperation
	Values []string
}

// conditionOps are the operators judged, by key.
var conditionOps = map[string][]string{
	"dynamodb:LeadingKeys":       {"StringLike", "ForAnyValue:StringLike", "ForAllValues:StringLike"},
	"s3:if-none-match":           {"Null", "StringEquals"},
	"s3:ObjectCreationOperation": {"Null", "Bool"},
}

// holds evaluates the condition for a request whose values of Key are
// have (nil: the request has no such key). Without values, ForAllValues
// holds (vacuously) and the others do not, as in IAM.
func (c Condition) holds(have []string) bool {
	like := func(v string) bool {
		for _, p := range c.Values {
			if wildcard(p, v) {
				return true
			}
		}
		return false
	}
	switch c.Op {
	case "Null": // "true": the key is absent; "false": present
		return len(c.Values) == 1 && (c.Values[0] == "true") == (len(have) == 0)
	case "Bool", "StringEquals":
		for _, v := range have {
			for _, want := range c.Values {
				if strings.EqualFold(v, want) || c.Op == "StringEquals" && v == want {
					return true
				}
			}
		}
		return false
	case "ForAllValues:StringLike":
		for _, v := range have {
			if !like(v) {
				return false
			}
		}
		return true
	default: // StringLike, ForAnyValue:StringLike
		for _, v := range have {
			if like(v) {
				return true
			}
		}
		return false
	}
}

// Policy is an identity-based policy document.
type Policy struct {
	Statements []Statement
}

// String names a statement for messages: its Sid, or its actions.
func (s Statement) String() string {
	if s.Sid != "" {
		return s.Sid
	}
	return strings.Join(s.Actions, ",")
}

// ParsePolicy reads a policy document (JSON). Action and Resource may be a
// string or a list; Condition, NotAction, NotResource and Principal are
// refused (ErrUnsupported).
func ParsePolicy(doc []byte) (Policy, error) {
	var raw struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	var stmts []map[string]any
	if err := json.Unmarshal(raw.Statement, &stmts); err != nil {
		var one map[string]any
		if err2 := json.Unmarshal(raw.Statement, &one); err2 != nil {
			return Policy{}, fmt.Errorf("policy Statement: %w", err)
		}
		stmts = []map[string]any{one}
	}
	var p Policy
	for i, m := range stmts {
		st, err := statementFrom(m)
		if err != nil {
			return Policy{}, fmt.Errorf("statement %d: %w", i, err)
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

func statementFrom(m map[string]any) (Statement, error) {
	var st Statement
	for k, v := range m {
		switch k {
		case "Sid":
			st.Sid, _ = v.(string)
		case "Effect":
			st.Effect, _ = v.(string)
		case "Action":
			st.Actions = strings1(v)
		case "Resource":
			st.Resources = strings1(v)
		case "Condition":
			conds, err := conditionsFrom(v)
			if err != nil {
				return Statement{}, err
			}
			st.Conditions = conds
		default:
			return Statement{}, fmt.Errorf("%w: %s", ErrUnsupported, k)
		}
	}
	if st.Effect != "Allow" && st.Effect != "Deny" {
		return Statement{}, fmt.Errorf("effect %q", st.Effect)
	}
	if len(st.Actions) == 0 || len(st.Resources) == 0 {
		return Statement{}, fmt.Errorf("statement %s needs Action and Resource", st)
	}
	return st, nil
}

func conditionsFrom(v any) ([]Condition, error) {
	ops, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: Condition %v", ErrUnsupported, v)
	}
	var out []Condition
	for op, kv := range ops {
		keys, ok := kv.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: Condition %s", ErrUnsupported, op)
		}
		for k, vals := range keys {
			if !slices.Contains(conditionOps[k], op) {
				return nil, fmt.Errorf("%w: Condition %s on key %s", ErrUnsupported, op, k)
			}
			out = append(out, Condition{Op: op, Key: k, Values: strings1(vals)})
		}
	}
	return out, nil
}

func strings1(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Document renders p as a policy document (for creating an identity).
func (p Policy) Document() []byte {
	type st struct {
		Sid       string                         `json:"Sid,omitempty"`
		Effect    string                         `json:"Effect"`
		Action    []string                       `json:"Action"`
		Resource  []string                       `json:"Resource"`
		Condition map[string]map[string][]string `json:"Condition,omitempty"`
	}
	doc := struct {
		Version   string `json:"Version"`
		Statement []st   `json:"Statement"`
	}{Version: "2012-10-17"}
	for _, s := range p.Statements {
		var cond map[string]map[string][]string
		for _, c := range s.Conditions {
			if cond == nil {
				cond = map[string]map[string][]string{}
			}
			if cond[c.Op] == nil {
				cond[c.Op] = map[string][]string{}
			}
			cond[c.Op][c.Key] = c.Values
		}
		doc.Statement = append(doc.Statement, st{s.Sid, s.Effect, s.Actions, s.Resources, cond})
	}
	b, _ := json.Marshal(doc)
	return b
}

// Without returns p minus its i-th statement.
func (p Policy) Without(i int) Policy {
	out := Policy{Statements: append([]Statement(nil), p.Statements[:i]...)}
	out.Statements = append(out.Statements, p.Statements[i+1:]...)
	return out
}

// Decision is the outcome of evaluating one request.
type Decision int

// Decisions, in IAM's order of precedence.
const (
	ImplicitDeny Decision = iota
	Allowed
	ExplicitDeny
)

func (d Decision) String() string {
	return [...]string{"implicitly denied", "allowed", "explicitly denied"}[d]
}

// Evaluate decides action on resource: an explicit Deny wins, else an Allow
// allows, else it is implicitly denied. It also returns the indexes of the
// statements that allow it (explicitly denied: the one Deny that refused it). A statement with conditions applies to no
// request judged without context (EvaluateRequest judges them).
func (p Policy) Evaluate(action, resource string) (Decision, []int) {
	return p.EvaluateRequest(Request{Action: action, Resource: resource})
}

// EvaluateRequest is Evaluate with the request's condition context.
func (p Policy) EvaluateRequest(r Request) (Decision, []int) {
	action, resource := r.Action, r.Resource
	var allowedBy []int
	for i, s := range p.Statements {
		if !s.matches(action, resource) || !s.conditionsHold(r) {
			continue
		}
		if s.Effect == "Deny" {
			return ExplicitDeny, []int{i}
		}
		allowedBy = append(allowedBy, i)
	}
	if len(allowedBy) > 0 {
		return Allowed, allowedBy
	}
	return ImplicitDeny, nil
}

func (s Statement) conditionsHold(r Request) bool {
	for _, c := range s.Conditions {
		have := r.Keys[c.Key]
		if c.Key == "dynamodb:LeadingKeys" && r.LeadingKey != "" {
			have = []string{r.LeadingKey}
		}
		if !c.holds(have) {
			return false
		}
	}
	return true
}

func (s Statement) matches(action, resource string) bool {
	ok := false
	for _, a := range s.Actions {
		if wildcard(strings.ToLower(a), strings.ToLower(action)) {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	for _, r := range s.Resources {
		if wildcard(r, resource) {
			return true
		}
	}
	return false
}

var patterns sync.Map // pattern -> *regexp.Regexp

// wildcard matches IAM's '*' (any run of characters, '/' and ':' included)
// and '?' (one character).
func wildcard(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == s
	}
	re, ok := patterns.Load(pattern)
	if !ok {
		q := regexp.QuoteMeta(pattern)
		q = strings.NewReplacer(`\*`, `.*`, `\?`, `.`).Replace(q)
		re, _ = patterns.LoadOrStore(pattern, regexp.MustCompile(`^(?s)`+q+`$`))
	}
	return re.(*regexp.Regexp).MatchString(s)
}
