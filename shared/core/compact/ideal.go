package compact

import (
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// IdealWrites is the policy's ideal compaction write cost: the bytes
// compaction writes into each output level when the policy's every job
// runs right after each commit and lands — no merge dropped, none delayed,
// none coalesced — starting from the object set start and appending the
// level-0 objects appends one commit at a time. It is the yardstick the
// write-amplification figures (make bench, the demo summary) compare the
// measured MergeBytesWritten with.
//
// The replay runs Plan itself, so the ideal is this policy's, not a
// textbook tiered one. An output is as large as its inputs together (no
// version superseded, no delete marker dropped): an upper bound on what a
// real merge writes, which drops overwritten versions. Outputs are not
// split at target_object_bytes (every workload measured stays below it).
func IdealWrites(p Policy, start, appends []contract.ObjectEntry) map[int]int64 {
	written := map[int]int64{}
	objs := append([]contract.ObjectEntry(nil), start...)
	n := 0
	settle := func() {
		for round := 0; round < 64; round++ {
			jobs := Plan(Snapshot{Objects: objs}, p, time.Time{})
			if len(jobs) == 0 {
				return
			}
			for _, j := range jobs {
				objs = replace(objs, j, &n)
				written[j.OutputLevel] += j.Bytes()
			}
		}
	}
	settle()
	for _, a := range appends {
		objs = append(objs, a)
		settle()
	}
	return written
}

// replace removes j's inputs from objs and adds the one output the ideal
// merge writes.
func replace(objs []contract.ObjectEntry, j Job, n *int) []contract.ObjectEntry {
	in := make(map[string]bool, len(j.Inputs))
	for _, o := range j.Inputs {
		in[o.Key] = true
	}
	out := objs[:0]
	for _, o := range objs {
		if !in[o.Key] {
			out = append(out, o)
		}
	}
	*n++
	first := j.Inputs[0]
	merged := contract.ObjectEntry{Key: fmt.Sprintf("ideal/l%d/%08d.seg", j.OutputLevel, *n), Tier: j.Tier, Level: j.OutputLevel,
		MinTsUnixMs: first.MinTsUnixMs, MaxTsUnixMs: first.MaxTsUnixMs, MinSeq: first.MinSeq, MaxSeq: first.MaxSeq,
		MinRecordKey: first.MinRecordKey, MaxRecordKey: first.MaxRecordKey}
	for _, o := range j.Inputs {
		merged.Size += o.Size
		merged.DocCount += o.DocCount
		if !j.DropDeletes {
			merged.DeleteCount += o.DeleteCount
		}
		merged.MinTsUnixMs, merged.MaxTsUnixMs = min(merged.MinTsUnixMs, o.MinTsUnixMs), max(merged.MaxTsUnixMs, o.MaxTsUnixMs)
		merged.MinSeq, merged.MaxSeq = min(merged.MinSeq, o.MinSeq), max(merged.MaxSeq, o.MaxSeq)
		merged.MinRecordKey, merged.MaxRecordKey = min(merged.MinRecordKey, o.MinRecordKey), max(merged.MaxRecordKey, o.MaxRecordKey)
	}
	return append(out, merged)
}
