package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

// portErr turns a decided fault of a non-bucket port into its outcome:
// apply reports whether the write takes effect, err what the caller sees.
// FaultCrash never returns (the port panics Crash before the call).
func portErr(f Fault, op string) (apply bool, err error) {
	switch f {
	case FaultThrottle:
		return false, fmt.Errorf("%s: %w", op, store.ErrThrottled)
	case FaultAmbiguousLost:
		return false, fmt.Errorf("%s: %w", op, store.ErrAmbiguous)
	case FaultAmbiguousDone:
		return true, fmt.Errorf("%s: %w", op, store.ErrAmbiguous)
	}
	return true, nil
}

// ---------------------------------------------------------------------------
// Observed state (the coordinator's DynamoDB table, disposable).

// StateStore is an in-memory observe.StateStore and gc.SweepRecorder with
// the DynamoDB adapter's semantics: Advance is conditional and forward-only,
// returns the previous item either way and accumulates GC debt.
type StateStore struct {
	w     *World
	items map[string]observe.Observed
	confs map[string]contract.LineageConfirmation // operators' lineage confirmations (same table)
}

func newStateStore(w *World) *StateStore {
	return &StateStore{w: w, items: map[string]observe.Observed{}, confs: map[string]contract.LineageConfirmation{}}
}

// Wipe forgets everything (coordinator state is disposable).
func (s *StateStore) Wipe() { clear(s.items); clear(s.confs) }

// HighestObserved implements gc.Memory.
func (s *StateStore) HighestObserved(_ context.Context, c string) (uint64, string, error) {
	if _, err := portErr(s.w.fault("state-get", c, false), "get observed state"); err != nil {
		return 0, "", err
	}
	return s.items[c].Version, s.items[c].Checksum, nil
}

// LineageConfirmation implements gc.Memory.
func (s *StateStore) LineageConfirmation(_ context.Context, c string) (contract.LineageConfirmation, bool, error) {
	if _, err := portErr(s.w.fault("state-get", c, false), "get lineage confirmation"); err != nil {
		return contract.LineageConfirmation{}, false, err
	}
	conf, ok := s.confs[c]
	return conf, ok, nil
}

// ConfirmLineage is what `bcc confirm-lineage` records (as the DynamoDB
// adapter does: the confirmation, and the observed state above the
// confirmed head forgotten).
func (s *StateStore) ConfirmLineage(conf contract.LineageConfirmation) {
	s.confs[conf.Collection] = conf
	if st, ok := s.items[conf.Collection]; ok && (st.Version > conf.HeadVersion || st.Version == conf.HeadVersion && st.Checksum != conf.HeadChecksum) {
		delete(s.items, conf.Collection)
	}
}

// Advance implements observe.StateStore.
func (s *StateStore) Advance(_ context.Context, st observe.Observed) (observe.Observed, error) {
	apply, err := portErr(s.w.fault("state-advance", st.Collection, true), "advance observed state")
	if !apply {
		return observe.Observed{}, err
	}
	cur, ok := s.items[st.Collection]
	if ok && cur.Version >= st.Version {
		return cur, fmt.Errorf("advance %s to v%d: %w", st.Collection, st.Version, store.ErrConditionFailed)
	}
	next := st
	next.Debt.GCObjects, next.Debt.GCBytes, next.Debt.GCDueAtUnixMs, next.Debt.GCSweptAtUnixMs = cur.Debt.GCObjects, cur.Debt.GCBytes, cur.Debt.GCDueAtUnixMs, cur.Debt.GCSweptAtUnixMs
	if st.Debt.GCObjects > 0 {
		if next.Debt.GCDueAtUnixMs == 0 {
			next.Debt.GCDueAtUnixMs = st.Debt.GCDueAtUnixMs
		}
		next.Debt.GCObjects += st.Debt.GCObjects
		next.Debt.GCBytes += st.Debt.GCBytes
	}
	s.items[st.Collection] = next
	s.w.afterWrite("state-advance", st.Collection)
	return cur, err
}

// Get implements observe.StateStore.
func (s *StateStore) Get(_ context.Context, collection string) (observe.Observed, error) {
	if _, err := portErr(s.w.fault("state-get", collection, false), "get observed state"); err != nil {
		return observe.Observed{}, err
	}
	o := s.items[collection]
	o.Collection = collection
	return o, nil
}

// Revert implements observe.StateStore.
func (s *StateStore) Revert(_ context.Context, st, prev observe.Observed) error {
	apply, err := portErr(s.w.fault("state-revert", st.Collection, true), "revert observed state")
	if !apply {
		return err
	}
	cur, ok := s.items[st.Collection]
	if !ok || cur.Version != st.Version || cur.Checksum != st.Checksum {
		return fmt.Errorf("revert %s: %w", st.Collection, store.ErrConditionFailed)
	}
	if prev.Version == 0 {
		delete(s.items, st.Collection)
	} else {
		s.items[st.Collection] = prev
	}
	s.w.afterWrite("state-revert", st.Collection)
	return err
}

// RecordGCSweep implements gc.SweepRecorder (a wiped record stays wiped).
func (s *StateStore) RecordGCSweep(_ context.Context, c string, remObjects, remBytes, nextDue, sweptAt int64) error {
	apply, err := portErr(s.w.fault("state-sweep", c, true), "record gc sweep")
	if !apply {
		return err
	}
	cur, ok := s.items[c]
	if !ok {
		return nil
	}
	cur.Debt.GCObjects, cur.Debt.GCBytes, cur.Debt.GCSweptAtUnixMs, cur.Debt.GCDueAtUnixMs = remObjects, remBytes, sweptAt, nextDue
	s.items[c] = cur
	s.w.afterWrite("state-sweep", c)
	return err
}

// ---------------------------------------------------------------------------
// Leases: lease.Memory behind fault injection, with the lease contract
// checked from outside (the lease_condition guard's observable promise).

// LeaseStore wraps lease.Memory: every call may fail or crash, and every
// write that succeeds is checked against the record it replaced: a live or
// finished lease is never re-acquired, and only the current holder and
// epoch extend or complete a lease.
type LeaseStore struct {
	w   *World
	mem *lease.Memory
}

// Wipe forgets every lease.
func (l *LeaseStore) Wipe() { l.mem.Wipe() }

// Acquire implements lease.Store.
func (l *LeaseStore) Acquire(ctx context.Context, want contract.Lease, nowMs int64, conditional bool) (contract.Lease, lease.State, error) {
	apply, ferr := portErr(l.w.fault("lease-acquire", want.TaskID, true), "acquire lease")
	if !apply {
		return contract.Lease{}, lease.State{}, ferr
	}
	cur, had := l.mem.Get(want.TaskID)
	got, st, err := l.mem.Acquire(ctx, want, nowMs, conditional)
	if err == nil && had {
		switch {
		case cur.Done:
			l.w.violate("lease-exclusive", "task %s was finished (epoch %d) and was leased again by %s", want.TaskID, cur.Lease.LeaseEpoch, want.Holder)
		case cur.Lease.LeaseExpiryUnixMs > nowMs:
			l.w.violate("lease-exclusive", "task %s: %s took the lease while %s held it until %d (now %d)", want.TaskID, want.Holder, cur.Lease.Holder, cur.Lease.LeaseExpiryUnixMs, nowMs)
		}
	}
	if err == nil {
		l.w.afterWrite("lease-acquire", want.TaskID)
		if ferr != nil {
			return contract.Lease{}, lease.State{}, ferr
		}
	}
	return got, st, err
}

// Extend implements lease.Store.
func (l *LeaseStore) Extend(ctx context.Context, taskID, holder string, epoch uint64, expiryMs int64, conditional bool) error {
	apply, ferr := portErr(l.w.fault("lease-extend", taskID, true), "extend lease")
	if !apply {
		return ferr
	}
	cur, had := l.mem.Get(taskID)
	err := l.mem.Extend(ctx, taskID, holder, epoch, expiryMs, conditional)
	if err == nil {
		if had && (cur.Done || cur.Lease.LeaseEpoch != epoch || cur.Lease.Holder != holder) {
			l.w.violate("lease-exclusive", "task %s: %s extended epoch %d but the lease is %s epoch %d (done %v)", taskID, holder, epoch, cur.Lease.Holder, cur.Lease.LeaseEpoch, cur.Done)
		}
		l.w.afterWrite("lease-extend", taskID)
		return ferr
	}
	return err
}

// Complete implements lease.Store.
func (l *LeaseStore) Complete(ctx context.Context, taskID, holder string, epoch uint64, nowMs int64, conditional bool) error {
	apply, ferr := portErr(l.w.fault("lease-complete", taskID, true), "complete lease")
	if !apply {
		return ferr
	}
	cur, had := l.mem.Get(taskID)
	err := l.mem.Complete(ctx, taskID, holder, epoch, nowMs, conditional)
	if err == nil {
		if had && (cur.Lease.LeaseEpoch != epoch || cur.Lease.Holder != holder) {
			l.w.violate("lease-exclusive", "task %s: %s completed epoch %d but the lease is %s epoch %d", taskID, holder, epoch, cur.Lease.Holder, cur.Lease.LeaseEpoch)
		}
		l.w.afterWrite("lease-complete", taskID)
		return ferr
	}
	return err
}

// ---------------------------------------------------------------------------
// CCS stand-in: facts with facts_version, idempotent release intents.

// Intent is a recorded release intent.
type Intent struct {
	Req        contract.ReleaseIntentRequest
	RecordedAt int64
}

// CCS is an in-memory Catalog Control Service.
type CCS struct {
	w       *World
	facts   map[string]contract.CollectionFacts
	Intents map[string]Intent
}

func newCCS(w *World) *CCS {
	return &CCS{w: w, facts: map[string]contract.CollectionFacts{}, Intents: map[string]Intent{}}
}

// put stores facts with facts_version incremented (the owner's own write; no faults).
func (c *CCS) put(f contract.CollectionFacts) contract.CollectionFacts {
	cur := c.facts[f.Collection]
	f.SchemaVersion, f.FactsVersion = contract.SchemaVersion, cur.FactsVersion+1
	c.facts[f.Collection] = f
	return f
}

// Facts implements the facts ports of observe, compact and gc.
func (c *CCS) Facts(_ context.Context, collection string) (contract.CollectionFacts, error) {
	if _, err := portErr(c.w.fault("ccs-facts", collection, false), "get facts of "+collection); err != nil {
		return contract.CollectionFacts{}, err
	}
	f, ok := c.facts[collection]
	if !ok {
		return contract.CollectionFacts{Collection: collection}, fmt.Errorf("facts of %s: unknown collection", collection)
	}
	return f, nil
}

// Collections implements observe.Catalog.
func (c *CCS) Collections(_ context.Context) ([]string, error) {
	if _, err := portErr(c.w.fault("ccs-collections", "", false), "list collections"); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(c.facts))
	for k := range c.facts {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// RecordReleaseIntent implements handoff.CCS: idempotent by intent id,
// rejected for a collection that is not tombstoned. Recording checks
// invariant (d): every cleanup dependency is already gone.
func (c *CCS) RecordReleaseIntent(_ context.Context, req contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	ans := contract.ReleaseIntentAnswer{SchemaVersion: contract.SchemaVersion, IntentID: req.IntentID}
	apply, err := portErr(c.w.fault("ccs-intent", req.Collection, true), "record release intent")
	if !apply {
		return ans, err
	}
	f := c.facts[req.Collection]
	if !f.Tombstoned {
		ans.Status, ans.Reason = contract.IntentRejected, req.Collection+" is not tombstoned"
		return ans, err
	}
	if _, ok := c.Intents[req.IntentID]; ok {
		ans.Status = contract.IntentAlreadyRecorded
		return ans, err
	}
	c.w.checkReleaseDependencies(req)
	c.Intents[req.IntentID] = Intent{Req: req, RecordedAt: c.w.t}
	ans.Status, ans.RecordedAtUnixMs = contract.IntentRecorded, c.w.t
	c.w.afterWrite("ccs-intent", req.Collection)
	return ans, err
}

// ---------------------------------------------------------------------------
// Adapters from the bucket and the queues to the use cases' ports.

var _ gc.Memory = (*StateStore)(nil)

type gcBucket struct{ b *MemBucket }

func (g gcBucket) Get(ctx context.Context, key string) ([]byte, error) { return g.b.Get(ctx, key) }

// List hands the listing to the use case in small pages (as S3 pages it).
func (g gcBucket) List(ctx context.Context, prefix string, fn func([]gc.Listed) error) error {
	ls, err := g.b.List(ctx, prefix)
	if err != nil {
		return err
	}
	const page = 4
	for start := 0; start < len(ls); start += page {
		out := make([]gc.Listed, 0, page)
		for _, l := range ls[start:min(start+page, len(ls))] {
			out = append(out, gc.Listed{Key: l.Key, LastModified: l.LastModified})
		}
		if err := fn(out); err != nil {
			return err
		}
	}
	return nil
}

func (g gcBucket) DeleteBatch(ctx context.Context, keys []string) (gc.DeleteResult, error) {
	r, err := g.b.DeleteBatch(ctx, keys)
	return gc.DeleteResult{Deleted: r.Deleted, Failed: r.Failed}, err
}

// reclaimer is the handoff's Reclaimer (used only with ambiguous_reread off).
type reclaimer struct{ b *MemBucket }

func (r reclaimer) DeleteKeys(ctx context.Context, keys []string) error {
	res, err := r.b.DeleteBatch(ctx, keys)
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("delete %d objects failed", len(res.Failed))
	}
	return nil
}

// send puts one message on a queue through a faulty SendMessageBatch.
func (w *World) send(class string, msgs []awsio.Message) error {
	apply, err := portErr(w.fault("sqs-send", class, true), "send to "+class)
	if !apply {
		return err
	}
	q := w.queues[class]
	for _, m := range msgs {
		if !q.Send(w.t, m.Group, m.DedupID, m.Body) {
			w.count("sqs-dedup-collapsed")
		}
	}
	w.afterWrite("sqs-send", class)
	return err
}

// taskQueue is the observer's TaskQueue: messages built by the one
// definition of a task message (contract.TaskMessage), routed by
// resources.QueueForKind.
type taskQueue struct{ w *World }

func (t taskQueue) Enqueue(_ context.Context, tasks []contract.Task) error {
	byClass := map[string][]awsio.Message{}
	var order []string
	for _, tk := range tasks {
		m, err := contract.TaskMessage(tk)
		if err != nil {
			return err
		}
		class := resources.QueueForKind(tk.Kind)
		if _, ok := byClass[class]; !ok {
			order = append(order, class)
		}
		byClass[class] = append(byClass[class], m)
	}
	for _, class := range order {
		if err := t.w.send(class, byClass[class]); err != nil {
			return err
		}
	}
	return nil
}

// reporter is compaction's Reporter and GC's CompletionSink (the handoff
// queue; identity contract.CompletionID).
type reporter struct{ w *World }

func (r reporter) Report(_ context.Context, c contract.Completion) error {
	m, err := contract.CompletionMessage(c)
	if err != nil {
		return err
	}
	return r.w.send(resources.QueueHandoff, []awsio.Message{m})
}

// pubPort is the handoff's Publisher: the real stand-in publisher behind a
// transport that may time out before or after the publisher applied the
// request (both are store.ErrAmbiguous to the caller). Every request is
// remembered by id for invariant (b).
type pubPort struct{ w *World }

func (p pubPort) Cutover(ctx context.Context, req contract.CutoverRequest) (contract.CutoverAnswer, error) {
	w := p.w
	if _, ok := w.requests[req.RequestID]; !ok {
		w.requests[req.RequestID] = req
	}
	f := w.fault("publisher-cutover", req.Collection, true)
	if f == FaultNone && w.faultRate > 0 && !w.quiet && w.rng.Float64() < 0.3 {
		// The owner is a remote endpoint: timeouts are its common fault.
		f = []Fault{FaultAmbiguousLost, FaultAmbiguousDone}[w.rng.IntN(2)]
	}
	switch {
	case w.slowPub && (!w.quiet || w.round == 0) || f == FaultAmbiguousLost && w.rng.IntN(2) == 0:
		// The publisher queued the request; the answer is lost and the
		// request is applied later (or refused once past its not_after).
		// It checked the outputs on arrival; it does not check them again.
		if w.late.CheckOutputs(ctx, req.Added) == nil && !slices.ContainsFunc(w.queued, func(q contract.CutoverRequest) bool { return q.RequestID == req.RequestID }) {
			w.queued = append(w.queued, req)
			w.count("cutover-queued")
		}
		return contract.CutoverAnswer{}, fmt.Errorf("cutover %s: queued by the publisher: %w", req.RequestID, store.ErrAmbiguous)
	case f == FaultAmbiguousLost || f == FaultThrottle:
		w.count("cutover-timeout-before")
		return contract.CutoverAnswer{}, fmt.Errorf("cutover %s: %w", req.RequestID, store.ErrAmbiguous)
	}
	ans, err := w.pub.Cutover(ctx, req)
	w.afterWrite("publisher-cutover", req.Collection)
	if f == FaultAmbiguousDone {
		w.count("cutover-timeout-after")
		return contract.CutoverAnswer{}, fmt.Errorf("cutover %s: %w", req.RequestID, store.ErrAmbiguous)
	}
	return ans, err
}

// collectionOf returns the collection a bucket key belongs to.
func collectionOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, contract.CollectionsPrefix)
	if !ok {
		return "", false
	}
	c, _, ok := strings.Cut(rest, "/")
	return c, ok
}
