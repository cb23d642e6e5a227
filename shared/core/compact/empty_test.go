package compact

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/guard"
)

// A merge whose every record is a delete the job may drop still adds one
// output: an empty segment (no records, no ranges) under the task's key,
// so the rewrite replaces its inputs by something of its own (the handoff
// refuses a rewrite that adds nothing for inputs holding records).
func TestMergeOfOnlyDropsAddsOneEmptyOutput(t *testing.T) {
	dir := t.TempDir()
	objects := fileObjects{dir: dir}
	var inputs []contract.ObjectEntry
	for i := range 2 {
		var buf bytes.Buffer
		w := segment.NewWriter(&buf, segment.WriterOptions{})
		for j := range 5 {
			if err := w.Add(segment.Record{Key: fmt.Sprintf("k%03d", j), Seq: uint64(10*i + j + 1), Delete: i == 1 || j%2 == 0, TsUnixMs: int64(j)}); err != nil {
				t.Fatal(err)
			}
		}
		f, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		key := contract.AppendSegmentKey(benchCollection, 1, uint64(i+1), 0)
		if err := os.MkdirAll(filepath.Dir(objects.path(key)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(objects.path(key), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, f.Entry(key, int64(buf.Len()), contract.Checksum(buf.Bytes()), contract.TierHot, 0))
	}
	ctx := context.Background()
	e := NewExecutor(objects, benchLeases{}, nil, nil, time.Now, ExecConfig{LeaseDuration: time.Minute, Guards: guard.All()}, nil, nil)
	task := benchTask()
	ls, err := e.leases.Acquire(ctx, task, "h", time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := lease.NewKeeper(e.leases, ls, task, time.Now, time.Now(), time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	added, stats, err := e.merge(ctx, task, keep, Job{Tier: contract.TierHot, Inputs: inputs, OutputLevel: 1, DropDeletes: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.RecordsOut != 0 || len(added) != 1 || added[0].DocCount != 0 || added[0].Key != contract.RewriteOutputKey(benchCollection, 1, task.TaskID, 0) {
		t.Fatalf("records out %d, added %+v: want one empty output", stats.RecordsOut, added)
	}
	b, err := objects.Get(ctx, added[0].Key)
	if err != nil || contract.Checksum(b) != added[0].Checksum {
		t.Fatalf("empty output %s: %v", added[0].Key, err)
	}
	r, err := segment.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil || r.Footer().Records != 0 {
		t.Fatalf("empty output reads as %v, %v", r, err)
	}
}
