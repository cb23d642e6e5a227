package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/store"
)

// Lineage reads committed manifests (package lineage).
type Lineage interface {
	Head(ctx context.Context, collection string) (contract.Head, error)
	HeadRoot(ctx context.Context, collection string) (contract.Head, contract.Manifest, error)
	Root(ctx context.Context, key, checksum string) (contract.Manifest, error)
	// EachChange streams m's change entries of one kind (inline, or its
	// change parts one at a time).
	EachChange(ctx context.Context, m *contract.Manifest, kind string, fn func(contract.ObjectEntry) error) error
	// Lookup finds objectKey in m's full object set (reading at most the
	// one part whose key range covers it).
	Lookup(ctx context.Context, m *contract.Manifest, objectKey string) (contract.ObjectEntry, bool, error)
}

// Publisher is the Manifest Publisher. An unknown outcome is an error
// wrapping store.ErrAmbiguous.
type Publisher interface {
	Cutover(ctx context.Context, req contract.CutoverRequest) (contract.CutoverAnswer, error)
}

// CCS records release intents (idempotent by intent id) and serves the
// current scheduling facts the handoff re-reads before every hand-off.
type CCS interface {
	Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
	RecordReleaseIntent(ctx context.Context, req contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error)
}

// NamespaceCCS is CCS's namespace facts (optional: without it no
// namespace release is requested).
type NamespaceCCS interface {
	NamespaceFacts(ctx context.Context, namespace string) (contract.NamespaceFacts, error)
}

// namespaceRelease requests the release of the namespace of collection
// once CCS dropped it and every child collection's release intent is
// recorded (seed §8.3: a namespace is released only after its children).
// The collection whose release completes the set triggers it; its
// identity is the namespace incarnation's, so repeats collapse. A
// namespace dropped after its last child was already released has no such
// trigger: reconciliation asks for it (NamespaceReleaser, namespace.go).
func (h *Handoff) namespaceRelease(ctx context.Context, collection string) error {
	ns, ok := h.ccs.(NamespaceCCS)
	if !ok {
		return nil
	}
	cf, err := h.ccs.Facts(ctx, collection)
	if err != nil {
		return fmt.Errorf("namespace release after %s: read facts: %w", collection, err)
	}
	if cf.Namespace == "" {
		return nil
	}
	_, err = (&NamespaceReleaser{ccs: h.ccs, ns: ns, guards: h.cfg.Guards, metrics: h.metrics, log: h.log}).Release(ctx, cf.Namespace)
	return err
}

// ReleaseNamespace handles a namespace release request from the handoff
// queue (reconciliation found the release owed): it re-reads every fact
// (NamespaceReleaser) and records the intent only when CCS's facts say it
// is owed now. The request names only the namespace; nothing it carries is
// trusted. An error means "retry later".
func (h *Handoff) ReleaseNamespace(ctx context.Context, r contract.NamespaceRelease) (Result, error) {
	ns, ok := h.ccs.(NamespaceCCS)
	if !ok || h.ccs == nil {
		return Result{}, errors.New("namespace release: no CCS endpoint with namespace facts configured")
	}
	requested, err := (&NamespaceReleaser{ccs: h.ccs, ns: ns, guards: h.cfg.Guards, metrics: h.metrics, log: h.log}).Release(ctx, r.Namespace)
	if err != nil {
		return Result{}, err
	}
	if !requested {
		return Result{Outcome: OutcomeIgnored, Reason: "namespace " + r.Namespace + " owes no release now"}, nil
	}
	return Result{Outcome: OutcomeIntentRecorded, Reason: "namespace " + r.Namespace}, nil
}

// ErrFactsUnavailable: current CCS facts could not be read, so nothing is
// handed off (fail closed); the completion is retried later.
var ErrFactsUnavailable = errors.New("CCS facts unavailable")

// Reclaimer deletes objects. It is used only by the unguarded ambiguous
// path (guard.AmbiguousReread off), which models the naive "treat unknown
// as failed and clean up" behaviour the guard exists against. With every
// guard on the handoff deletes nothing.
type Reclaimer interface {
	DeleteKeys(ctx context.Context, keys []string) error
}

// Config tunes the handoff.
type Config struct {
	MaxTaskLifetime time.Duration
	// CutoverDeadline is how long after a rewrite task started its cutover
	// may still be made visible: every request carries not_after = started
	// + CutoverDeadline, where started is the earlier of the task's start
	// and its outputs' LastModified (workStart), and the publisher refuses
	// it after that. GC waits past the largest possible not_after before
	// reclaiming a never-committed output (default 2 x MaxTaskLifetime;
	// never less than MaxTaskLifetime).
	CutoverDeadline time.Duration
	// MaxLineageWalk bounds how many versions since a base are read to
	// find an applied request or a delete gain; a longer gap is treated as
	// stale.
	MaxLineageWalk int
	// MaxResubmits bounds resubmissions after unknown outcomes in one
	// delivery; then the message is retried later. Zero fields take
	// policy.Default()'s values.
	MaxResubmits int
	Guards       guard.Set
	// ConflictChecked: the publisher has the conflict-check capability
	// (policy publisher_conflict_check): a result whose base the head
	// moved past is submitted pinned to its base, asking for the check
	// (rebase.go), instead of being dropped here.
	ConflictChecked bool
}

// ConfigFrom is the handoff's configuration under a validated policy, with
// guards g.
func ConfigFrom(p policy.Policy, g guard.Set) Config {
	return Config{MaxTaskLifetime: p.MaxTaskLifetime.D(), CutoverDeadline: p.CutoverDeadline.D(), MaxLineageWalk: p.Handoff.MaxLineageWalk,
		MaxResubmits: p.Handoff.MaxResubmits, Guards: g, ConflictChecked: p.PublisherConflictCheck}
}

// Handoff is the use case.
type Handoff struct {
	lin     Lineage
	pub     Publisher
	ccs     CCS
	reclaim Reclaimer
	remains Remains // the bucket listing a release is re-derived from (remains.go)
	written Written // the dating of a rewrite's outputs (written.go)
	now     func() time.Time
	cfg     Config
	metrics *metrics.Recorder
	log     *slog.Logger
	// proven: the publisher proved it runs the conflict check (an answer
	// echoed conflict_check v1; rebase.go). Learned again after every
	// cold start, forgotten on an answer that shows it missing.
	proven atomic.Bool
}

// New wires the handoff. ccs and reclaim may be nil.
func New(lin Lineage, pub Publisher, ccs CCS, reclaim Reclaimer, now func() time.Time, cfg Config, m *metrics.Recorder, log *slog.Logger) *Handoff {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := ConfigFrom(policy.Default(), cfg.Guards)
	if cfg.MaxTaskLifetime <= 0 {
		cfg.MaxTaskLifetime = d.MaxTaskLifetime
	}
	if cfg.CutoverDeadline < cfg.MaxTaskLifetime {
		cfg.CutoverDeadline = 2 * cfg.MaxTaskLifetime
	}
	if cfg.MaxLineageWalk <= 0 {
		cfg.MaxLineageWalk = d.MaxLineageWalk
	}
	if cfg.MaxResubmits <= 0 {
		cfg.MaxResubmits = d.MaxResubmits
	}
	return &Handoff{lin: lin, pub: pub, ccs: ccs, reclaim: reclaim, now: now, cfg: cfg, metrics: m, log: log}
}

// Outcome of one completion.
type Outcome string

// Outcomes.
const (
	OutcomeAccepted         Outcome = "accepted"             // the head is (or already was) the result
	OutcomeStale            Outcome = "stale"                // the head moved: dropped
	OutcomeRejectedDelete   Outcome = "rejected_delete_gain" // inputs gained deletes since the base
	OutcomeRejected         Outcome = "rejected"             // the publisher refused the candidate
	OutcomeRejectedCoverage Outcome = "rejected_coverage"    // the coverage does not apply to its base
	OutcomeExpired          Outcome = "expired"              // older than the maximum task lifetime
	OutcomeFailedAmbiguous  Outcome = "dropped_ambiguous"    // unguarded path only
	OutcomeIgnored          Outcome = "ignored"              // nothing to hand off
	OutcomeIntentRecorded   Outcome = "intent_recorded"
	OutcomeIntentRejected   Outcome = "intent_rejected"
	OutcomeIntentNotAllowed Outcome = "intent_not_allowed" // cleanup not complete
	OutcomeFactsChanged     Outcome = "stale_facts"        // CCS facts the task kind depends on changed: dropped
	// OutcomeRejectedProvenance: the completion is not the work of a task
	// the coordinator issued for its base (provenance.go): refused, counted
	// (ForgedCompletions by Check), never submitted.
	OutcomeRejectedProvenance Outcome = "rejected_provenance"
)

// Result reports one completion.
type Result struct {
	Outcome   Outcome
	Reason    string
	RequestID string
	Version   uint64 // committed version, when accepted
}

// Process hands one completion to its owner. An error means "retry later"
// (the message stays); every definite decision returns nil.
func (h *Handoff) Process(ctx context.Context, c contract.Completion) (Result, error) {
	switch {
	case c.Kind.Rewrites():
		return h.rewrite(ctx, c)
	case c.Kind == contract.KindTombstoneCleanup:
		return h.release(ctx, c)
	}
	h.metrics.Add("CompletionsIgnored", 1)
	return Result{Outcome: OutcomeIgnored, Reason: fmt.Sprintf("%s completions need no handoff", c.Kind)}, nil
}

func (h *Handoff) rewrite(ctx context.Context, c contract.Completion) (Result, error) {
	if c.Outcome != contract.OutcomeSucceeded || c.Coverage == nil || len(c.Coverage.Removed) == 0 {
		h.metrics.Add("CompletionsIgnored", 1)
		return Result{Outcome: OutcomeIgnored, Reason: "no replacement to hand off (outcome " + c.Outcome + ")"}, nil
	}
	reqID := contract.CutoverRequestID(c.TaskID, *c.Coverage)
	res := Result{RequestID: reqID}
	if h.cfg.Guards.HandoffProvenance {
		if check, reason := provenance(c); check != "" {
			return h.forged(c, check, reason), nil
		}
	}
	// The task's start is the sender's word: one claimed after our own
	// clock counts from now (rule 16), and the work counts from no later
	// than its outputs' writes as S3 dated them (written.go), so no
	// completion stretches its cutover's not_after past the horizon GC's
	// never-committed reclaim of those outputs waits out.
	started, missing, err := h.workStart(ctx, c)
	if err != nil {
		return res, err
	}
	if missing != "" && !h.expired(c.StartedAtUnixMs) {
		// Nothing a publisher could commit: the handoff refuses it
		// itself, as the publisher refuses a missing output.
		res.Outcome, res.Reason = OutcomeRejected, "handoff: "+missing
		return h.finish(c, res), nil
	}
	if age := h.now().Sub(started); age > h.cfg.MaxTaskLifetime || missing != "" {
		h.metrics.AddDim("ExpiredResultsDropped", "Kind", string(c.Kind), 1)
		res.Outcome, res.Reason = OutcomeExpired, fmt.Sprintf("task started (or its outputs were written) %s ago, over the %s lifetime", age.Round(time.Millisecond), h.cfg.MaxTaskLifetime)
		h.log.Warn("result dropped: task lifetime exceeded", "task", c.TaskID, "collection", c.Collection, "reason", res.Reason)
		return res, nil
	}
	req := contract.CutoverRequest{
		SchemaVersion: contract.SchemaVersion, RequestID: reqID, Collection: c.Collection,
		BaseVersion: c.BaseManifestVersion, BaseChecksum: c.BaseManifestChecksum,
		NotAfterUnixMs: NotAfter(started.UnixMilli(), h.cfg.CutoverDeadline),
		Removed:        c.Coverage.Removed, Added: nonNil(c.Coverage.Added),
	}
	h.conflictChecked(&req, c)
	for attempt := 0; ; attempt++ {
		verdict, err := h.judge(ctx, c, req)
		if err != nil || verdict.Outcome != "" {
			return h.finish(c, verdict), err
		}
		// The head still is the base: the facts decide, read now, right
		// before this (re)submission.
		facts, changed, err := h.factsChanged(ctx, c)
		if err != nil || changed != "" {
			res.Outcome, res.Reason = OutcomeFactsChanged, changed
			if err != nil {
				return Result{RequestID: reqID}, err
			}
			return h.finish(c, res), nil
		}
		// ... and the publisher judges them again at its head CAS, the
		// moment of effect: a change after this read is refused there.
		req.CCSFacts = factsFence(h.cfg.Guards.HandoffFacts, c, facts)
		ans, err := h.pub.Cutover(ctx, req)
		if err == nil {
			h.checkedAnswer(ctx, c, req, ans)
			return h.answered(c, res, ans), nil
		}
		if !errors.Is(err, store.ErrAmbiguous) {
			return res, fmt.Errorf("submit cutover %s of %s: %w", reqID, c.TaskID, err)
		}
		h.metrics.AddDim("AmbiguousCutovers", "Kind", string(c.Kind), 1)
		if !h.cfg.Guards.AmbiguousReread {
			return h.naiveAmbiguous(ctx, c, res, err)
		}
		h.log.Warn("cutover outcome unknown; re-reading the head", "task", c.TaskID, "request", reqID, "err", err)
		if attempt+1 >= h.cfg.MaxResubmits {
			return res, fmt.Errorf("cutover %s of %s still unknown after %d submissions: %w", reqID, c.TaskID, attempt+1, err)
		}
		// Loop: judge re-reads the head. Our request in the lineage means
		// accepted; head == base means resubmit; anything else is stale.
	}
}

// expired says whether a task that claims to have started at startedMs is
// older than the task lifetime by the handoff's clock.
func (h *Handoff) expired(startedMs int64) bool {
	return h.now().Sub(time.UnixMilli(startedMs)) > h.cfg.MaxTaskLifetime
}

// forged refuses a completion that failed provenance check: counted by
// check, logged as an error (someone wrote to the handoff queue what no
// task of ours produced), never retried.
func (h *Handoff) forged(c contract.Completion, check, reason string) Result {
	h.metrics.AddDim("ForgedCompletions", "Check", check, 1)
	h.log.Error("completion refused: not the work of a task issued for its base", "check", check, "task", c.TaskID, "kind", c.Kind,
		"collection", c.Collection, "reason", reason)
	return Result{Outcome: OutcomeRejectedProvenance, Reason: check + ": " + reason}
}

// NotAfter is the deadline of the cutover of a rewrite task that started at
// startedMs: the publisher must not apply it later.
func NotAfter(startedMs int64, deadline time.Duration) int64 {
	return startedMs + deadline.Milliseconds()
}

// judge reads the committed head and decides what the result can still
// become: a non-empty Outcome is final, an empty one means "submit".
func (h *Handoff) judge(ctx context.Context, c contract.Completion, req contract.CutoverRequest) (Result, error) {
	reqID := req.RequestID
	res := Result{RequestID: reqID}
	head, root, err := h.lin.HeadRoot(ctx, c.Collection)
	if err != nil {
		return res, fmt.Errorf("read head of %s: %w", c.Collection, err)
	}
	if head.Version == c.BaseManifestVersion && head.ManifestChecksum == c.BaseManifestChecksum {
		reason, err := h.coverageMismatch(ctx, &root, c.Coverage)
		if err != nil {
			return res, fmt.Errorf("check coverage of %s against v%d: %w", c.TaskID, root.Version, err)
		}
		if reason != "" {
			res.Outcome, res.Reason = OutcomeRejectedCoverage, reason
		}
		return res, nil
	}
	since, complete, err := h.since(ctx, root, c.BaseManifestVersion)
	if err != nil {
		return res, err
	}
	for _, m := range since {
		if m.Origin.Kind == contract.OriginCutover && (m.Origin.RequestID == reqID || m.Origin.RequestID == probeRequestID(reqID)) {
			// (A probe applied by a publisher that broke the contract
			// twice is the result's change all the same: never submitted
			// again, its outputs never reclaimed as never-committed.)
			res.Outcome, res.Version, res.Reason = OutcomeAccepted, m.Version, "already applied"
			return res, nil
		}
	}
	if h.cfg.ConflictChecked {
		// The publisher judges the moved head at its CAS (rebase.go),
		// after the handoff's own checks (judgeMoved). Unproven, those
		// checks come before the probe too: the probe is the result's
		// request, never sent for a result the handoff refuses itself.
		proven := h.checkProven()
		moved, err := h.judgeMoved(ctx, c, head, res)
		if err != nil || proven || moved.Outcome != "" {
			return moved, err
		}
		if probed, applied := h.probe(ctx, c, req, res); applied || h.checkProven() {
			return probed, nil
		}
		h.log.Info("the result's base moved and the publisher has not yet proven its conflict check: judged as without it",
			"task", c.TaskID, "collection", c.Collection, "base", c.BaseManifestVersion, "head", head.Version)
	}
	if h.cfg.Guards.DeleteGainCheck {
		if !complete {
			res.Outcome, res.Reason = OutcomeRejectedDelete, fmt.Sprintf("cannot read every version between v%d and head v%d; failing closed", c.BaseManifestVersion, head.Version)
			return res, nil
		}
		gain, err := h.deleteGain(ctx, since, c.Coverage.Removed)
		if err != nil {
			return res, err
		}
		if gain != "" {
			res.Outcome, res.Reason = OutcomeRejectedDelete, gain
			return res, nil
		}
	}
	if h.cfg.Guards.BaseRevalidation {
		res.Outcome, res.Reason = OutcomeStale, fmt.Sprintf("head is v%d, result is based on v%d", head.Version, c.BaseManifestVersion)
		return res, nil
	}
	return res, nil
}

// since returns the roots from head down to (excluding) base, newest
// first; complete is false when the walk could not reach base.
func (h *Handoff) since(ctx context.Context, head contract.Manifest, base uint64) ([]contract.Manifest, bool, error) {
	var out []contract.Manifest
	m := head
	for m.Version > base {
		out = append(out, m)
		if len(out) > h.cfg.MaxLineageWalk || m.ParentVersion == 0 {
			return out, false, nil
		}
		if m.ParentVersion <= base {
			return out, m.ParentVersion == base, nil
		}
		p, err := h.lin.Root(ctx, m.ParentKey, m.ParentChecksum)
		if errors.Is(err, store.ErrNotFound) {
			return out, false, nil
		}
		if err != nil {
			return out, false, fmt.Errorf("read lineage of %s: %w", head.Collection, err)
		}
		m = p
	}
	return out, m.Version == base, nil
}

// coverageMismatch says why a rewrite's coverage does not apply to its
// base (empty when it does): every removed object must be in the base with
// exactly the entry the base holds (GC judges evicted objects by the
// entries the cutover's root records), no key may be named twice, and no
// added key may already be in the base. The publisher should refuse such a
// candidate too; the handoff does not rely on it.
func (h *Handoff) coverageMismatch(ctx context.Context, base *contract.Manifest, cov *contract.Coverage) (string, error) {
	seen := make(map[string]bool, len(cov.Removed)+len(cov.Added))
	for _, o := range cov.Removed {
		if seen[o.Key] {
			return fmt.Sprintf("coverage names %s twice", o.Key), nil
		}
		seen[o.Key] = true
		held, ok, err := h.lin.Lookup(ctx, base, o.Key)
		switch {
		case err != nil:
			return "", err
		case !ok:
			return fmt.Sprintf("removes %s, which v%d does not hold", o.Key, base.Version), nil
		case held != o:
			return fmt.Sprintf("removes %s with an entry that differs from v%d's (checksum %s, v%d has %s)", o.Key, base.Version, o.Checksum, base.Version, held.Checksum), nil
		}
	}
	for _, o := range cov.Added {
		if seen[o.Key] {
			return fmt.Sprintf("coverage names %s twice", o.Key), nil
		}
		seen[o.Key] = true
		if _, ok, err := h.lin.Lookup(ctx, base, o.Key); err != nil {
			return "", err
		} else if ok {
			return fmt.Sprintf("adds %s, which v%d already holds", o.Key, base.Version), nil
		}
	}
	return "", nil
}

// errGain stops a change walk at the first delete gain.
var errGain = errors.New("delete gain")

// deleteGain names an object added since the base that carries delete
// markers over an input's record key range. A change too large for its
// root is read from its change parts, one at a time.
func (h *Handoff) deleteGain(ctx context.Context, since []contract.Manifest, inputs []contract.ObjectEntry) (string, error) {
	var gain string
	for i := range since {
		m := &since[i]
		err := h.lin.EachChange(ctx, m, contract.ChangeAdded, func(a contract.ObjectEntry) error {
			if a.DeleteCount == 0 {
				return nil
			}
			for _, in := range inputs {
				if in.DocCount > 0 && a.MinRecordKey <= in.MaxRecordKey && a.MaxRecordKey >= in.MinRecordKey {
					gain = fmt.Sprintf("v%d added %s with %d deletes over input %s [%s, %s]", m.Version, a.Key, a.DeleteCount, in.Key, in.MinRecordKey, in.MaxRecordKey)
					return errGain
				}
			}
			return nil
		})
		if errors.Is(err, errGain) {
			return gain, nil
		}
		if err != nil {
			return "", fmt.Errorf("read the change of v%d: %w", m.Version, err)
		}
	}
	return "", nil
}

func (h *Handoff) answered(c contract.Completion, res Result, ans contract.CutoverAnswer) Result {
	switch ans.Status {
	case contract.CutoverAccepted:
		res.Outcome, res.Version = OutcomeAccepted, ans.CommittedVersion
	case contract.CutoverConflict:
		res.Outcome, res.Reason = OutcomeStale, "publisher: "+ans.Reason
	case contract.CutoverExpired:
		res.Outcome, res.Reason = OutcomeExpired, "publisher: "+ans.Reason
	case contract.CutoverStaleFacts:
		res.Outcome, res.Reason = OutcomeFactsChanged, "publisher (at its head CAS): "+ans.Reason
	default:
		res.Outcome, res.Reason = OutcomeRejected, "publisher: "+ans.Reason
	}
	return h.finish(c, res)
}

func (h *Handoff) finish(c contract.Completion, res Result) Result {
	switch res.Outcome {
	case OutcomeAccepted:
		h.metrics.AddDim("CutoversAccepted", "Kind", string(c.Kind), 1)
		h.log.Info("cutover accepted", "task", c.TaskID, "collection", c.Collection, "base", c.BaseManifestVersion, "version", res.Version, "request", res.RequestID, "reason", res.Reason)
	case OutcomeStale:
		h.metrics.AddDim("StaleResultsDropped", "Kind", string(c.Kind), 1)
		h.log.Info("stale result dropped; outputs left for never-committed reclaim", "task", c.TaskID, "collection", c.Collection, "reason", res.Reason)
	case OutcomeRejectedDelete:
		h.metrics.AddDim("RejectedDeleteGain", "Kind", string(c.Kind), 1)
		h.log.Warn("result rejected: inputs gained deletes since its base", "task", c.TaskID, "collection", c.Collection, "reason", res.Reason)
	case OutcomeRejectedCoverage:
		h.metrics.AddDim("RejectedCoverage", "Kind", string(c.Kind), 1)
		h.log.Error("result rejected: its coverage does not apply to its base; nothing submitted", "task", c.TaskID, "collection", c.Collection, "reason", res.Reason)
	case OutcomeExpired:
		h.metrics.AddDim("ExpiredResultsDropped", "Kind", string(c.Kind), 1)
		h.log.Warn("result dropped: the publisher did not apply it before not_after", "task", c.TaskID, "collection", c.Collection, "reason", res.Reason)
	case OutcomeFactsChanged:
		h.metrics.AddDim("StaleFactsDropped", "Kind", string(c.Kind), 1)
		h.log.Info("result dropped: the CCS facts its task kind depends on changed; fresh work comes from current facts", "task", c.TaskID,
			"kind", c.Kind, "collection", c.Collection, "reason", res.Reason)
	case OutcomeRejected:
		h.metrics.AddDim("CutoversRejected", "Kind", string(c.Kind), 1)
		h.log.Error("cutover rejected (by the publisher, or by the handoff for an output not in the bucket)", "task", c.TaskID, "collection", c.Collection, "reason", res.Reason)
	}
	return res
}

// naiveAmbiguous is the behaviour without the ambiguous-outcome re-read:
// the unknown outcome is taken as a failure, the result is dropped and its
// outputs are cleaned up. When the publisher did apply the request, the
// committed head now references deleted objects. Never used with guard.All().
func (h *Handoff) naiveAmbiguous(ctx context.Context, c contract.Completion, res Result, cause error) (Result, error) {
	h.metrics.AddDim("StaleResultsDropped", "Kind", string(c.Kind), 1)
	res.Outcome, res.Reason = OutcomeFailedAmbiguous, "cutover failed: "+cause.Error()
	if h.reclaim != nil {
		keys := make([]string, 0, len(c.Coverage.Added))
		for _, o := range c.Coverage.Added {
			keys = append(keys, o.Key)
		}
		if err := h.reclaim.DeleteKeys(ctx, keys); err != nil {
			return res, err
		}
	}
	h.log.Warn("cutover treated as failed and its outputs cleaned up (ambiguous_reread guard off)", "task", c.TaskID)
	return res, nil
}

func (h *Handoff) release(ctx context.Context, c contract.Completion) (Result, error) {
	complete := c.Outcome == contract.OutcomeSucceeded && c.Cleanup != nil && c.Cleanup.Complete
	if h.cfg.Guards.ReleaseDependencies && !complete {
		h.metrics.Add("ReleaseIntentsDeferred", 1)
		return Result{Outcome: OutcomeIntentNotAllowed, Reason: "cleanup dependencies are not all confirmed"}, nil
	}
	if h.ccs == nil {
		return Result{}, errors.New("release intent: no CCS endpoint configured")
	}
	// The release is of the tombstone the cleanup ran under: CCS must
	// still hold that tombstone, read now, right before the intent.
	facts, changed, err := h.factsChanged(ctx, c)
	if err != nil {
		return Result{}, err
	} else if changed != "" {
		res := h.finish(c, Result{Outcome: OutcomeFactsChanged, Reason: changed})
		return res, nil
	}
	if h.cfg.Guards.ReleaseDependencies {
		// Every dependency of the graph the cleanup evaluated must be
		// confirmed, and the incarnation's head is gone (the publisher
		// retired it at the cleanup's request): a
		// head of the incarnation still in place (a commit that landed
		// after the cleanup, or a cleanup that never got there) means
		// objects and manifests remain.
		for _, d := range c.Cleanup.Dependencies {
			if d.State != contract.DependencyConfirmed {
				h.metrics.Add("ReleaseIntentsDeferred", 1)
				return Result{Outcome: OutcomeIntentNotAllowed, Reason: fmt.Sprintf("dependency %s is %s (%s)", d.Name, d.State, d.Evidence)}, nil
			}
		}
		if len(c.Cleanup.Dependencies) == 0 {
			h.metrics.Add("ReleaseIntentsDeferred", 1)
			return Result{Outcome: OutcomeIntentNotAllowed, Reason: "the completion carries no dependency graph"}, nil
		}
		head, err := h.lin.Head(ctx, c.Collection)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return Result{}, fmt.Errorf("release intent for %s: read head: %w", c.Collection, err)
		case head.Inc() == c.Inc():
			h.metrics.Add("ReleaseIntentsDeferred", 1)
			return Result{Outcome: OutcomeIntentNotAllowed, Reason: fmt.Sprintf("the head of incarnation %d still exists (v%d)", c.Inc(), head.Version)}, nil
		}
	}
	// The graph above is the cleanup's word; what is owed is derived
	// again here from the bucket, CCS's facts and our own clock.
	if why, err := h.rederived(ctx, c, facts); err != nil {
		return Result{}, err
	} else if why != "" {
		h.metrics.Add("ReleaseIntentsDeferred", 1)
		h.log.Warn("release intent not owed yet by the handoff's own reading", "task", c.TaskID, "collection", c.Collection, "reason", why)
		return Result{Outcome: OutcomeIntentNotAllowed, Reason: why}, nil
	}
	id := contract.ReleaseIntentID(contract.CollectionReleaseIntent, c.Collection, c.Inc())
	req := contract.ReleaseIntentRequest{
		SchemaVersion: contract.SchemaVersion, IntentID: id, IntentKind: contract.CollectionReleaseIntent,
		Collection: c.Collection, Incarnation: c.Incarnation, FactsVersion: c.CCSFactsVersion, Dependencies: dependencies(c),
	}
	ans, err := h.ccs.RecordReleaseIntent(ctx, req)
	if err != nil {
		// CCS is idempotent by intent id, so a redelivery resubmits safely.
		return Result{RequestID: id}, fmt.Errorf("record release intent %s for %s: %w", id, c.Collection, err)
	}
	switch ans.Status {
	case contract.IntentRecorded, contract.IntentAlreadyRecorded:
		h.metrics.Add("ReleaseIntentsRecorded", 1)
		h.log.Info("release intent recorded", "collection", c.Collection, "intent", id, "status", ans.Status)
		if err := h.namespaceRelease(ctx, c.Collection); err != nil {
			// The collection's intent stands; the redelivered completion
			// finds it already recorded and tries the namespace again.
			return Result{RequestID: id}, err
		}
		return Result{Outcome: OutcomeIntentRecorded, RequestID: id, Reason: ans.Status}, nil
	}
	if ans.Status == contract.IntentStaleFacts {
		// The tombstone changed after our check, before CCS recorded:
		// the owner refused at the moment of effect. A new cleanup
		// follows the current tombstone.
		return h.finish(c, Result{Outcome: OutcomeFactsChanged, RequestID: id, Reason: "CCS (at the record): " + ans.Reason}), nil
	}
	h.metrics.Add("ReleaseIntentsRejected", 1)
	h.log.Error("release intent rejected by CCS", "collection", c.Collection, "intent", id, "reason", ans.Reason)
	return Result{Outcome: OutcomeIntentRejected, RequestID: id, Reason: ans.Reason}, nil
}

// factsFence is what a cutover request carries for the publisher's own
// facts check at its head CAS: the facts version the handoff judged the
// result under and the digest the task ran under (nil with the guard off:
// no facts are checked anywhere).
func factsFence(on bool, c contract.Completion, f contract.CollectionFacts) *contract.FactsFence {
	if !on {
		return nil
	}
	return &contract.FactsFence{TaskKind: c.Kind, FactsVersion: f.FactsVersion, Digest: c.CCSFactsDigest}
}

// factsChanged reads the collection's current CCS facts and says why the
// facts c's task kind depends on (contract.FactsDependencies) are no longer
// the ones it ran under; "" when they are. A completion without a digest
// is judged by its facts_version alone. Unreadable facts are an error
// wrapping ErrFactsUnavailable: nothing is handed off, the message is
// retried later (fail closed). It returns the facts it read.
func (h *Handoff) factsChanged(ctx context.Context, c contract.Completion) (contract.CollectionFacts, string, error) {
	if !h.cfg.Guards.HandoffFacts {
		return contract.CollectionFacts{}, "", nil
	}
	var (
		f   contract.CollectionFacts
		err error
	)
	if h.ccs == nil {
		err = errors.New("no CCS endpoint configured")
	} else {
		f, err = h.ccs.Facts(ctx, c.Collection)
	}
	if err != nil {
		h.metrics.Add("HandoffFactsUnavailable", 1)
		h.log.Warn("CCS facts unreadable; nothing handed off, retried later", "task", c.TaskID, "collection", c.Collection, "err", err)
		return f, "", fmt.Errorf("hand off %s of %s: read current CCS facts: %w: %w", c.Kind, c.Collection, ErrFactsUnavailable, err)
	}
	switch {
	case c.CCSFactsDigest == "":
		if f.FactsVersion != c.CCSFactsVersion {
			return f, fmt.Sprintf("CCS facts are v%d, the task ran under v%d (no facts digest: any change counts)", f.FactsVersion, c.CCSFactsVersion), nil
		}
	case contract.FactsDigest(c.Kind, f) != c.CCSFactsDigest:
		return f, fmt.Sprintf("CCS facts v%d changed what %s depends on since v%d: now %s", f.FactsVersion, c.Kind, c.CCSFactsVersion,
			contract.DescribeFacts(c.Kind, f)), nil
	}
	return f, "", nil
}

func dependencies(c contract.Completion) []string {
	deps := []string{"task: " + c.TaskID}
	if c.Cleanup != nil {
		for _, d := range c.Cleanup.Dependencies {
			deps = append(deps, fmt.Sprintf("%s: %s (%s)", d.Name, d.State, d.Evidence))
		}
	}
	return deps
}

func nonNil(s []contract.ObjectEntry) []contract.ObjectEntry {
	if s == nil {
		return []contract.ObjectEntry{}
	}
	return s
}
