// Package observe is the observer use case: it turns "a head object was
// written" into the collection's observed state, its background debt and
// fenced tasks.
//
// Invariants:
//   - The event is only a hint. The observer re-reads the head, verifies the
//     manifest root against the head's checksum and decodes both strictly; a
//     malformed or unverifiable head or root produces an error and no task.
//   - Observed state only moves forward: Advance is a conditional write that
//     refuses an older or equal version, so reordered notifications change
//     nothing. A refusal whose old image is exactly what this observation
//     wrote (version, checksum, observation time) is our own applied
//     advance retried by the SDK: it is an advance (SYSTEM rule 13).
//   - A duplicate observation (the recorded state already holds this head)
//     re-derives the tasks the recording observation derived, with the
//     same identities, and enqueues them again: when the state was written
//     but the enqueue was lost, nothing else would schedule them soon, and
//     when it was not lost FIFO deduplication and the task leases absorb
//     the copies. Reconciliation suppresses no due work on the belief that
//     the observer enqueued it unless that re-enqueue just happened.
//   - All state written here is disposable. Losing it makes the next
//     observation treat the head as new (tasks are idempotent by identity and
//     revalidated by workers) and periodic reconciliation re-derives debt
//     from the committed lineage.
//   - Per committed head the observer makes at most four AWS calls: read the
//     head, read the root, advance the state (one conditional UpdateItem that
//     also returns the previous state), and one SendMessageBatch (a
//     duplicate makes the same four). It works
//     from the root's change and summary only, never from the full object
//     set, so its cost grows with the change, not with the collection.
//     GC debt is recorded, not enqueued: nothing removed by a commit can be
//     deleted before the token lifetime and retention window pass, so GC is
//     scheduled by reconciliation when the debt is due. A lifecycle
//     retention window the last sweep recorded is the retention_reclaim
//     class: reconciliation enqueues its task (with the due time) once due,
//     never before, and one gc-queue sweep per pass covers both classes.
//   - At most one rewrite task is pending per collection: the advance
//     counts a head's claim and returns the old counts, so a head that
//     finds a claim pending enqueues no second rewrite; the worker records
//     its take and plans against the head it finds. Counters, not flags:
//     nothing is ever removed, and a lost task costs one reconciliation
//     interval (reconciliation does not look at the claims).
//   - Reconciliation is per collection: a scheduled pass only splits the
//     catalog into requests (ScheduleReconcile, FanOut: one SendMessageBatch
//     per step), and each collection is reconciled by its own request
//     (ReconcileOne), so no invocation's work grows with the fleet and one
//     slow or broken collection delays nobody else. What reconciliation
//     enqueues is PlanReconcile, a pure function of the observation, the
//     recorded state, the configuration and now (dry runs plan the same).
package observe
