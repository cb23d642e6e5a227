package observe

import (
	"context"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
)

// Catalog lists the collections CCS knows (the authority for what exists).
type Catalog interface {
	Collections(ctx context.Context) ([]string, error)
}

// ReconcileReport summarises one reconciliation pass.
type ReconcileReport struct {
	Collections int                       `json:"collections"`
	Advanced    int                       `json:"advanced"`
	Enqueued    map[contract.TaskKind]int `json:"enqueued"`
	Failed      map[string]string         `json:"failed,omitempty"` // collection -> reason
}

// Reconcile re-derives every collection's schedulable state from its
// committed head (the durable truth), as after a coordinator restart or a
// wiped table: it observes each head, re-enqueues compaction that is still
// due or a lifecycle tier transition that became due (task identities
// collapse duplicates) and enqueues a GC sweep when GC
// debt is due, unknown, or not swept for GCSweepInterval. One collection's
// failure does not stop the others.
func (o *Observer) Reconcile(ctx context.Context, catalog Catalog) (ReconcileReport, error) {
	rep := ReconcileReport{Enqueued: map[contract.TaskKind]int{}, Failed: map[string]string{}}
	cols, err := catalog.Collections(ctx)
	if err != nil {
		return rep, fmt.Errorf("list collections: %w", err)
	}
	for _, c := range cols {
		rep.Collections++
		tasks, advanced, err := o.reconcileOne(ctx, c)
		if err != nil {
			rep.Failed[c] = err.Error()
			o.log.Warn("reconcile collection failed", "collection", c, "err", err)
			continue
		}
		if advanced {
			rep.Advanced++
		}
		for _, t := range tasks {
			rep.Enqueued[t.Kind]++
		}
	}
	return rep, nil
}

func (o *Observer) reconcileOne(ctx context.Context, collection string) ([]contract.Task, bool, error) {
	res, err := o.Observe(ctx, collection)
	if err != nil {
		return nil, false, err
	}
	cur, err := o.state.Get(ctx, collection)
	if err != nil {
		return nil, false, fmt.Errorf("read observed state of %s: %w", collection, err)
	}
	if cur.Version == 0 {
		// The state was wiped after the observation: there is nothing to
		// derive tasks from (a task needs a base version); the next pass
		// re-derives them from the head.
		return res.Tasks, res.Outcome == OutcomeAdvanced, nil
	}
	nowMs := o.now().UnixMilli()
	var tasks []contract.Task
	// The facts just read are fresher than the recorded state's: a
	// tombstone set by CCS without a new head is only seen here.
	tomb := cur.Debt.TombstoneActive || res.Debt.TombstoneActive
	if res.Outcome != OutcomeAdvanced && res.Debt.TombstoneActive && res.Version == cur.Version {
		tasks = append(tasks, contract.NewTask(contract.KindTombstoneCleanup, collection, cur.Version, cur.Checksum, res.FactsVersion, nowMs))
	}
	// A lifecycle transition becomes due with time alone, without a new
	// head: res.Debt is judged now from the head's root and fresh facts.
	// The observer enqueued one for this head if it was already due when
	// observed under the same facts; otherwise (or a whole sweep interval
	// later, when that task's result did not land) enqueue one here. Its
	// identity carries the sweep minute. A due transition takes precedence
	// over compaction (see Observer.tasks).
	stale := nowMs-cur.ObservedAtUnixMs >= o.cfg.GCSweepInterval.Milliseconds()
	transition := false
	if res.Outcome != OutcomeAdvanced && res.Debt.TransitionDue && res.Version == cur.Version && !tomb {
		byObserver := cur.FactsVersion == res.FactsVersion && res.Debt.TransitionDueAtUnixMs <= contract.SweepMinute(cur.ObservedAtUnixMs)
		transition = true
		if !byObserver || stale {
			tasks = append(tasks, contract.NewSweepTask(contract.KindLifecycleTransition, collection, cur.Version, cur.Checksum, res.FactsVersion, nowMs))
		}
	}
	if res.Outcome != OutcomeAdvanced && cur.Debt.CompactionDue && !tomb && !transition {
		t := contract.NewTask(contract.KindCompaction, collection, cur.Version, cur.Checksum, res.FactsVersion, nowMs)
		if stale {
			// Still due a whole sweep interval after this head was
			// observed: its task finished (the lease is done) without the
			// result landing (dropped as expired, rejected, lost to the
			// DLQ), and the same identity would be skipped forever. Retry
			// under a fresh identity (racing reconciliations within one
			// minute still collapse).
			t = contract.NewSweepTask(contract.KindCompaction, collection, cur.Version, cur.Checksum, res.FactsVersion, nowMs)
		}
		tasks = append(tasks, t)
	}
	gcDue := res.Outcome == OutcomeAdvanced && res.Previous == 0 ||
		cur.Debt.GCObjects > 0 && cur.Debt.GCDueAtUnixMs <= nowMs ||
		nowMs-cur.Debt.GCSweptAtUnixMs >= o.cfg.GCSweepInterval.Milliseconds()
	if gcDue && !tomb {
		tasks = append(tasks, contract.NewSweepTask(contract.KindGC, collection, cur.Version, cur.Checksum, res.FactsVersion, nowMs))
	}
	if len(tasks) > 0 {
		if err := o.queue.Enqueue(ctx, tasks); err != nil {
			return nil, false, fmt.Errorf("enqueue reconcile tasks for %s: %w", collection, err)
		}
	}
	return append(res.Tasks, tasks...), res.Outcome == OutcomeAdvanced, nil
}
