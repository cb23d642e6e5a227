package metrics

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// One invocation flushes one EMF line per dimension set: counters as sums,
// durations as value arrays in milliseconds, all in the BCC namespace.
func TestFlushWritesEMF(t *testing.T) {
	r := New("observer")
	r.Add("HeadsObserved", 1)
	r.Add("HeadsObserved", 1)
	r.AddDim("GCDeferred", "Reason", "watermark", 3)
	r.Duration("ObserveLagMs", 1500*time.Millisecond)
	r.Duration("ObserveLagMs", 20*time.Millisecond)
	var b bytes.Buffer
	if err := r.Flush(&b, time.UnixMilli(1000)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), b.String())
	}
	var plain, dim map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &plain)
	_ = json.Unmarshal([]byte(lines[1]), &dim)
	if plain["HeadsObserved"] != 2.0 || plain["Function"] != "observer" {
		t.Fatalf("counter line %s", lines[0])
	}
	lag, _ := plain["ObserveLagMs"].([]any)
	if len(lag) != 2 || lag[0] != 1500.0 || !strings.Contains(lines[0], `"Unit":"Milliseconds"`) || !strings.Contains(lines[0], `"Namespace":"BCC"`) {
		t.Fatalf("duration not an EMF value array in ms: %s", lines[0])
	}
	if dim["Reason"] != "watermark" || dim["GCDeferred"] != 3.0 || !strings.Contains(lines[1], `"Dimensions":[["Function"],["Function","Reason"]]`) {
		t.Fatalf("dimension line %s (want the per-function total declared too)", lines[1])
	}
	b.Reset()
	_ = r.Flush(&b, time.UnixMilli(2000))
	if b.Len() != 0 {
		t.Fatalf("flush did not reset: %s", b.String())
	}
}

// A deployed function's every metric carries the deployment's name, so two
// stacks in one account never add up into one series.
func TestEveryDimensionSetNamesTheDeployment(t *testing.T) {
	r := NewFor("acme", "gc")
	r.Add("ObjectsDeleted", 2)
	r.AddDim("GCDeferred", "Reason", "watermark", 1)
	r.Duration("TaskWaitMs", 3*time.Millisecond)
	var b strings.Builder
	if err := r.Flush(&b, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["Deployment"] != "acme" {
			t.Errorf("line without the deployment: %s", l)
		}
		for _, set := range m["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"].([]any) {
			if set.([]any)[0] != "Deployment" {
				t.Errorf("dimension set %v does not start with Deployment", set)
			}
		}
	}
}
