// Package sim is the coordinator's deterministic fault simulation, in the
// style of SlateDB's deterministic simulation and TigerBeetle's VOPR: one
// seed drives one PCG stream that decides every step of a schedule over the
// SHIPPED code — the Lambda handlers (shared/lambda/handler), the use cases
// (observe, compact, lease, handoff, gc) and the AWS adapters
// (shared/adapters/awsio: Bucket, ObservedTable, LeaseTable, FIFOQueues) —
// over in-memory AWS with AWS's semantics (shared/testkit/memaws: one store
// per service, DynamoDB conditions evaluated by minidyn), and the owners'
// stand-ins (the stand-in publisher, an in-memory CCS and watermark), with
// faults injected at every AWS call and invariants checked after every
// step. Any failure replays from its seed.
//
// The simulator is the platform: it delivers head notifications to the
// observer handler as S3 events, runs reconciliation as the scheduled
// event, and is each queue's event source mapping (receive a batch of the
// queue's batch size, invoke the consumer's handler, delete what it did not
// report failed). Functions are wired from the simulated policy (Policy)
// as the functions wire themselves; only the compaction executor's lease
// port is wrapped, to check the lease contract from outside.
//
// Faults: crashes before and after every AWS call (the invocation dies; its
// batch stays in flight until the visibility timeout), throttling, writes
// refused with a timeout or a 500, writes applied whose answer is lost (a
// timeout, a 500, or the SDK's retry answering instead: a conditional
// write then fails on the caller's own first attempt), cutover transport
// timeouts and a publisher that queues cutovers and applies them late,
// lost, duplicated, delayed and reordered head notifications, duplicated
// and redelivered queue messages, DLQ redrive, lease expiry and takeover in
// the middle of a task, concurrent appends (publisher CAS conflicts) in the
// middle of a task, wipes of the coordinator's state, a stalled, regressed,
// corrupt or missing watermark, readers holding versions, other writers'
// uploads, clock skew between functions (bounded by the policy's
// ClockSkew), CCS facts changes and tombstones (also while a completion
// waits for the handoff), tombstones replaced by newer ones, released names re-created as their
// next incarnation (with the old lifetime's tasks delivered again late), and outages of
// the publisher for one collection while handoff batches mix collections;
// every fourth seed also ends with a level 0 split across storage tiers
// (tierSplit: due by the observer's summary, nothing for any (tier, level)
// to plan), which the faulty phase reaches only rarely (invariant
// idle-reenqueue, guard debt_agreement).
//
// Invariants: pinned-delete (a), stale-cutover / delete-gain (b), readable
// (c), release-dependencies (d), converged (e), foreign-delete, plus
// lease-exclusive (the lease contract, observed on the table's writes and
// on what a worker is told it holds), debt-indexed (outstanding debt
// stays findable from the head: no leaked committed object) and
// stale-facts (no cutover is submitted, and no release intent recorded,
// under CCS facts its task kind depends on other than those it was planned
// under; judged by the sim's own reading of the dependencies), own-write
// (a worker is never told its own applied acquire is another holder's),
// lost-enqueue (a duplicate observation of a head with compaction due
// leaves a task for it queued or leased), isolation (during one
// collection's owner outage no other collection's record of a handoff
// batch fails), transition-nothing (no lifecycle transition is
// scheduled for a head with nothing to move), incarnation-fence (a
// released name is re-created as its next incarnation while tasks of the
// old lifetime are still queued or delivered again late: nothing running
// only tasks of an old incarnation deletes the head or a committed object
// of the current one), head-owner (a head is deleted only inside the
// Manifest Publisher's retirement, which the tombstone cleanup requests;
// no function deletes one), exactly one release intent per incarnation
// (release-dependencies) and lineage-incarnation (re-created lifetimes are
// restored and confirmed too, and confirmations of a dropped lifetime are
// recorded late: GC judges a head only by a confirmation the operator
// recorded for that head's incarnation), and class-slots (the fleet-wide
// class concurrency slots: never more live holders than the class's limit,
// and none but crashed invocations' before their lease end: an applied
// acquire whose answer was lost is neither leaked nor taken twice; the sim
// policy gives every class one slot, so a crashed holder defers its class's
// other tasks, which still run: converged), and false-refusal (GC refuses a
// collection as a head regression, which pages an operator, only when
// its head went back in that lifetime: a head that moved forward while a
// sweep read it is no regression; caught at seeds 228 and 553 of 1,000
// when the sweep judged the evidence against the head it walked first),
// and release-liveness (every dropped incarnation whose release
// dependencies hold — a namespace CCS dropped with no child collection,
// fault namespace-dropped-empty — is released within releaseBound
// reconciliations of the quiescent phase). Every fifth seed's CCS catalog
// also lists a name the contract rejects (bad-catalog-name): it must fail
// only itself (converged). In the quiescent phase every fourth seed writes
// one collection during every GC sweep of it (commit-during-sweep;
// gc-debt-bounded: its recorded GC debt is never due for longer than
// three rounds), and every tenth restores one collection over 200 to
// 1,000 versions (restore-large; regression-resumed: once the operator
// confirmed, GC no longer refuses it two rounds later, while that lifetime
// lives: a drop hands it to the tombstone cleanup). Every third
// seed's quiescent phase dead-letters the first cleanup completion of each
// dropped incarnation after its cursor closed (completion-dead-lettered;
// release-liveness: released within releaseBound reconciliations all the
// same, derived again from CCS's facts).
//
// GC runs paced as a seed's budget plan says (budgets.go): rates down to
// the legal minimum (budgets.s3_writes_per_sec_per_prefix 50, deletes per
// second 1 and 2), the fleet's token buckets in the simulated DynamoDB,
// and slow grants (a take that answers after up to 1.5 x the proof bound);
// every wait lets the world move on. Dropped collections often carry a
// lifecycle retention longer than the token lifetime, and invariant
// lifecycle-retention holds every deleted committed object, live or
// dropped, to its retention by its maximum timestamp (guards fresh_proof
// and dropped_retention).
//
// Checks read the in-memory stores directly, never through a faulted call.
package sim
