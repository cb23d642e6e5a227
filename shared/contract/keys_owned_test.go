package contract

import "testing"

func TestOwnedOutputTaskRecognisesOnlyTheCoordinatorsOutputs(t *testing.T) {
	c := "orders-eu"
	comp := NewTask(KindCompaction, c, 12, "sha256:"+string(make64('a')), 3, 1)
	trans := NewSweepTask(KindLifecycleTransition, c, 7, "sha256:"+string(make64('b')), 1, 120_000)
	gcTask := NewTask(KindGC, c, 12, "sha256:"+string(make64('a')), 3, 1)
	for _, tc := range []struct {
		key  string
		task string
	}{
		{RewriteOutputKey(c, 1, comp.TaskID, 0), comp.TaskID},
		{RewriteOutputKey(c, 9, comp.TaskID, 17), comp.TaskID},
		{RewriteOutputKey(c, 2, trans.TaskID, 3), trans.TaskID},
		{RewriteOutputKey(c, 0, trans.TaskID, 0), trans.TaskID}, // a transition keeps its input's level, 0 included
		{RewriteOutputKey(c, 0, comp.TaskID, 1), comp.TaskID},   // so does a fragmentation rewrite
	} {
		got, ok := OwnedOutputTask(c, tc.key)
		if !ok || got != tc.task {
			t.Errorf("%s: want owned by %s, got %q %v", tc.key, tc.task, got, ok)
		}
	}
	for _, key := range []string{
		AppendSegmentKey(c, 1, 5, 0),                    // ingest
		RewriteOutputKey(c, 1, gcTask.TaskID, 0),        // not a rewrite kind
		RewriteOutputKey("orders", 1, comp.TaskID, 0),   // another collection's prefix
		DataPrefix(c) + "l1/import-2026-01-01/0000.seg", // snapshot import
		DataPrefix(c) + "l1/" + comp.TaskID + "/0000.seg.tmp",
		DataPrefix(c) + "l1/" + comp.TaskID + "/00000.seg",
		DataPrefix(c) + "l1/" + comp.TaskID + "/x/0000.seg",
		DataPrefix(c) + "l1/compaction-" + c + "-v012-0123456789abcdef/0000.seg", // leading zero
		DataPrefix(c) + "l1/compaction-" + c + "-v12-0123456789ABCDEF/0000.seg",  // upper-case hex
		DataPrefix(c) + "l1/compaction-" + c + "-v12-0123456789abcde/0000.seg",   // short hash
		DataPrefix(c) + "l1/compaction-other-v12-0123456789abcdef/0000.seg",
	} {
		if id, ok := OwnedOutputTask(c, key); ok {
			t.Errorf("%s: must not be the coordinator's (parsed task %q)", key, id)
		}
	}
}

func make64(b byte) []byte {
	out := make([]byte, 64)
	for i := range out {
		out[i] = b
	}
	return out
}

func TestRootVersionParsesOnlyRootKeys(t *testing.T) {
	sum := "sha256:" + string(make64('c'))
	if v, ok := RootVersion("c1", ManifestKey("c1", 1, 42, sum)); !ok || v != 42 {
		t.Fatalf("root key: %d %v", v, ok)
	}
	for _, k := range []string{PartKey("c1", 1, 42, sum), ManifestKey("c2", 1, 42, sum), HeadKey("c1"), ManifestsPrefix("c1") + "00000000000000000042-CCCCCCCCCCCCCCCC.json",
		ManifestsPrefix("c1") + "99999999999999999999-cccccccccccccccc.json"} {
		if v, ok := RootVersion("c1", k); ok {
			t.Errorf("%s parsed as root v%d", k, v)
		}
	}
}
