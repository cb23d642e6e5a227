package status

import (
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/policy"
)

// Owed is one kind of work owed for a collection, derived from what the
// snapshot read (the same durable truth reconciliation derives it from:
// the head, CCS's facts, the GC plan, the cleanup cursor), with since when
// it is owed and who it waits on: the coordinator (it will do it), an
// owner (CCS, the publisher, the query plane's watermark) or an operator.
type Owed struct {
	Kind string `json:"kind"`
	// SinceUnixMs is when the work became owed (0: not known).
	SinceUnixMs int64 `json:"since_unix_ms,omitempty"`
	// WaitingOn is coordinator, ccs, publisher, query_plane or operator.
	WaitingOn string `json:"waiting_on"`
	Detail    string `json:"detail"`
}

// Kinds of owed work.
const (
	OwedObservation    = "observation"
	OwedCompaction     = "compaction"
	OwedTransition     = "lifecycle_transition"
	OwedGC             = "gc"
	OwedRetention      = "retention_reclaim"
	OwedRelease        = "release_intent"
	OwedConfirmLineage = "lineage_confirmation"
)

// Who owed work waits on.
const (
	WaitCoordinator = "coordinator"
	WaitCCS         = "ccs"
	WaitPublisher   = "publisher"
	WaitQueryPlane  = "query_plane"
	WaitOperator    = "operator"
)

// owedOf derives what is owed for c at asOf (pure) under policy p (the
// delivery bound of a release completion, the compaction policy a head was
// found idle under).
func owedOf(c Collection, asOf time.Time, p policy.Policy) []Owed {
	reaskAfter := p.ReleaseReaskAfter()
	out := []Owed{}
	now := asOf.UnixMilli()
	g := c.Current.GC
	if g != nil && g.Refused != "" {
		out = append(out, Owed{Kind: OwedConfirmLineage, WaitingOn: WaitOperator,
			Detail: "GC refuses the collection until an operator confirms the new lineage (bcc confirm-lineage): " + g.Refused})
	}
	if f := c.Desired.Facts; f != nil && f.Tombstoned {
		if !f.ReleaseIntentRecorded {
			out = append(out, releaseOwed(*f, c.Current.Cleanup, now, reaskAfter))
		}
		return out
	}
	if h, ob := c.Current.Head, c.Current.Observed; h != nil && (ob == nil || ob.Version < h.Version) {
		out = append(out, Owed{Kind: OwedObservation, SinceUnixMs: h.CommittedAtUnixMs, WaitingOn: WaitCoordinator,
			Detail: fmt.Sprintf("head v%d committed, not yet recorded by the observer (the next reconciliation records it)", h.Version)})
	}
	ob := c.Current.Observed
	if ob == nil {
		return out
	}
	d := ob.Debt
	if d.CompactionDue && ob.CompactionOwed(p.Compaction.Fingerprint()) {
		out = append(out, Owed{Kind: OwedCompaction, SinceUnixMs: d.CompactionDueSinceUnixMs, WaitingOn: WaitCoordinator,
			Detail: fmt.Sprintf("compaction due at v%d (%d objects); its cutover goes to the publisher when the merge is done", ob.Version, d.Objects)})
	}
	if d.TransitionDue {
		out = append(out, Owed{Kind: OwedTransition, SinceUnixMs: d.TransitionDueAtUnixMs, WaitingOn: WaitCoordinator,
			Detail: "an object is due for its lifecycle tier transition"})
	}
	if d.GCObjects > 0 && d.GCDueAtUnixMs > 0 && d.GCDueAtUnixMs <= now {
		o := Owed{Kind: OwedGC, SinceUnixMs: d.GCDueAtUnixMs, WaitingOn: WaitCoordinator,
			Detail: fmt.Sprintf("%d objects (%d bytes) of GC debt", d.GCObjects, d.GCBytes)}
		switch {
		case g != nil && g.Refused != "":
			o.WaitingOn, o.Detail = WaitOperator, o.Detail+"; GC refused (lineage confirmation)"
		case g != nil && g.Blocked != "":
			o.WaitingOn, o.Detail = WaitQueryPlane, o.Detail+"; blocked: "+g.Blocked
		}
		out = append(out, o)
	}
	if d.RetentionObjects > 0 && d.RetentionDueAtUnixMs > 0 && d.RetentionDueAtUnixMs <= now {
		out = append(out, Owed{Kind: OwedRetention, SinceUnixMs: d.RetentionDueAtUnixMs, WaitingOn: WaitCoordinator,
			Detail: fmt.Sprintf("%d objects past their lifecycle retention", d.RetentionObjects)})
	}
	return out
}

// releaseOwed is a dropped incarnation's release intent, owed since its
// tombstone, and who it waits on by the cleanup cursor and its dependency
// graph.
func releaseOwed(f contract.CollectionFacts, cl *gc.TombstoneProgress, now int64, reaskAfter time.Duration) Owed {
	o := Owed{Kind: OwedRelease, SinceUnixMs: f.EvictedAtUnixMs(), WaitingOn: WaitCoordinator}
	switch {
	case cl == nil:
		o.Detail = fmt.Sprintf("incarnation %d dropped; its cleanup has not started", f.Inc())
	case cl.Phase == gc.PhaseDone:
		o.WaitingOn = WaitCCS
		o.Detail = fmt.Sprintf("cleanup done; its completion was handed to the handoff at %s and CCS has not recorded the release",
			time.UnixMilli(cl.DoneAtUnixMs).UTC().Format(time.RFC3339))
		if at := cl.DoneAtUnixMs + reaskAfter.Milliseconds(); now >= at {
			o.WaitingOn = WaitCoordinator
			o.Detail += "; past the completion's delivery bound: the next reconciliation cleans and reports again"
		}
	case cl.Phase == gc.PhaseHead:
		o.WaitingOn = WaitPublisher
		o.Detail = fmt.Sprintf("cleanup of incarnation %d waits for the publisher to retire its head", cl.Incarnation)
	default:
		o.Detail = fmt.Sprintf("cleanup of incarnation %d at phase %s after %d runs", cl.Incarnation, cl.Phase, cl.Runs)
		for _, d := range cl.Dependencies {
			if d.State == contract.DependencyConfirmed {
				continue
			}
			if d.Name == contract.DepReservationHorizon || d.Name == contract.DepCCSPreconditions {
				o.WaitingOn = WaitCCS
			}
			o.Detail += fmt.Sprintf("; %s %s (%s)", d.Name, d.State, d.Evidence)
		}
	}
	return o
}
