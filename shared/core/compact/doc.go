// Package compact decides which committed objects of a collection are worth
// rewriting, and how. It plans; it never reads or writes objects, queues or
// leases (status, plans and dry runs change nothing).
//
// # Vocabulary
//
//   - level: an object's place in the tiered policy. Appends commit level-0
//     objects; a fan-out merge moves the oldest objects of a level one level
//     up; the top level (Policy.MaxLevel) only absorbs.
//   - tier: the lifecycle data tier (hot, warm, cold). Jobs never mix tiers:
//     moving data between tiers is lifecycle transition, not compaction.
//   - fan-out debt: too many objects in a level (reads consult each one). At
//     the top level only objects stacked over one key count, because objects
//     there never move up and disjoint full-size objects are the goal.
//   - delete density: delete_count / doc_count of an object: space and read
//     work spent on keys that no longer exist.
//   - fragmentation: many objects much smaller than the target size above
//     level 0, where fan-out no longer gathers them.
//   - debt: a job's score, the ratio of its measure to its trigger (>= 1
//     when due); jobs run highest debt first.
//
// # Invariants
//
//   - Plan is a pure function of (snapshot, policy, now): same facts, same
//     jobs, in the same order, whatever the order of the snapshot's objects.
//     A coordinator that lost all its state re-plans the same work from the
//     committed manifest, and task identities derived from a job collapse.
//   - Every rule converges: fan-out moves objects up or leaves disjoint
//     outputs, fragmentation merges two or more objects smaller than
//     half the target into fewer, and a delete-density job is only planned
//     when it can drop its delete markers. No rule re-plans its own output
//     forever.
//   - DropDeletes is true only when every object outside the job whose record
//     key range overlaps the job's is strictly newer (min_seq greater than the
//     job's max_seq). Then no older version of a deleted key survives outside
//     the job, so dropping the marker cannot resurrect data. Newer objects may
//     hold the key: their version wins anyway. This stays true while other
//     planned jobs run, because their inputs are disjoint from this job's and
//     their outputs only hold versions their inputs held, and appends only add
//     newer seqs.
//   - Jobs are bounded (MaxJobInputs, MaxJobBytes) so a busy collection makes
//     progress in steps a worker can finish within its lease, and at most one
//     job per (tier, output level) is planned per call, with no shared inputs,
//     so concurrent jobs of one collection never rewrite the same object.
//   - With the publisher's conflict check (ExecConfig.ConflictChecked) a
//     result whose base the head moved past once the work started is still
//     reported, pinned to its base: the publisher decides at its CAS. A
//     reported rewrite holds its collection's queue group until its cutover
//     is in the lineage, at most ExecConfig.ResultWait (landed.go), so the
//     next rewrite does not merge the same inputs meanwhile.
//   - A coalesced rewrite may wait for a still head before it is taken
//     (StartRule; an option, the defence against waste when the publisher
//     has no conflict check): a rewrite overtaken by a commit is then
//     dropped (SYSTEM rule 2, never rebased), so one started while the
//     writer commits is likely wasted. The wait only delays: it is bounded (start_max_wait_ms, then
//     the start right after the next commit, at the latest
//     start_max_wait_ms + start_quiet_ms), it keeps the task (returned to
//     its queue by visibility or waited in process), and the heads
//     committed meanwhile coalesce into it; the task stays pinned to the
//     head it takes and fenced as any.
//   - Debt works from the manifest root's Summary alone, so the observer can
//     score a collection without reading its parts; it approximates Plan.
//     The summary counts a level across tiers and averages its delete
//     density, while Plan groups per (tier, level) and judges each object:
//     a level of 2 hot + 2 warm objects at merge factor 4 is due by the
//     summary with nothing to plan, and one dense object can hide in its
//     level's average. Debt and execution agree through one rule, in two
//     steps: (1) the executor never answers "nothing" from a partial
//     snapshot: when the levels Debt names plan nothing it plans the full
//     object set (planStaged), so its answer is Plan's answer for the
//     head; (2) an empty full plan is recorded against the head
//     (Rewrites.RecordCompactionIdle), and compaction is owed only while
//     the debt is due and the head is not recorded idle
//     (observe.Observed.CompactionOwed): reconciliation enqueues no task,
//     and signals no due compaction, for a head a worker found nothing in.
//     A new head is judged afresh. The summary never misses fan-out below
//     the top level (a (tier, level) group at the merge factor makes its
//     level reach it); what it cannot see (a dense object in a level that
//     is not due) waits for the next head that makes the level due. The
//     idle record names the head and the planning policy's fingerprint
//     (policy.Compaction.Fingerprint): after a policy change the head is
//     owed and planned again. Guard debt_agreement (its mutation:
//     due levels only, no record) is caught by the simulation's
//     idle-reenqueue invariant.
//   - A rewrite output is written only where no object is; a retry that
//     finds its task's own identical bytes there (a crashed attempt's)
//     keeps them (Executor.ours, rule 13) and reports as its start the
//     earlier of its own start and the earliest LastModified of the
//     outputs it kept (guard cutover_from_written): GC's never-committed
//     reclaim counts from that write, so the cutover's not_after must too.
//     The handoff dates the outputs itself as well and does not rely on
//     this report.
package compact
