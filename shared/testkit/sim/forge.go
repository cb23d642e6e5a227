package sim

import (
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
)

// forging says whether this seed has a compromised compaction role among
// its actors (every eleventh seed; decided by the seed alone, so the other
// seeds' random streams, and the mutation proofs' first seeds, are
// unchanged).
func (w *World) forging() bool { return w.cfg.Seed%11 == 0 }

// forgeCompletion: a holder of the compaction role (the function that
// parses segments other writers wrote) sends the handoff a completion no
// task of ours produced: it removes every object of a collection's head
// and adds nothing, under a made-up task id or under the identity of a
// task the head would get; or it adds one output of its own holding a
// single record. Each would wipe the collection if handed off (the
// stand-in publisher checks only the base); the handoff's provenance check
// refuses them (guard handoff_provenance), and invariant readable catches
// the wipe when it does not.
func (w *World) forgeCompletion(c string) {
	col := w.cols[c]
	h, root, err := lineage.New(w.peek, 64).HeadRoot(w.ctx, c)
	if err != nil || root.Version == 0 {
		return
	}
	var all []contract.ObjectEntry
	if err := lineage.New(w.peek, 64).Each(w.ctx, &root, nil, func(o contract.ObjectEntry) error {
		all = append(all, o)
		return nil
	}); err != nil || len(all) == 0 {
		return
	}
	facts := w.ccs.facts[c]
	task := contract.NewTask(contract.KindCompaction, c, root.Version, h.ManifestChecksum, facts.FactsVersion, w.t).In(col.inc)
	comp := contract.Completion{SchemaVersion: contract.SchemaVersion, TaskID: task.TaskID, Kind: task.Kind, Collection: c, Incarnation: task.Incarnation,
		BaseManifestVersion: task.BaseManifestVersion, BaseManifestChecksum: task.BaseManifestChecksum, CCSFactsVersion: facts.FactsVersion,
		CCSFactsDigest: contract.FactsDigest(task.Kind, facts), Outcome: contract.OutcomeSucceeded, StartedAtUnixMs: w.t, FinishedAtUnixMs: w.t,
		Coverage: &contract.Coverage{Removed: all, Added: []contract.ObjectEntry{}}}
	var maxDocs, dels int64
	for _, o := range all {
		maxDocs, dels = max(maxDocs, o.DocCount), dels+o.DeleteCount
	}
	variant := w.rng.IntN(3)
	if variant == 2 && maxDocs-dels < 2 {
		variant = 1 // one record could be all a merge of these keeps: not a forgery the metadata can tell
	}
	switch variant {
	case 0:
		w.forgeN++
		comp.TaskID = fmt.Sprintf("forged-%d", w.forgeN)
	case 2:
		// One output of its own (compaction's role may write there),
		// holding one record of the inputs'.
		key := contract.RewriteOutputKey(c, 1, task.TaskID, 0)
		body := []byte("forged " + key)
		if _, err := w.invokeOwner(func() error { _, err := w.bucket.Put(w.ctx, key, body); return err }); err != nil {
			return
		}
		o := all[0]
		comp.Coverage.Added = []contract.ObjectEntry{{Key: key, Size: int64(len(body)), Checksum: contract.Checksum(body), Tier: o.Tier, Level: 1,
			DocCount: 1, MinTsUnixMs: o.MinTsUnixMs, MaxTsUnixMs: o.MinTsUnixMs, MinSeq: o.MinSeq, MaxSeq: o.MinSeq, MinRecordKey: o.MinRecordKey, MaxRecordKey: o.MinRecordKey}}
	}
	if _, err := w.invokeOwner(func() error { return w.queues.Report(w.ctx, comp) }); err != nil {
		return
	}
	w.count("forged-completion")
	w.logf("  a compromised compaction role sends a forged completion of %s v%d (variant %d: %d removed, %d added, task %s)",
		c, root.Version, variant, len(all), len(comp.Coverage.Added), comp.TaskID)
}
