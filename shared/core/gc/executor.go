package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/metrics"
)

// ErrUnconfirmed: some deletes were not confirmed after every attempt; the
// task fails so that its message is retried.
var ErrUnconfirmed = errors.New("deletes not confirmed")

// Report is what one sweep did.
type Report struct {
	Collection       string            `json:"collection"`
	Tombstoned       bool              `json:"tombstoned"`
	Blocked          string            `json:"blocked,omitempty"`
	Refused          string            `json:"refused,omitempty"`
	ObjectsDeleted   int               `json:"objects_deleted"`
	OrphansDeleted   int               `json:"orphans_deleted"`
	PartsDeleted     int               `json:"parts_deleted"`
	ManifestsDeleted int               `json:"manifests_deleted"`
	Deleted          []string          `json:"deleted"`
	DeleteCalls      int               `json:"delete_calls"`
	KeysSent         int               `json:"keys_sent"`
	Retries          int               `json:"retries"`
	Unconfirmed      map[string]string `json:"unconfirmed,omitempty"`
	DeferredByReason map[string]int    `json:"deferred_by_reason"`
	TrimStoppedAt    uint64            `json:"trim_stopped_at,omitempty"` // version whose objects are not all confirmed gone
	RemainingObjects int64             `json:"remaining_objects"`
	RemainingBytes   int64             `json:"remaining_bytes"`
	NextDueUnixMs    int64             `json:"next_due_unix_ms,omitempty"`
	Complete         bool              `json:"complete"` // every cleanup dependency confirmed (tombstone)
}

// Executor sweeps collections: Plan, then Apply with execution-time checks.
type Executor struct {
	ports   Ports
	cfg     Config
	lin     *lineage.Reader
	pacer   *Pacer
	now     func() time.Time
	sleep   Sleeper
	metrics *metrics.Recorder
	log     *slog.Logger
}

// New wires an executor. pacer may be nil (unpaced); sleep is used for
// retry backoff.
func New(ports Ports, cfg Config, pacer *Pacer, now func() time.Time, sleep Sleeper, m *metrics.Recorder, log *slog.Logger) *Executor {
	cfg = cfg.withDefaults()
	if sleep == nil {
		sleep = SleepContext
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Executor{ports: ports, cfg: cfg, lin: lineage.New(ports.Objects, cfg.PartCache), pacer: pacer, now: now, sleep: sleep, metrics: m, log: log}
}

// Plan computes what a sweep of collection would do now, reading only.
func (e *Executor) Plan(ctx context.Context, collection string) (Plan, error) {
	return planner{ports: e.ports.ReadPorts, cfg: e.cfg, lin: e.lin}.plan(ctx, collection, e.now())
}

// Run sweeps the collection a task names: plan, apply, record the sweep and,
// for tombstone cleanup, report the completion to the handoff.
func (e *Executor) Run(ctx context.Context, task contract.Task) (Report, error) {
	started := e.now()
	c := task.Collection
	rep := Report{Collection: c, DeferredByReason: map[string]int{}}
	pl, err := e.Plan(ctx, c)
	if err != nil {
		var re *RefusedError
		if errors.As(err, &re) {
			rep.Refused = re.Reason
			e.metrics.AddDim("GCRefused", "Reason", re.Reason, 1)
			e.log.Error("gc refused: nothing deleted", "collection", c, "task", task.TaskID, "reason", re.Reason, "err", err)
			return rep, nil // a definite refusal is the answer; reconciliation asks again
		}
		return rep, err
	}
	rep, err = e.Apply(ctx, pl)
	for reason, n := range rep.DeferredByReason {
		e.metrics.AddDim("GCDeferred", "Reason", reason, float64(n))
	}
	e.metrics.Add("ObjectsDeleted", float64(rep.ObjectsDeleted+rep.OrphansDeleted))
	e.metrics.Add("ManifestsDeleted", float64(rep.ManifestsDeleted))
	e.metrics.Add("ManifestPartsDeleted", float64(rep.PartsDeleted))
	e.metrics.Add("GCDeleteRetries", float64(rep.Retries))
	e.metrics.Add("GCUnconfirmedDeletes", float64(len(rep.Unconfirmed)))
	if rep.Refused != "" {
		e.metrics.AddDim("GCRefused", "Reason", rep.Refused, 1)
	}
	if rerr := e.recordSweep(ctx, rep); rerr != nil {
		e.log.Warn("record gc sweep failed (disposable state)", "collection", c, "err", rerr)
	}
	e.log.Info("gc sweep", "collection", c, "task", task.TaskID, "objects_deleted", rep.ObjectsDeleted, "orphans_deleted", rep.OrphansDeleted,
		"manifests_deleted", rep.ManifestsDeleted, "deferred", rep.DeferredByReason, "unconfirmed", len(rep.Unconfirmed), "blocked", rep.Blocked)
	if err != nil {
		return rep, err
	}
	if task.Kind == contract.KindTombstoneCleanup && e.ports.Completions != nil {
		if err := e.complete(ctx, task, pl, rep, started); err != nil {
			return rep, err
		}
	}
	if len(rep.Unconfirmed) > 0 {
		return rep, fmt.Errorf("gc of %s: %d keys: %w", c, len(rep.Unconfirmed), ErrUnconfirmed)
	}
	return rep, nil
}

func (e *Executor) recordSweep(ctx context.Context, rep Report) error {
	if e.ports.Sweeps == nil || rep.Refused != "" {
		return nil
	}
	return e.ports.Sweeps.RecordGCSweep(ctx, rep.Collection, rep.RemainingObjects, rep.RemainingBytes, rep.NextDueUnixMs, e.now().UnixMilli())
}

// maxReportedKeys bounds the keys a completion lists (an SQS message is at
// most 256 KiB); counts are complete.
const maxReportedKeys = 1000

func (e *Executor) complete(ctx context.Context, task contract.Task, pl Plan, rep Report, started time.Time) error {
	outcome, reason := contract.OutcomeSucceeded, ""
	complete := rep.Complete
	switch {
	case !pl.Tombstoned:
		outcome, reason, complete = contract.OutcomeStale, "collection is not tombstoned in the current CCS facts", false
	case pl.FactsVersion != task.CCSFactsVersion:
		outcome, reason, complete = contract.OutcomeStale, fmt.Sprintf("CCS facts moved from v%d to v%d", task.CCSFactsVersion, pl.FactsVersion), false
	case complete:
		reason = "remaining publisher-owned dependencies: " + fmt.Sprint(pl.Remaining)
	default:
		reason = fmt.Sprintf("cleanup incomplete: deferred %v", rep.DeferredByReason)
	}
	deleted := rep.Deleted
	if len(deleted) > maxReportedKeys {
		deleted = deleted[:maxReportedKeys]
	}
	comp := contract.Completion{
		SchemaVersion: contract.SchemaVersion, TaskID: task.TaskID, Kind: task.Kind, Collection: task.Collection,
		BaseManifestVersion: task.BaseManifestVersion, BaseManifestChecksum: task.BaseManifestChecksum,
		CCSFactsVersion: pl.FactsVersion, Outcome: outcome, Reason: reason,
		StartedAtUnixMs: started.UnixMilli(), FinishedAtUnixMs: e.now().UnixMilli(),
		Cleanup: &contract.Cleanup{Deleted: nonNilKeys(deleted), DeferredByReason: rep.DeferredByReason, Complete: complete},
	}
	// The identity distinguishes a complete report from a partial one, so a
	// partial report never suppresses (as a duplicate) the complete one.
	dedup := task.TaskID + ".partial"
	if complete {
		dedup = task.TaskID + ".done"
	}
	if err := e.ports.Completions.Complete(ctx, comp, dedup); err != nil {
		return fmt.Errorf("report tombstone cleanup of %s: %w", task.Collection, err)
	}
	return nil
}

func nonNilKeys(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Apply executes a plan. Every decision is re-checked at execution time:
// the watermark and CCS facts are re-read, and before each delete call the
// head is re-read; any root committed since the plan is treated as retained
// and every key of the batch is looked up in it. The plan is a proposal, the
// checks at the moment of deletion are the authority.
func (e *Executor) Apply(ctx context.Context, pl Plan) (Report, error) {
	cfg := e.cfg
	c := pl.Collection
	rep := Report{Collection: c, Tombstoned: pl.Tombstoned, Blocked: pl.Blocked, DeferredByReason: maps.Clone(pl.DeferredByReason), Deleted: []string{}}
	if rep.DeferredByReason == nil {
		rep.DeferredByReason = map[string]int{}
	}
	deferredBytes := map[string]int64{}
	nextDue := pl.NextDueUnixMs()
	for _, d := range pl.Deferred {
		deferredBytes[d.Key] = d.Bytes
	}
	finish := func() {
		rep.RemainingObjects = int64(len(deferredBytes))
		for _, b := range deferredBytes {
			rep.RemainingBytes += b
		}
		rep.RemainingObjects += int64(len(rep.Unconfirmed)) + int64(pl.OrphansYoung)
		rep.NextDueUnixMs = nextDue
		if len(rep.Unconfirmed) > 0 && (nextDue == 0 || nextDue > e.now().UnixMilli()) {
			rep.NextDueUnixMs = e.now().UnixMilli()
		}
	}
	if pl.Blocked != "" {
		finish()
		return rep, nil
	}
	gates := cfg.Guards.DeleteGates
	now := e.now().UnixMilli()
	deferAt := func(cd Candidate, reason string, due int64) {
		rep.DeferredByReason[reason]++
		deferredBytes[cd.Entry.Key] = cd.Entry.Size
		if nextDue == 0 || due < nextDue {
			nextDue = due
		}
	}

	todo := pl.Delete
	if gates {
		// Fresh watermark and facts: the time gates are judged again now.
		safe := int64(0)
		wm, err := e.ports.Watermark.Watermark(ctx)
		blocked := err != nil
		if blocked {
			rep.Blocked = "watermark unreadable at execution: " + err.Error()
		} else {
			safe = wm.GlobalSafeTsUnixMs
		}
		facts, err := e.ports.Facts.Facts(ctx, c)
		if err != nil {
			rep.Refused = RefusedFacts
			finish()
			return rep, nil
		}
		if facts.Tombstoned != pl.Tombstoned || (pl.Tombstoned && facts.ReservationHorizonUnixMs != pl.TombstoneEvictTs) {
			rep.Refused = RefusedFacts
			rep.Blocked = "CCS facts changed since the plan; a new plan is needed"
			finish()
			return rep, nil
		}
		todo = nil
		for _, cd := range pl.Delete {
			if reason, due, _ := judgeTime(cfg, blocked, cd, safe, facts.Lifecycle.RetentionMs, now); reason != "" {
				deferAt(cd, reason, due)
				continue
			}
			todo = append(todo, cd)
		}
		if blocked {
			finish()
			return rep, nil
		}
	}

	f := &fence{lin: e.lin, c: c, version: pl.HeadVersion, checksum: pl.HeadChecksum}
	confirmed := map[string]bool{}
	if !cfg.Guards.ManifestBeforeObjects {
		// Mutation proof only: manifests first, objects after.
		if err := e.trim(ctx, &rep, pl, f, confirmed, false); err != nil {
			finish()
			return rep, err
		}
	}

	// Objects, in calls of up to BatchSize keys.
	for start := 0; start < len(todo); start += cfg.BatchSize {
		batch := todo[start:min(start+cfg.BatchSize, len(todo))]
		var keys []string
		if gates {
			if err := f.refresh(ctx); err != nil {
				finish()
				return rep, err
			}
		}
		for _, cd := range batch {
			if gates {
				ref, err := f.referenced(ctx, cd.Entry.Key)
				if err != nil {
					finish()
					return rep, lineageErr(c, err)
				}
				if ref {
					// Re-referenced by a commit since the plan.
					deferAt(cd, ReasonPinned, satAdd(now, cfg.TokenLifetime))
					continue
				}
			}
			keys = append(keys, cd.Entry.Key)
		}
		ok, err := e.deleteKeys(ctx, &rep, c, keys)
		for _, k := range ok {
			confirmed[k] = true
		}
		rep.ObjectsDeleted += len(ok)
		if err != nil {
			finish()
			return rep, err
		}
	}

	// Never-committed outputs.
	if len(pl.Orphans) > 0 {
		if err := f.refresh(ctx); err != nil {
			finish()
			return rep, err
		}
		var keys []string
		for _, o := range pl.Orphans {
			ref, err := f.referenced(ctx, o.Key)
			if err != nil {
				finish()
				return rep, lineageErr(c, err)
			}
			if !ref {
				keys = append(keys, o.Key)
			}
		}
		for start := 0; start < len(keys); start += cfg.BatchSize {
			ok, err := e.deleteKeys(ctx, &rep, c, keys[start:min(start+cfg.BatchSize, len(keys))])
			rep.OrphansDeleted += len(ok)
			if err != nil {
				finish()
				return rep, err
			}
		}
	}

	if cfg.Guards.ManifestBeforeObjects {
		if err := e.trim(ctx, &rep, pl, f, confirmed, true); err != nil {
			finish()
			return rep, err
		}
	}
	finish()
	if pl.Tombstoned {
		rep.Complete = len(deferredBytes) == 0 && len(rep.Unconfirmed) == 0 && pl.OrphansYoung == 0 && pl.ListingError == "" &&
			rep.ManifestsDeleted == pl.Roots-1 && len(f.extra) == 0
		if !cfg.Guards.ReleaseDependencies {
			rep.Complete = true // mutation proof only
		}
	}
	return rep, nil
}

// trim deletes roots oldest first: for each, the parts no newer root
// references, then the root. It stops at the first root whose objects are
// not all confirmed gone (when checkObjects) or whose deletes fail.
func (e *Executor) trim(ctx context.Context, rep *Report, pl Plan, f *fence, confirmed map[string]bool, checkObjects bool) error {
	for _, st := range pl.Trim {
		if checkObjects {
			for _, k := range st.NeedsGone {
				if !confirmed[k] {
					rep.TrimStoppedAt = st.Version
					return nil
				}
			}
		}
		// A root committed since the plan may reuse a content-addressed part.
		if err := f.refresh(ctx); err != nil {
			return err
		}
		var parts []string
		for _, k := range st.Parts {
			if !f.partReferenced(k) {
				parts = append(parts, k)
			}
		}
		for start := 0; start < len(parts); start += e.cfg.BatchSize {
			ok, err := e.deleteKeys(ctx, rep, pl.Collection, parts[start:min(start+e.cfg.BatchSize, len(parts))])
			rep.PartsDeleted += len(ok)
			if err != nil || len(rep.Unconfirmed) > 0 {
				rep.TrimStoppedAt = st.Version
				return err
			}
		}
		ok, err := e.deleteKeys(ctx, rep, pl.Collection, []string{st.RootKey})
		rep.ManifestsDeleted += len(ok)
		if err != nil || len(ok) == 0 {
			rep.TrimStoppedAt = st.Version
			return err
		}
	}
	return nil
}

// deleteKeys deletes keys (<= BatchSize) with paced calls, retrying keys
// that were not confirmed with exponential backoff. A key already gone is
// confirmed (S3 answers deleted; the adapter maps NoSuchKey to deleted).
// Keys still unconfirmed after MaxAttempts are recorded in rep.Unconfirmed;
// the error is non-nil only when the context ended.
func (e *Executor) deleteKeys(ctx context.Context, rep *Report, c string, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	pending := slices.Clone(keys)
	var done []string
	reasons := map[string]string{}
	for attempt := 1; len(pending) > 0 && attempt <= e.cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			rep.Retries++
			if err := e.sleep(ctx, e.cfg.RetryBackoff<<(attempt-2)); err != nil {
				return done, err
			}
		}
		if err := e.pacer.Wait(ctx, c, len(pending)); err != nil {
			return done, err
		}
		res, err := e.ports.Deleter.DeleteBatch(ctx, pending)
		rep.DeleteCalls++
		rep.KeysSent += len(pending)
		if err != nil {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			for _, k := range pending {
				reasons[k] = err.Error()
			}
			e.log.Warn("delete call failed; retrying", "collection", c, "keys", len(pending), "attempt", attempt, "err", err)
			continue
		}
		gone := map[string]bool{}
		for _, k := range res.Deleted {
			gone[k] = true
		}
		var next []string
		for _, k := range pending {
			switch {
			case gone[k]:
				done = append(done, k)
				delete(reasons, k)
			case res.Failed[k] != "":
				reasons[k] = res.Failed[k]
				next = append(next, k)
			default:
				reasons[k] = "not confirmed by the delete call"
				next = append(next, k)
			}
		}
		pending = next
	}
	rep.Deleted = append(rep.Deleted, done...)
	if len(pending) > 0 {
		if rep.Unconfirmed == nil {
			rep.Unconfirmed = map[string]string{}
		}
		for _, k := range pending {
			rep.Unconfirmed[k] = reasons[k]
		}
		e.log.Error("deletes not confirmed after retries", "collection", c, "keys", len(pending), "attempts", e.cfg.MaxAttempts)
	}
	return done, nil
}

// fence follows the head during Apply: roots committed after the plan are
// retained (a token may open them) and are checked for every key deleted.
type fence struct {
	lin      *lineage.Reader
	c        string
	version  uint64
	checksum string
	extra    []contract.Manifest
}

func (f *fence) refresh(ctx context.Context) error {
	h, err := f.lin.Head(ctx, f.c)
	if err != nil {
		return lineageErr(f.c, err)
	}
	if h.Version == f.version && h.ManifestChecksum == f.checksum {
		return nil
	}
	if h.Version <= f.version {
		return refuse(f.c, RefusedLineage, fmt.Errorf("head is v%d %s, the plan saw v%d %s", h.Version, h.ManifestChecksum, f.version, f.checksum))
	}
	w, err := f.lin.WalkFrom(ctx, f.c, f.version+1)
	if err != nil {
		return lineageErr(f.c, err)
	}
	last := w.Roots[len(w.Roots)-1]
	if last.ParentVersion != f.version || last.ParentChecksum != f.checksum {
		return refuse(f.c, RefusedLineage, fmt.Errorf("v%d does not descend from the planned head v%d", last.Version, f.version))
	}
	f.extra = append(w.Roots, f.extra...)
	f.version, f.checksum = w.Head.Version, w.Head.ManifestChecksum
	return nil
}

func (f *fence) referenced(ctx context.Context, key string) (bool, error) {
	for i := range f.extra {
		_, found, err := f.lin.Lookup(ctx, &f.extra[i], key)
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

func (f *fence) partReferenced(key string) bool {
	for i := range f.extra {
		for _, p := range f.extra[i].Parts {
			if p.Key == key {
				return true
			}
		}
	}
	return false
}
