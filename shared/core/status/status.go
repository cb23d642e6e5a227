package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/store"
)

// State is seed 001's state model, narrowest provable state first.
type State string

// States.
const (
	// NotConfigured: no desired source: CCS has no facts for the
	// collection and it has no committed head.
	NotConfigured State = "NotConfigured"
	// Disabled: the policy explicitly pauses the collection
	// (paused_collections): nothing new is scheduled for it.
	Disabled State = "Disabled"
	// Starting: a head exists that the observer has never recorded (a new
	// collection, or the coordinator's state was wiped).
	Starting State = "Starting"
	// Running: observed, no known error, no stalled lease.
	Running State = "Running"
	// Degraded: active, with a known error: a dead-lettered message, a
	// stalled or contradictory lease, GC refused, a corrupt part.
	Degraded State = "Degraded"
	// Stopping: CCS tombstoned the collection and cleanup is outstanding
	// (objects to delete or deferred, live leases).
	Stopping State = "Stopping"
	// Stopped: tombstoned and nothing remains to clean up.
	Stopped State = "Stopped"
	// Unknown: a source this state depends on could not be read.
	Unknown State = "Unknown"
)

// Ports are the read-only sources of a snapshot.
type Ports struct {
	Catalog interface {
		Collections(ctx context.Context) ([]string, error)
	}
	Facts interface {
		Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
	}
	Heads interface {
		Head(ctx context.Context, collection string) (contract.Head, error)
	}
	Observed interface {
		Get(ctx context.Context, collection string) (observe.Observed, error)
	}
	// Preview is observe.Observer.Preview over read-only ports.
	Preview func(ctx context.Context, collection string) (observe.Result, observe.Observed, error)
	// GC is gc.PlanSweep over read-only ports.
	GC func(ctx context.Context, collection string, now time.Time) (gc.Plan, error)
	// Leases lists the lease records of a collection ("": of every
	// collection).
	Leases func(ctx context.Context, collection string) ([]lease.State, error)
	// Queue reads a queue's counts by class: the queue's and its DLQ's.
	Queue func(ctx context.Context, class string) (main, dlq QueueCounts, err error)
	// Classes are the queue classes to read.
	Classes []string
	// Cleanup reads a dropped incarnation's cleanup cursor (optional).
	Cleanup func(ctx context.Context, collection string, incarnation uint64) (gc.TombstoneProgress, error)
}

// QueueCounts are SQS's approximate counts of one queue.
type QueueCounts struct {
	Visible  int64 `json:"visible"`
	InFlight int64 `json:"in_flight"`
}

// Queue is one class's queue and DLQ.
type Queue struct {
	Class string      `json:"class"`
	Main  QueueCounts `json:"queue"`
	DLQ   QueueCounts `json:"dlq"`
	Error string      `json:"error,omitempty"`
	// OldestAge is not an SQS attribute (it is the CloudWatch metric
	// ApproximateAgeOfOldestMessage); peeking would change visibility.
	OldestAge string `json:"oldest_message_age"`
}

// Desired is what the owners and the policy ask for.
type Desired struct {
	Facts      *contract.CollectionFacts `json:"ccs_facts,omitempty"`
	FactsError string                    `json:"ccs_facts_error,omitempty"`
	KnownToCCS bool                      `json:"known_to_ccs"`
	Paused     bool                      `json:"paused"`
}

// GCView is the GC plan's summary.
type GCView struct {
	Refused          string         `json:"refused,omitempty"`
	Blocked          string         `json:"blocked,omitempty"`
	ListingError     string         `json:"listing_error,omitempty"`
	Deletable        int            `json:"deletable_now"`
	Deferred         int            `json:"deferred"`
	DeferredByReason map[string]int `json:"deferred_by_reason,omitempty"`
	NextDueUnixMs    int64          `json:"next_due_unix_ms,omitempty"`
	Orphans          int            `json:"orphans"`
	OrphansYoung     int            `json:"orphans_young"`
	Trimmable        int            `json:"trimmable_roots"`
	Remaining        []string       `json:"remaining_dependencies,omitempty"`
	CorruptParts     int            `json:"corrupt_parts,omitempty"`
	GlobalSafeTs     int64          `json:"global_safe_ts_unix_ms"`
	// Incarnation is the lifetime of the head GC judged; Lineage the
	// operator's confirmation of a head regression GC judged by (always
	// of that incarnation: a confirmation never crosses lifetimes).
	Incarnation uint64       `json:"incarnation"`
	Lineage     *LineageView `json:"lineage_confirmation,omitempty"`
	// LifecycleRetention is a dropped collection's release dependency
	// "lifecycle retention passed" as GC's plan sees it (nil: not dropped).
	LifecycleRetention *contract.Dependency `json:"lifecycle_retention_dependency,omitempty"`
}

// LineageView is an operator's lineage confirmation as status shows it.
type LineageView struct {
	Incarnation          uint64   `json:"incarnation"`
	HeadVersion          uint64   `json:"head_version"`
	AbandonedRoots       []string `json:"abandoned_roots"`
	AbandonedHeadVersion uint64   `json:"abandoned_head_version,omitempty"`
	ConfirmedBy          string   `json:"confirmed_by"`
	ConfirmedAtUnixMs    int64    `json:"confirmed_at_unix_ms"`
}

// LineageOf is g's lineage confirmation (nil for a nil view).
func (g *GCView) LineageOf() *LineageView {
	if g == nil {
		return nil
	}
	return g.Lineage
}

// Current is what the coordinator and the bucket show now.
type Current struct {
	Head          *contract.Head    `json:"head,omitempty"`
	HeadError     string            `json:"head_error,omitempty"`
	Observed      *observe.Observed `json:"observed,omitempty"`
	ObservedError string            `json:"observed_error,omitempty"`
	GC            *GCView           `json:"gc,omitempty"`
	GCError       string            `json:"gc_error,omitempty"`
	Leases        []lease.Report    `json:"leases"`
	LeasesError   string            `json:"leases_error,omitempty"`
	// Preview is what a reconciliation would see now (planning input).
	Preview      *observe.Result   `json:"reconcile_preview,omitempty"`
	PreviewState *observe.Observed `json:"-"`
	PreviewError string            `json:"reconcile_preview_error,omitempty"`
	// Cleanup is a dropped incarnation's cleanup cursor: its phase, runs
	// and the release dependency graph (each dependency, state, evidence).
	Cleanup      *gc.TombstoneProgress `json:"tombstone_cleanup,omitempty"`
	CleanupError string                `json:"tombstone_cleanup_error,omitempty"`
}

// Collection is one collection's snapshot.
type Collection struct {
	Name    string   `json:"collection"`
	State   State    `json:"state"`
	Reasons []string `json:"reasons"`
	Desired Desired  `json:"desired"`
	Current Current  `json:"current"`
	// Owed is what is owed for the collection, since when, and who it
	// waits on (owed.go).
	Owed []Owed `json:"owed"`
}

// Snapshot is the fleet's snapshot at one as_of.
type Snapshot struct {
	AsOf         time.Time `json:"as_of"`
	State        State     `json:"state"`
	Reasons      []string  `json:"reasons"`
	Queues       []Queue   `json:"queues"`
	CatalogError string    `json:"catalog_error,omitempty"`
	// LeasesError: the fleet's lease records could not be listed.
	LeasesError string       `json:"leases_error,omitempty"`
	Collections []Collection `json:"collections"`
}

// Options select what to collect.
type Options struct {
	// Collections: these only (empty: every collection CCS lists).
	Collections []string
	Policy      policy.Policy
	// SkipQueues leaves the fleet's queues out (per-collection commands).
	SkipQueues bool
	// Parallel bounds the collections read at once (default 8).
	Parallel int
}

// Collect reads every source and judges the snapshot at asOf.
func Collect(ctx context.Context, p Ports, o Options, asOf time.Time) Snapshot {
	s := Snapshot{AsOf: asOf.UTC(), Queues: []Queue{}, Collections: []Collection{}}
	names := o.Collections
	if len(names) == 0 {
		var err error
		names, err = p.Catalog.Collections(ctx)
		if err != nil {
			s.CatalogError = err.Error()
		}
	}
	names = slices.Clone(names)
	sort.Strings(names)
	if !o.SkipQueues && p.Queue != nil {
		for _, class := range p.Classes {
			q := Queue{Class: class, OldestAge: "unknown (CloudWatch ApproximateAgeOfOldestMessage)"}
			m, d, err := p.Queue(ctx, class)
			if err != nil {
				q.Error = err.Error()
			}
			q.Main, q.DLQ = m, d
			s.Queues = append(s.Queues, q)
		}
	}
	timing := lease.Timing{ClockSkew: o.Policy.ClockSkew.D()}
	// The fleet: one listing of every lease (a Scan per collection would
	// read the table once per collection), and every collection a lease
	// record names is in the snapshot too, listed by CCS or not (a lease
	// is never hidden because the catalog is unreadable or forgot it).
	leasesOf := func(ctx context.Context, c string) ([]lease.State, error) { return p.Leases(ctx, c) }
	if len(o.Collections) == 0 || len(names) > 1 {
		all, err := p.Leases(ctx, "")
		byColl := map[string][]lease.State{}
		for _, st := range all {
			byColl[st.Lease.Collection] = append(byColl[st.Lease.Collection], st)
		}
		leasesOf = func(context.Context, string) ([]lease.State, error) { return nil, err }
		if err == nil {
			leasesOf = func(_ context.Context, c string) ([]lease.State, error) { return byColl[c], nil }
		} else {
			s.LeasesError = err.Error()
		}
		if len(o.Collections) == 0 {
			for c := range byColl {
				if c != "" && !slices.Contains(names, c) {
					names = append(names, c)
				}
			}
			sort.Strings(names)
		}
	}
	// Collections are read concurrently (bounded): each one's reads are
	// independent, and a fleet of thousands read one by one takes minutes.
	s.Collections = make([]Collection, len(names))
	par := o.Parallel
	if par <= 0 {
		par = 8
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.Collections[i] = collect(ctx, p, o, n, asOf, timing, leasesOf)
		}()
	}
	wg.Wait()
	s.State, s.Reasons = judgeFleet(s)
	return s
}

func collect(ctx context.Context, p Ports, o Options, name string, asOf time.Time, timing lease.Timing,
	leasesOf func(context.Context, string) ([]lease.State, error)) Collection {
	c := Collection{Name: name, Current: Current{Leases: []lease.Report{}}}
	c.Desired.Paused = o.Policy.PausedCollections.Contains(name)
	f, err := p.Facts.Facts(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		c.Desired.FactsError = err.Error()
	default:
		c.Desired.Facts, c.Desired.KnownToCCS = &f, true
	}
	if f := c.Desired.Facts; f != nil && f.Tombstoned && p.Cleanup != nil {
		if prog, err := p.Cleanup(ctx, name, f.Inc()); err != nil {
			c.Current.CleanupError = err.Error()
		} else if prog.Seq > 0 {
			c.Current.Cleanup = &prog
		}
	}
	noHead := false
	if h, err := p.Heads.Head(ctx, name); errors.Is(err, store.ErrNotFound) {
		noHead = true
	} else if err != nil {
		c.Current.HeadError = err.Error()
	} else {
		c.Current.Head = &h
	}
	if st, err := p.Observed.Get(ctx, name); err != nil {
		c.Current.ObservedError = err.Error()
	} else if st.Version != 0 {
		c.Current.Observed = &st
	}
	// A dropped lifetime's head is retired before its cleanup deletes
	// anything: GC's plan then shows what the cleanup holds from its
	// newest root (gc.PlanSweep), so it is asked while a cleanup is there.
	if dropped := c.Desired.Facts != nil && c.Desired.Facts.Tombstoned && c.Current.Cleanup != nil; !noHead || dropped {
		if plan, err := p.GC(ctx, name, asOf); noHead && err != nil {
			// No lineage of the dropped lifetime left to plan from: the
			// cleanup's cursor says what is left.
		} else if err != nil && !errors.Is(err, gc.ErrRefused) {
			c.Current.GCError = err.Error()
		} else {
			v := &GCView{Deletable: len(plan.Delete), Deferred: plan.DeferredCount, DeferredByReason: plan.DeferredByReason,
				NextDueUnixMs: plan.NextDueUnixMs(), Orphans: len(plan.Orphans), OrphansYoung: plan.OrphansYoung, Trimmable: len(plan.Trim),
				Remaining: plan.Remaining, CorruptParts: len(plan.CorruptParts), Blocked: plan.Blocked, ListingError: plan.ListingError, GlobalSafeTs: plan.GlobalSafeTsUnixMs,
				LifecycleRetention: plan.LifecycleRetention}
			if err != nil {
				v.Refused = err.Error()
			}
			v.Incarnation = contract.Lifetime(plan.Incarnation)
			if l := plan.Confirmation; l != nil {
				v.Lineage = &LineageView{Incarnation: l.Inc(), HeadVersion: l.HeadVersion, AbandonedRoots: l.AbandonedRoots,
					AbandonedHeadVersion: l.AbandonedHeadVersion, ConfirmedBy: l.ConfirmedBy, ConfirmedAtUnixMs: l.ConfirmedAtUnixMs}
			}
			c.Current.GC = v
		}
	}
	if !noHead {
		if res, cur, err := p.Preview(ctx, name); err != nil {
			c.Current.PreviewError = err.Error()
		} else {
			c.Current.Preview, c.Current.PreviewState = &res, &cur
		}
	}
	ev := lease.Evidence{NoHead: noHead, HeadErr: c.Current.HeadError, FactsErr: c.Desired.FactsError}
	if h := c.Current.Head; h != nil {
		ev.HeadVersion, ev.HeadChecksum = h.Version, h.ManifestChecksum
	}
	if f := c.Desired.Facts; f != nil {
		ev.Tombstoned = f.Tombstoned
	}
	if ls, err := leasesOf(ctx, name); err != nil {
		c.Current.LeasesError = err.Error()
	} else {
		for _, st := range ls {
			c.Current.Leases = append(c.Current.Leases, lease.Classify(st, ev, asOf, timing))
		}
		sort.Slice(c.Current.Leases, func(i, j int) bool { return c.Current.Leases[i].Lease.TaskID < c.Current.Leases[j].Lease.TaskID })
	}
	c.State, c.Reasons = judge(c, noHead)
	c.Owed = owedOf(c, asOf, o.Policy)
	return c
}

// Unreadable is one source of a collection that could not be read.
type Unreadable struct{ What, Err string }

// UnreadableSources are the sources of c that could not be read. They
// include what GC's plan could not read: the watermark (GC deletes
// nothing: blocked) and the data listing (nothing proposed as
// never-committed); a plan counted from either is a blind read.
func UnreadableSources(c Collection) []Unreadable {
	var out []Unreadable
	for _, e := range []Unreadable{
		{"ccs facts", c.Desired.FactsError}, {"head", c.Current.HeadError}, {"observed state", c.Current.ObservedError},
		{"gc plan", c.Current.GCError}, {"leases", c.Current.LeasesError}, {"tombstone cleanup progress", c.Current.CleanupError},
	} {
		if e.Err != "" {
			out = append(out, e)
		}
	}
	if g := c.Current.GC; g != nil {
		out = append(out, GCUnreadable(g.Blocked, g.ListingError)...)
	}
	return out
}

// GCUnreadable are the sources a GC plan could not read, from its Blocked
// and ListingError: the watermark (nothing is deleted), the data listing
// (nothing is proposed as never-committed), or whatever else blocked it.
func GCUnreadable(blocked, listingErr string) []Unreadable {
	var out []Unreadable
	if rest, ok := strings.CutPrefix(blocked, gc.BlockedWatermark); ok {
		out = append(out, Unreadable{"watermark", rest})
	} else if blocked != "" {
		out = append(out, Unreadable{"gc plan (blocked)", blocked})
	}
	if listingErr != "" {
		out = append(out, Unreadable{"data listing", listingErr})
	}
	return out
}

// judge decides one collection's state from what was read.
func judge(c Collection, noHead bool) (State, []string) {
	var unknown []string
	for _, e := range UnreadableSources(c) {
		unknown = append(unknown, fmt.Sprintf("%s unreadable: %s", e.What, e.Err))
	}
	if len(unknown) > 0 {
		return Unknown, unknown
	}
	if !c.Desired.KnownToCCS && noHead {
		return NotConfigured, []string{"CCS has no facts for the collection and it has no committed head"}
	}
	live := 0
	var stalled []string
	for _, r := range c.Current.Leases {
		if r.Class != lease.ClassNotHeld {
			live++
		}
		if r.Class != lease.ClassHealthy && r.Class != lease.ClassNotHeld {
			stalled = append(stalled, fmt.Sprintf("lease %s is %s: %s", r.Lease.TaskID, r.Class, r.Detail))
		}
	}
	if f := c.Desired.Facts; f != nil && f.Tombstoned {
		var left []string
		if g := c.Current.GC; g != nil {
			if g.Refused != "" {
				left = append(left, "gc refused: "+g.Refused)
			}
			if n := g.Deletable + g.Deferred + g.Orphans + g.OrphansYoung; n > 0 {
				left = append(left, fmt.Sprintf("%d objects to delete (%d now, %d deferred, %d never-committed outputs)", n, g.Deletable, g.Deferred, g.Orphans+g.OrphansYoung))
			}
			if d := g.LifecycleRetention; d != nil && d.State != contract.DependencyConfirmed {
				left = append(left, fmt.Sprintf("%s %s (%s)", d.Name, d.State, d.Evidence))
			}
		}
		if live > 0 {
			left = append(left, fmt.Sprintf("%d live leases", live))
		}
		if cl := c.Current.Cleanup; cl != nil {
			deps := make([]string, 0, len(cl.Dependencies))
			for _, d := range cl.Dependencies {
				deps = append(deps, fmt.Sprintf("%s %s (%s)", d.Name, d.State, d.Evidence))
			}
			if cl.Phase == gc.PhaseDone && len(left) == 0 {
				return Stopped, append([]string{fmt.Sprintf("incarnation %d dropped by CCS; cleaned in %d runs, release intent requested (facts v%d)", cl.Incarnation, cl.Runs, cl.DoneFactsVersion)}, deps...)
			}
			if cl.Phase != gc.PhaseDone {
				left = append(left, fmt.Sprintf("cleanup of incarnation %d at phase %s after %d runs", cl.Incarnation, cl.Phase, cl.Runs))
				left = append(left, deps...)
			}
		} else if !noHead || len(left) > 0 {
			left = append(left, "tombstone cleanup not started")
		}
		if len(left) > 0 {
			return Stopping, append([]string{fmt.Sprintf("tombstoned by CCS (facts v%d); cleanup outstanding", f.FactsVersion)}, left...)
		}
		return Stopped, []string{fmt.Sprintf("tombstoned by CCS (facts v%d); nothing remains to clean up", f.FactsVersion)}
	}
	if c.Desired.Paused {
		return Disabled, []string{"paused by the policy (paused_collections): nothing new is scheduled"}
	}
	if noHead {
		return NotConfigured, []string{"CCS knows the collection but it has no committed head yet"}
	}
	h := c.Current.Head
	if c.Current.Observed == nil {
		return Starting, []string{fmt.Sprintf("head v%d committed, not yet recorded by the observer", h.Version)}
	}
	var bad []string
	if g := c.Current.GC; g != nil {
		if g.Refused != "" {
			bad = append(bad, "gc refused: "+g.Refused)
		}
		if g.CorruptParts > 0 {
			bad = append(bad, fmt.Sprintf("%d corrupt manifest parts", g.CorruptParts))
		}
	}
	if ob := c.Current.Observed; ob.Version > h.Version {
		bad = append(bad, fmt.Sprintf("head v%d is below the observed v%d", h.Version, ob.Version))
	}
	bad = append(bad, stalled...)
	if len(bad) > 0 {
		return Degraded, bad
	}
	reasons := []string{fmt.Sprintf("head v%d, observed v%d, %d live leases", h.Version, c.Current.Observed.Version, live)}
	if c.Current.Observed.Version < h.Version {
		reasons = append(reasons, fmt.Sprintf("the observer has not yet recorded v%d", h.Version))
	}
	return Running, reasons
}

// judgeFleet decides the deployment's state: Unknown when a fleet source
// or any collection is unknown, Degraded when a DLQ holds messages or any
// collection is degraded.
func judgeFleet(s Snapshot) (State, []string) {
	var unknown, degraded []string
	if s.CatalogError != "" {
		unknown = append(unknown, "CCS collection list unreadable: "+s.CatalogError)
	}
	if s.LeasesError != "" {
		unknown = append(unknown, "lease records unreadable: "+s.LeasesError)
	}
	for _, q := range s.Queues {
		switch {
		case q.Error != "":
			unknown = append(unknown, fmt.Sprintf("%s queue unreadable: %s", q.Class, q.Error))
		case q.DLQ.Visible+q.DLQ.InFlight > 0:
			degraded = append(degraded, fmt.Sprintf("%s DLQ holds %d messages", q.Class, q.DLQ.Visible+q.DLQ.InFlight))
		}
	}
	count := map[State]int{}
	for _, c := range s.Collections {
		count[c.State]++
		switch c.State {
		case Unknown:
			unknown = append(unknown, fmt.Sprintf("%s: %s", c.Name, c.Reasons[0]))
		case Degraded:
			degraded = append(degraded, fmt.Sprintf("%s: %s", c.Name, c.Reasons[0]))
		}
	}
	switch {
	case len(unknown) > 0:
		return Unknown, append(unknown, degraded...)
	case len(degraded) > 0:
		return Degraded, degraded
	case len(s.Collections) == 0:
		return NotConfigured, []string{"no collections"}
	}
	var parts []string
	for _, st := range []State{Starting, Running, Disabled, Stopping, Stopped, NotConfigured} {
		if count[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
		}
	}
	return Running, []string{fmt.Sprintf("%d collections: %s", len(s.Collections), strings.Join(parts, ", "))}
}
