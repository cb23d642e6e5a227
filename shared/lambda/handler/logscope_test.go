package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/searchfabric/bcc/shared/metrics"
)

// Every line a deployed function writes, the use cases' (which log without
// the invocation's context) and the handler's own, carries the request id,
// and while a record is handled its collection and task; a line that names
// its collection itself keeps it, once.
func TestEveryLogLineCarriesRequestCollectionAndTask(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewScopedHandler(slog.NewJSONHandler(&buf, nil)))
	useCase := log.With("component", "gc") // as a use case holds it
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: `{"task_id":"gc:c1:7","collection":"c1"}`, Attributes: map[string]string{"MessageGroupId": "c1", "MessageDeduplicationId": "gc:c1:7"}},
		{MessageId: "m2", Body: `not json`, Attributes: map[string]string{"MessageGroupId": "c2", "MessageDeduplicationId": "dedup-2"}},
	}}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	func() {
		defer scopeInvocation(ctx, log)()
		DefaultBatch().walk(ctx, ev, log, metrics.New("t"), func(r events.SQSMessage) error {
			useCase.Info("work")
			useCase.Info("named", "collection", "explicit")
			if r.MessageId == "m2" {
				return errors.New("failed")
			}
			return nil
		})
	}()
	log.Info("after the invocation")

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if strings.Count(l, `"collection"`) != 1 {
			t.Errorf("collection not exactly once: %s", l)
		}
		lines = append(lines, m)
	}
	want := []struct{ msg, req, coll, task string }{
		{"work", "req-1", "c1", "gc:c1:7"},
		{"named", "req-1", "explicit", "gc:c1:7"},
		{"work", "req-1", "c2", "dedup-2"},
		{"named", "req-1", "explicit", "dedup-2"},
		{"batch items failed; they return to the queue", "req-1", "", ""},
		{"after the invocation", "", "", ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		l := lines[i]
		for k, v := range map[string]string{"msg": w.msg, LogRequestID: w.req, LogCollection: w.coll, LogTask: w.task} {
			if got, ok := l[k]; !ok || got != v {
				t.Errorf("line %d %s = %v (present %v), want %q: %v", i, k, got, ok, v, l)
			}
		}
	}
}

// Without a scoped handler (the embedded stack, tests) nothing is added.
func TestUnscopedLoggersAreLeftAlone(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	defer scopeInvocation(ctx, log)()
	log.Info("x")
	if strings.Contains(buf.String(), LogRequestID) {
		t.Fatalf("unscoped logger got a scope: %s", buf.String())
	}
}
