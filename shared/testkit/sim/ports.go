package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/store"
)

// portErr turns a decided fault of a port that is not AWS (the owners'
// stand-ins) into its outcome: apply reports whether the write takes
// effect, err what the caller sees.
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
// CCS stand-in: facts with facts_version, idempotent release intents.

// Intent is a recorded release intent.
type Intent struct {
	Req        contract.ReleaseIntentRequest
	RecordedAt int64
}

// CCS is an in-memory Catalog Control Service.
type CCS struct {
	w       *World
	ns      map[string]contract.NamespaceFacts
	facts   map[string]contract.CollectionFacts
	history map[string]map[uint64]contract.CollectionFacts // every version of every collection's facts
	Intents map[string]Intent
}

func newCCS(w *World) *CCS {
	return &CCS{w: w, ns: map[string]contract.NamespaceFacts{}, facts: map[string]contract.CollectionFacts{}, history: map[string]map[uint64]contract.CollectionFacts{}, Intents: map[string]Intent{}}
}

// put stores facts with facts_version incremented (the owner's own write; no faults).
func (c *CCS) put(f contract.CollectionFacts) contract.CollectionFacts {
	cur := c.facts[f.Collection]
	f.SchemaVersion, f.FactsVersion = contract.SchemaVersion, cur.FactsVersion+1
	c.facts[f.Collection] = f
	if c.history[f.Collection] == nil {
		c.history[f.Collection] = map[uint64]contract.CollectionFacts{}
	}
	c.history[f.Collection][f.FactsVersion] = f
	c.w.retentionLog[f.Collection] = append(c.w.retentionLog[f.Collection], retentionAt{at: c.w.t, ms: f.Lifecycle.RetentionMs})
	return f
}

// ccsOwner is CCS as the publisher reads it at its head CAS: owner to
// owner, outside the coordinator's faults.
type ccsOwner struct{ c *CCS }

func (o ccsOwner) Facts(_ context.Context, collection string) (contract.CollectionFacts, error) {
	f, ok := o.c.facts[collection]
	if !ok {
		return contract.CollectionFacts{Collection: collection}, fmt.Errorf("facts of %s: unknown collection", collection)
	}
	return f, nil
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

// BadCatalogName is the name the catalog of badCatalog worlds lists
// besides the collections: the contract rejects it.
const BadCatalogName = "Bad Name!"

// badCatalog reports whether seed's CCS lists BadCatalogName (every fifth
// seed; derived from the seed alone, the schedule's random stream is the
// same as without it).
func badCatalog(seed uint64) bool { return seed%5 == 3 }

// Collections implements observe.Catalog.
func (c *CCS) Collections(_ context.Context) ([]string, error) {
	if _, err := portErr(c.w.fault("ccs-collections", "", false), "list collections"); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(c.facts))
	for k := range c.facts {
		out = append(out, k)
	}
	if c.w.badName {
		// A name CCS lists that the contract rejects (invariant
		// converged: it must fail only itself, guard.CatalogNames).
		out = append(out, BadCatalogName)
		c.w.count("bad-catalog-name")
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
	if _, ok := c.Intents[req.IntentID]; ok {
		ans.Status = contract.IntentAlreadyRecorded
		return ans, err
	}
	if req.IntentKind == contract.NamespaceReleaseIntent {
		ans, _ = c.recordNamespaceIntent(req, ans)
		return ans, err
	}
	f := c.facts[req.Collection]
	if !f.Tombstoned || f.Inc() != contract.Lifetime(req.Incarnation) {
		ans.Status, ans.Reason = contract.IntentRejected, fmt.Sprintf("%s incarnation %d is not tombstoned", req.Collection, contract.Lifetime(req.Incarnation))
		return ans, err
	}
	for _, in := range c.Intents {
		if in.Req.Collection == req.Collection && contract.Lifetime(in.Req.Incarnation) == contract.Lifetime(req.Incarnation) {
			c.w.violate("release-dependencies", "second release intent %s for %s incarnation %d (already %s)", req.IntentID, req.Collection, contract.Lifetime(req.Incarnation), in.Req.IntentID)
		}
	}
	c.w.checkReleaseDependencies(req)
	if why := factsDrift(contract.KindTombstoneCleanup, c.history[req.Collection][req.FactsVersion], f); why != "" {
		c.w.violate("stale-facts", "release intent %s for %s recorded under facts v%d, the cleanup ran under v%d: %s",
			req.IntentID, req.Collection, f.FactsVersion, req.FactsVersion, why)
	}
	c.Intents[req.IntentID] = Intent{Req: req, RecordedAt: c.w.t}
	f.ReleaseIntentRecorded = true
	c.put(f)
	ans.Status, ans.RecordedAtUnixMs = contract.IntentRecorded, c.w.t
	c.w.afterWrite("ccs-intent", req.Collection)
	return ans, err
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
	w.judgeFacts(req)
	if !w.quiet && w.cols[req.Collection] != nil && req.CCSFacts != nil && w.rng.IntN(6) == 0 {
		// CCS changes the facts after the handoff judged them and before
		// the publisher's head CAS: only the owner's re-check at the CAS
		// can refuse the cutover now (invariant stale-facts, at the CAS).
		w.count("facts-change-at-cas")
		w.logf("  after the handoff's facts check, before the publisher's head CAS:")
		w.factsChangeFor(req.Collection)
	}
	if w.checked && !w.quiet && w.cols[req.Collection] != nil && !w.cols[req.Collection].tombstoned && w.rng.IntN(3) == 0 {
		w.commitAtCutover(req)
	}
	if req.Collection == w.ownerDown {
		return contract.CutoverAnswer{}, fmt.Errorf("cutover %s: publisher unreachable for %s (connection refused): %w", req.RequestID, req.Collection, store.ErrAmbiguous)
	}
	f := w.fault("publisher-cutover", req.Collection, true)
	calm := w.top() != nil && !w.top().faults // an invocation run without faults (an outage's handoff batch)
	if f == FaultNone && w.faultRate > 0 && !w.quiet && !calm && w.rng.Float64() < 0.3 {
		// The owner is a remote endpoint: timeouts are its common fault.
		f = []Fault{FaultAmbiguousLost, FaultAmbiguousDone}[w.rng.IntN(2)]
	}
	switch {
	case w.slowPub && !calm && (!w.quiet || w.round == 0) || f == FaultAmbiguousLost && w.rng.IntN(2) == 0:
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

// factsDrift is the simulation's own reading of which CCS facts a task
// kind's result depends on (written apart from contract.FactsDigest): why
// planned and cur differ in them, "" when they do not. A rewrite needs a
// live collection and, for a transition, the same transition policy; a
// release needs the same tombstone: still tombstoned, same horizon, and no
// facts change at all (CCS names no tombstone identity).
func factsDrift(kind contract.TaskKind, planned, cur contract.CollectionFacts) string {
	if planned.Tombstoned != cur.Tombstoned {
		return fmt.Sprintf("tombstoned %v -> %v", planned.Tombstoned, cur.Tombstoned)
	}
	switch kind {
	case contract.KindLifecycleTransition:
		_, pOn := planned.Lifecycle.TransitionCutoff(0)
		_, cOn := cur.Lifecycle.TransitionCutoff(0)
		if pOn != cOn || pOn && (planned.Lifecycle.TransitionAfterMs != cur.Lifecycle.TransitionAfterMs || planned.Lifecycle.TransitionToTier != cur.Lifecycle.TransitionToTier) {
			return fmt.Sprintf("transition %dms to %q -> %dms to %q", planned.Lifecycle.TransitionAfterMs, planned.Lifecycle.TransitionToTier,
				cur.Lifecycle.TransitionAfterMs, cur.Lifecycle.TransitionToTier)
		}
	case contract.KindTombstoneCleanup:
		if planned.ReservationHorizonUnixMs != cur.ReservationHorizonUnixMs {
			return fmt.Sprintf("tombstone replaced (horizon %d -> %d)", planned.ReservationHorizonUnixMs, cur.ReservationHorizonUnixMs)
		}
		if planned.FactsVersion != cur.FactsVersion {
			return fmt.Sprintf("facts v%d -> v%d (a release is irreversible: any change counts)", planned.FactsVersion, cur.FactsVersion)
		}
	}
	return ""
}

// judgeFacts is invariant stale-facts for cutovers, judged when the
// handoff submits req: the facts its task kind depends on are the ones
// the task was planned under. A submission under other facts marks the
// request; checkCutover reports it if the publisher applies it (now or
// late).
func (w *World) judgeFacts(req contract.CutoverRequest) {
	c, ok := w.handing[req.RequestID]
	if !ok {
		return
	}
	planned, ok := w.ccs.history[c.Collection][c.CCSFactsVersion]
	if !ok {
		return
	}
	if why := factsDrift(c.Kind, planned, w.ccs.facts[c.Collection]); why != "" && w.staleFacts[req.RequestID] == "" {
		w.staleFacts[req.RequestID] = fmt.Sprintf("%s submitted under facts v%d, planned under v%d: %s", c.Kind, w.ccs.facts[c.Collection].FactsVersion, c.CCSFactsVersion, why)
	}
}

// commitAtCutover lands a commit after the handoff's last look and before
// the publisher reads its head (checked seeds): only the publisher's
// conflict check judges the request on the head it meets (invariants
// rebase-check, delete-gain, readable). Mostly an append; sometimes the
// late commit of another writer's upload (built on an older head: its
// records are ordered among the inputs', clause delete_since_base). No
// writer the simulation models commits a key again with another entry
// (clause checksum_changed: proven on the embedded stack and by the model;
// a storage-class manager re-committing an input in place with another
// tier, tried here, made GC delete the key the head references again, seed
// 60: docs/limits.md).
func (w *World) commitAtCutover(req contract.CutoverRequest) {
	c := req.Collection
	w.logf("  after the handoff's look, before the publisher reads its head:")
	switch k := w.rng.IntN(6); {
	case k <= 2 && slices.ContainsFunc(w.uploads, func(u workload.Upload) bool { return u.Collection == c }):
		// The oldest pending upload: the likeliest to be ordered among
		// the request's inputs.
		i := slices.IndexFunc(w.uploads, func(u workload.Upload) bool { return u.Collection == c })
		u := w.uploads[i]
		w.uploads = slices.Delete(w.uploads, i, i+1)
		delete(w.foreign, u.Entry.Key)
		w.count("late-commit-at-cutover")
		var newest uint64
		for _, in := range req.Removed {
			newest = max(newest, in.MaxSeq)
		}
		if u.Entry.MinSeq <= newest {
			w.count("late-commit-interleaved") // ordered among the request's inputs
		}
		w.logf("  another writer commits its upload %s to %s", u.Entry.Key, c)
		if _, err := w.invokeOwner(func() error { _, err := w.gen.CommitUpload(w.ctx, u); return err }); err != nil {
			w.violate("workload", "late commit of %s failed without faults: %v", u.Entry.Key, err)
		}
	default:
		w.count("append-at-cutover")
		w.appendTo(c)
	}
}
