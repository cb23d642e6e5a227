package metrics

// Adversarial review of issue 31: fails on main at 7686bd0.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The EMF specification: "Numeric array metric targets MUST NOT have more
// than 100 members"; CloudWatch extracts no metric from a document that
// breaks it. A GC invocation that waits for delete tokens on more than 100
// DeleteObjects calls (GCBudgetWaitMs, once per waiting call: exactly when
// the fleet budget is saturated) flushes one array of every wait, and the
// line carrying it also carries every other undimensioned metric of the
// invocation (ObjectsDeleted, ManifestsDeleted, ...): all of it is lost in
// CloudWatch.
func TestFlushKeepsValueArraysWithinTheEMFLimit(t *testing.T) {
	r := NewFor("bcc", "gc")
	for range 150 {
		r.Duration("GCBudgetWaitMs", 20*time.Millisecond)
	}
	r.Add("ObjectsDeleted", 150_000)
	var b bytes.Buffer
	if err := r.Flush(&b, time.UnixMilli(1_796_126_400_000)); err != nil {
		t.Fatal(err)
	}
	total := 0
	sc := bufio.NewScanner(&b)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		var vs []float64
		if raw, ok := line["GCBudgetWaitMs"]; ok {
			if err := json.Unmarshal(raw, &vs); err != nil {
				t.Fatal(err)
			}
		}
		if len(vs) > 100 {
			t.Errorf("an EMF line carries GCBudgetWaitMs as an array of %d values (the EMF limit is 100: CloudWatch drops the line, ObjectsDeleted with it)", len(vs))
		}
		total += len(vs)
	}
	if total != 150 {
		t.Errorf("%d of 150 observations flushed", total)
	}
}

// A duration measured across two clocks may come out negative; CloudWatch
// computes no percentile over a period holding a negative value (the p99
// series and its alarm would go blank), so the recorder writes 0.
func TestNegativeDurationIsRecordedAsZero(t *testing.T) {
	r := NewFor("bcc", "observer")
	r.Duration("ObserveLagMs", -3*time.Second)
	r.Duration("ObserveLagMs", 2*time.Second)
	if got := r.Durations("ObserveLagMs"); len(got) != 2 || got[0] != 0 || got[1] != 2000 {
		t.Fatalf("recorded %v, want [0 2000]", got)
	}
}
