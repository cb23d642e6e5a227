package contract

import "fmt"

// CoverageConserved says why a rewrite's coverage (removed: the base's
// entries it replaces; added: its outputs) cannot be the work it claims
// ("" when it can): a rewrite of inputs holding records that adds nothing,
// a lifecycle transition (transition) whose outputs are not its inputs
// copied to task taskID's output keys, or a merge whose outputs cannot
// hold what its inputs held. It is the one conservation check the
// handoff's provenance check (before it submits) and the publisher (at the
// moment of effect: a caller holding the handoff's role alone submits
// what it likes) both make.
func CoverageConserved(c, taskID string, transition bool, removed, added []ObjectEntry) string {
	if len(added) == 0 {
		var records int64
		for _, o := range removed {
			records += o.DocCount
		}
		if records > 0 {
			return fmt.Sprintf("removes %d objects holding %d records and adds nothing", len(removed), records)
		}
	}
	if transition {
		return transitionConserved(c, taskID, removed, added)
	}
	return mergeConserved(removed, added)
}

// RewriteTask returns the rewrite task whose output keys added names
// (every one of them that task's own), and whether that task is a
// lifecycle transition; ok is false when added names no output or several
// tasks' (or any key that is no rewrite output).
func RewriteTask(c string, added []ObjectEntry) (taskID string, transition, ok bool) {
	for _, o := range added {
		id, own := OwnedOutputTask(c, o.Key)
		if !own || taskID != "" && id != taskID {
			return "", false, false
		}
		taskID = id
	}
	if taskID == "" {
		return "", false, false
	}
	_, _, transition = parseTaskID(KindLifecycleTransition, c, taskID)
	return taskID, transition, true
}

// transitionConserved: a lifecycle transition copies each input to its own
// output key in another tier, bytes unchanged: output n is input n with
// only its key (RewriteOutputKey at the input's level, index n) and tier
// changed.
func transitionConserved(c, taskID string, in, out []ObjectEntry) string {
	if len(in) != len(out) {
		return fmt.Sprintf("a transition of %d objects adds %d", len(in), len(out))
	}
	for n := range in {
		want := in[n]
		want.Key, want.Tier = RewriteOutputKey(c, in[n].Level, taskID, n), out[n].Tier
		if out[n] != want {
			return fmt.Sprintf("output %s is not a copy of input %s (only key and tier may differ)", out[n].Key, in[n].Key)
		}
	}
	return ""
}

// mergeConserved bounds what a compaction merge can make of its inputs
// (segment.Merge: one version per key, the newest; the newest versions
// that are delete markers dropped only when the job may drop deletes, and
// then every one of them). With R the removed entries (the base's) and A
// the added ones:
//   - records and deletes only shrink: sum A.doc <= sum R.doc, sum A.del <=
//     sum R.del;
//   - at most the deletes can vanish beyond shadowed versions: the
//     distinct keys number at least max R.doc, so sum A.doc >= max R.doc -
//     sum R.del;
//   - keys, sequence numbers and timestamps stay within R's ranges;
//   - when no delete can have been dropped (R holds none, or A still holds
//     some: a merge that drops deletes drops every newest one), every key
//     survives: A's key range is R's, and sum A.doc >= max R.doc.
//
// Empty outputs (no records; a merge whose every record was a dropped
// delete writes one) claim no ranges.
func mergeConserved(in, out []ObjectEntry) string {
	r, a := spanOf(in), spanOf(out)
	switch {
	case a.docs > r.docs || a.dels > r.dels:
		return fmt.Sprintf("outputs hold %d records (%d deletes), more than the inputs' %d (%d)", a.docs, a.dels, r.docs, r.dels)
	case a.docs < r.maxDocs-r.dels:
		return fmt.Sprintf("outputs hold %d records; inputs of up to %d records with %d deletes leave at least %d", a.docs, r.maxDocs, r.dels, r.maxDocs-r.dels)
	case a.docs > 0 && (a.minKey < r.minKey || a.maxKey > r.maxKey):
		return fmt.Sprintf("outputs span keys [%s, %s] beyond the inputs' [%s, %s]", a.minKey, a.maxKey, r.minKey, r.maxKey)
	case a.docs > 0 && (a.minSeq < r.minSeq || a.maxSeq > r.maxSeq || a.minTs < r.minTs || a.maxTs > r.maxTs):
		return fmt.Sprintf("outputs span seq [%d, %d] ts [%d, %d] beyond the inputs' seq [%d, %d] ts [%d, %d]",
			a.minSeq, a.maxSeq, a.minTs, a.maxTs, r.minSeq, r.maxSeq, r.minTs, r.maxTs)
	}
	if r.dels == 0 || a.dels > 0 {
		// Nothing was dropped but shadowed versions: every key survives.
		switch {
		case a.docs < r.maxDocs:
			return fmt.Sprintf("no delete was dropped, yet outputs hold %d records, fewer than one input's %d", a.docs, r.maxDocs)
		case r.docs > 0 && (a.minKey != r.minKey || a.maxKey != r.maxKey):
			return fmt.Sprintf("no delete was dropped, yet outputs span keys [%s, %s], not the inputs' [%s, %s]", a.minKey, a.maxKey, r.minKey, r.maxKey)
		}
	}
	return ""
}

// span sums and bounds a set of entries (ranges over those holding records).
type span struct {
	docs, dels, maxDocs int64
	minKey, maxKey      string
	minSeq, maxSeq      uint64
	minTs, maxTs        int64
}

func spanOf(objs []ObjectEntry) span {
	var s span
	first := true
	for _, o := range objs {
		s.docs += o.DocCount
		s.dels += o.DeleteCount
		s.maxDocs = max(s.maxDocs, o.DocCount)
		if o.DocCount == 0 {
			continue
		}
		if first {
			s.minKey, s.maxKey, s.minSeq, s.maxSeq, s.minTs, s.maxTs = o.MinRecordKey, o.MaxRecordKey, o.MinSeq, o.MaxSeq, o.MinTsUnixMs, o.MaxTsUnixMs
			first = false
			continue
		}
		s.minKey, s.maxKey = min(s.minKey, o.MinRecordKey), max(s.maxKey, o.MaxRecordKey)
		s.minSeq, s.maxSeq = min(s.minSeq, o.MinSeq), max(s.maxSeq, o.MaxSeq)
		s.minTs, s.maxTs = min(s.minTs, o.MinTsUnixMs), max(s.maxTs, o.MaxTsUnixMs)
	}
	return s
}
