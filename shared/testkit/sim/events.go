package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/core/gc"
)

// s3Event is the object-created notification of key, as S3 sends it.
func s3Event(bucket, key string, seq int) json.RawMessage {
	ev := events.S3Event{Records: []events.S3EventRecord{{
		EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: "us-east-1", EventName: "ObjectCreated:Put",
		EventTime: time.UnixMilli(startMs).UTC(),
		S3: events.S3Entity{SchemaVersion: "1.0", Bucket: events.S3Bucket{Name: bucket, Arn: "arn:aws:s3:::" + bucket},
			Object: events.S3Object{Key: key, Sequencer: fmt.Sprintf("%016X", seq)}},
	}}}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

// scheduledEvent is EventBridge's scheduled reconciliation event.
var scheduledEvent = json.RawMessage(`{"version":"0","id":"sim","detail-type":"Scheduled Event","source":"aws.events","account":"000000000000",` +
	`"time":"2025-01-01T00:00:00Z","region":"us-east-1","resources":[],"detail":{}}`)

// compactJSON renders v on one line for the trace.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// emfCounter reads the functions' EMF metric lines and adds every count
// to the world's counters as "m:<metric>" (timings are ignored).
type emfCounter struct{ w *World }

func (e emfCounter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		var doc map[string]any
		if json.Unmarshal(line, &doc) != nil {
			continue
		}
		aws, _ := doc["_aws"].(map[string]any)
		cwm, _ := aws["CloudWatchMetrics"].([]any)
		for _, d := range cwm {
			// A line with its own dimension (Kind, Reason) also counts as
			// "m:<metric>|<dim>=<value>".
			suffix := ""
			sets, _ := d.(map[string]any)["Dimensions"].([]any)
			for _, set := range sets {
				for _, dim := range set.([]any) {
					if n, _ := dim.(string); n != "Function" && n != "Deployment" {
						if v, ok := doc[n].(string); ok {
							suffix = "|" + n + "=" + v
						}
					}
				}
			}
			defs, _ := d.(map[string]any)["Metrics"].([]any)
			for _, def := range defs {
				m, _ := def.(map[string]any)
				name, _ := m["Name"].(string)
				if v, ok := doc[name].(float64); ok && m["Unit"] == "Count" {
					e.w.Counts["m:"+name] += int(v)
					if suffix != "" {
						e.w.Counts["m:"+name+suffix] += int(v)
					}
				}
			}
		}
	}
	return len(p), nil
}

// traceLog writes the functions' log lines (Info and above) into the
// trace.
type traceLog struct {
	w     *World
	attrs []slog.Attr
}

func (traceLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (t traceLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range t.attrs {
		write(a)
	}
	r.Attrs(write)
	t.w.logf("      | %s %s", r.Level, b.String())
	if r.Message == gc.LogRefused {
		var c, reason string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "collection":
				c = a.Value.String()
			case "reason":
				reason = a.Value.String()
			}
			return true
		})
		t.w.onRefused(c, reason)
	}
	return nil
}

func (t traceLog) WithAttrs(as []slog.Attr) slog.Handler {
	return traceLog{w: t.w, attrs: append(append([]slog.Attr(nil), t.attrs...), as...)}
}

func (t traceLog) WithGroup(string) slog.Handler { return t }
