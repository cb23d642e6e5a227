package localaws

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// The stack's EventBridge: the default event bus with rules that target
// Lambda functions, managed through the real API (PutRule, PutTargets,
// RemoveTargets, DeleteRule, DescribeRule, ListTargetsByRule) and fed by
// buckets whose notification configuration has EventBridgeConfiguration.
// Events go to a rule's targets as asynchronous invocations, with Lambda's
// retries and on-failure destination, in the exact "Object Created" shape.
//
// Patterns: a JSON object of fields; a leaf is an array of alternatives,
// each a string (exact), or {"prefix": s}, {"suffix": s}, {"wildcard": s}.
// Any other operator is refused with a ValidationException naming it, and
// so is a target that is not a function of this stack: the stack would not
// honour them.
const eventsTargetPrefix = "AWSEvents."

type eventRule struct {
	name    string
	pattern map[string]any
	raw     string
	enabled bool
	targets map[string]string // target id -> function name
	arns    map[string]string // target id -> ARN as given
}

type eventBus struct {
	mu    sync.Mutex
	rules map[string]*eventRule
}

func newEventBus() *eventBus { return &eventBus{rules: map[string]*eventRule{}} }

func ruleARN(name string) string {
	return fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", Region, AccountID, name)
}

func writeEventsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
	_, _ = w.Write(b)
}

func writeEventsJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	b, _ := json.Marshal(v)
	_, _ = w.Write(b)
}

// serveEvents answers the EventBridge API.
func (s *Stack) serveEvents(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), eventsTargetPrefix)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeEventsError(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	var in struct {
		Name, Rule, EventPattern, State, EventBusName string
		Targets                                       []struct{ Id, Arn string }
		Ids                                           []string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeEventsError(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	if in.EventBusName != "" && in.EventBusName != "default" {
		writeEventsError(w, http.StatusBadRequest, "ValidationException", "the embedded stack has only the default event bus")
		return
	}
	b := s.events
	b.mu.Lock()
	defer b.mu.Unlock()
	switch op {
	case "PutRule":
		var pattern map[string]any
		if err := json.Unmarshal([]byte(in.EventPattern), &pattern); err != nil || in.Name == "" {
			writeEventsError(w, http.StatusBadRequest, "InvalidEventPatternException", fmt.Sprintf("rule %q needs a JSON event pattern: %v", in.Name, err))
			return
		}
		if err := checkPattern(pattern, ""); err != nil {
			writeEventsError(w, http.StatusBadRequest, "ValidationException", err.Error())
			return
		}
		rule, ok := b.rules[in.Name]
		if !ok {
			rule = &eventRule{name: in.Name, targets: map[string]string{}, arns: map[string]string{}}
			b.rules[in.Name] = rule
		}
		rule.pattern, rule.raw, rule.enabled = pattern, in.EventPattern, in.State != "DISABLED"
		writeEventsJSON(w, map[string]string{"RuleArn": ruleARN(in.Name)})
	case "PutTargets":
		rule, ok := b.rules[in.Rule]
		if !ok {
			writeEventsError(w, http.StatusBadRequest, "ResourceNotFoundException", "Rule "+in.Rule+" does not exist.")
			return
		}
		for _, t := range in.Targets {
			fn, ok := strings.CutPrefix(t.Arn, FunctionARN(""))
			if !ok || fn == "" {
				writeEventsError(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf(
					"target %s: the embedded stack delivers EventBridge events only to its Lambda functions (%s<name>), not to %s", t.Id, FunctionARN(""), t.Arn))
				return
			}
		}
		for _, t := range in.Targets {
			rule.targets[t.Id] = strings.TrimPrefix(t.Arn, FunctionARN(""))
			rule.arns[t.Id] = t.Arn
		}
		writeEventsJSON(w, map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}})
	case "RemoveTargets":
		if rule, ok := b.rules[in.Rule]; ok {
			for _, id := range in.Ids {
				delete(rule.targets, id)
				delete(rule.arns, id)
			}
		}
		writeEventsJSON(w, map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}})
	case "DeleteRule":
		delete(b.rules, in.Name)
		writeEventsJSON(w, map[string]any{})
	case "DescribeRule":
		rule, ok := b.rules[in.Name]
		if !ok {
			writeEventsError(w, http.StatusBadRequest, "ResourceNotFoundException", "Rule "+in.Name+" does not exist.")
			return
		}
		state := "ENABLED"
		if !rule.enabled {
			state = "DISABLED"
		}
		writeEventsJSON(w, map[string]string{"Name": rule.name, "Arn": ruleARN(rule.name), "EventPattern": rule.raw, "State": state, "EventBusName": "default"})
	case "ListTargetsByRule":
		rule, ok := b.rules[in.Rule]
		if !ok {
			writeEventsError(w, http.StatusBadRequest, "ResourceNotFoundException", "Rule "+in.Rule+" does not exist.")
			return
		}
		var ts []map[string]string
		for _, id := range sortedKeys(rule.arns) {
			ts = append(ts, map[string]string{"Id": id, "Arn": rule.arns[id]})
		}
		writeEventsJSON(w, map[string]any{"Targets": ts})
	default:
		writeEventsError(w, http.StatusBadRequest, "UnknownOperationException", "the embedded stack does not implement EventBridge "+op)
	}
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkPattern refuses what match does not implement.
func checkPattern(p map[string]any, path string) error {
	for k, v := range p {
		switch v := v.(type) {
		case map[string]any:
			if err := checkPattern(v, path+k+"."); err != nil {
				return err
			}
		case []any:
			for _, alt := range v {
				switch alt := alt.(type) {
				case string:
				case map[string]any:
					for op, arg := range alt {
						if _, ok := arg.(string); !ok || (op != "prefix" && op != "suffix" && op != "wildcard") {
							return fmt.Errorf("event pattern %s%s: operator %q is not supported by the embedded stack (only exact strings, prefix, suffix and wildcard)", path, k, op)
						}
					}
				default:
					return fmt.Errorf("event pattern %s%s: %v is not supported by the embedded stack (only strings and prefix/suffix/wildcard)", path, k, alt)
				}
			}
		default:
			return fmt.Errorf("event pattern %s%s must be an object or an array", path, k)
		}
	}
	return nil
}

// match reports whether event (decoded JSON) satisfies pattern.
func match(pattern, event map[string]any) bool {
	for k, want := range pattern {
		got, ok := event[k]
		if !ok {
			return false
		}
		switch want := want.(type) {
		case map[string]any:
			sub, ok := got.(map[string]any)
			if !ok || !match(want, sub) {
				return false
			}
		case []any:
			if !matchLeaf(want, got) {
				return false
			}
		}
	}
	return true
}

func matchLeaf(alts []any, got any) bool {
	values, ok := got.([]any) // an array value matches if any element does
	if !ok {
		values = []any{got}
	}
	for _, v := range values {
		s, ok := v.(string)
		if !ok {
			continue
		}
		for _, alt := range alts {
			switch alt := alt.(type) {
			case string:
				if s == alt {
					return true
				}
			case map[string]any:
				if p, ok := alt["prefix"].(string); ok && strings.HasPrefix(s, p) {
					return true
				}
				if p, ok := alt["suffix"].(string); ok && strings.HasSuffix(s, p) {
					return true
				}
				if p, ok := alt["wildcard"].(string); ok && wildcardMatch(p, s) {
					return true
				}
			}
		}
	}
	return false
}

// wildcardMatch is EventBridge's wildcard: '*' is any run of characters.
func wildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// s3EventBridgeEvent is S3's "Object Created" event on the default bus.
func s3EventBridgeEvent(bucket, key, eventName, etag string, size int64, seq uint64) map[string]any {
	reason := map[string]string{"ObjectCreated:Put": "PutObject", "ObjectCreated:Copy": "CopyObject",
		"ObjectCreated:CompleteMultipartUpload": "CompleteMultipartUpload"}[eventName]
	return map[string]any{
		"version": "0", "id": fmt.Sprintf("local-%016x", seq), "detail-type": "Object Created", "source": "aws.s3",
		"account": AccountID, "time": time.Now().UTC().Format(time.RFC3339), "region": Region,
		"resources": []any{"arn:aws:s3:::" + bucket},
		"detail": map[string]any{
			"version": "0", "bucket": map[string]any{"name": bucket},
			// EventBridge carries the key as is (S3 notifications URL-encode it).
			"object":     map[string]any{"key": key, "size": size, "etag": etag, "sequencer": fmt.Sprintf("%018X", seq)},
			"request-id": fmt.Sprintf("%016X", seq), "requester": AccountID, "source-ip-address": "127.0.0.1", "reason": reason,
		},
	}
}

// publish delivers event to the targets of every enabled rule it matches.
func (s *Stack) publish(event map[string]any) {
	payload, err := json.Marshal(event)
	if err != nil {
		s.log.Error("encode eventbridge event", "err", err)
		return
	}
	var decoded map[string]any
	_ = json.Unmarshal(payload, &decoded) // numbers as the pattern matcher sees them
	b := s.events
	b.mu.Lock()
	var fns []string
	for _, name := range sortedRuleNames(b.rules) {
		rule := b.rules[name]
		if !rule.enabled || !match(rule.pattern, decoded) {
			continue
		}
		for _, id := range sortedKeys(rule.targets) {
			fns = append(fns, rule.targets[id])
		}
	}
	b.mu.Unlock()
	for _, fn := range fns {
		s.notify.deliver(HeldEvent{Function: fn, Payload: payload})
	}
}

func sortedRuleNames(m map[string]*eventRule) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
