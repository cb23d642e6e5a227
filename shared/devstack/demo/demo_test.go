package demo

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoRunsEndToEnd keeps `make demo` true: a smaller run of the same job
// must verify every key and leave every retained object in place, while
// compaction and GC actually did work.
func TestDemoRunsEndToEnd(t *testing.T) {
	var out bytes.Buffer
	sum, err := Run(context.Background(), Options{Collections: 3, Commits: 6, Parallel: 2, Seed: 7, Out: &out,
		JSONPath: filepath.Join(t.TempDir(), "summary.json")})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !sum.Verified || sum.Metrics["handoff.CutoversAccepted"] == 0 || sum.Metrics["gc.ObjectsDeleted"] == 0 {
		t.Fatalf("demo did not exercise compaction and GC: %+v\n%s", sum.Metrics, out.String())
	}
	if !strings.Contains(out.String(), "verified:") {
		t.Fatalf("no verification line:\n%s", out.String())
	}
}
