package main

import (
	"reflect"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/core/status"
)

// The JSON output (--output json) of every command: one document per
// run, versioned, snake_case names, [] for an empty list, no null.
// docs/bcc.md "JSON output" describes it; events/bcc/<command>.json holds
// one example per command, decoded strictly by TestJSONExamples.

// schemaVersion is the version of every document below. A change that
// removes or renames a member, or changes its meaning, bumps it; a new
// member does not.
const schemaVersion = 1

// header opens every document.
type header struct {
	SchemaVersion int       `json:"schema_version"`
	Command       string    `json:"command"`
	AsOf          time.Time `json:"as_of"`
	Deployment    string    `json:"deployment"`
	// State is the document's verdict: the state model's for status, and
	// Running (nothing needs a person), Degraded or Unknown otherwise.
	State   status.State `json:"state"`
	Reasons []string     `json:"reasons"`
	// Unknown lists every source that could not be read (its part of the
	// document is Unknown, never guessed).
	Unknown []unknownSource `json:"unknown_sources"`
}

type unknownSource struct {
	Source string `json:"source"`
	Error  string `json:"error"`
}

// --- status ---

type statusDoc struct {
	header
	Queues      []queueView      `json:"queues"`
	Collections []collectionView `json:"collections"`
}

type queueView struct {
	Class string       `json:"class"`
	State status.State `json:"state"`
	// Queue and DLQ are the queues' URLs or names ("" for the observer's
	// failure queue, which has no main queue: its dead letters are the
	// head notifications whose observer invocations all failed).
	Queue       string `json:"queue"`
	Visible     int64  `json:"visible"`
	InFlight    int64  `json:"in_flight"`
	DLQ         string `json:"dlq"`
	DLQVisible  int64  `json:"dlq_visible"`
	DLQInFlight int64  `json:"dlq_in_flight"`
	Error       string `json:"error,omitempty"`
}

type collectionView struct {
	Collection       string                    `json:"collection"`
	State            status.State              `json:"state"`
	Reasons          []string                  `json:"reasons"`
	Unknown          []unknownSource           `json:"unknown_sources"`
	KnownToCCS       bool                      `json:"known_to_ccs"`
	Paused           bool                      `json:"paused"`
	Facts            *contract.CollectionFacts `json:"ccs_facts,omitempty"`
	Head             *contract.Head            `json:"head,omitempty"`
	Observed         *observedView             `json:"observed,omitempty"`
	GC               *status.GCView            `json:"gc,omitempty"`
	Leases           leaseCounts               `json:"leases"`
	ReconcilePreview *previewView              `json:"reconcile_preview,omitempty"`
	TombstoneCleanup *gc.TombstoneProgress     `json:"tombstone_cleanup,omitempty"`
	// Owed is what is owed, since when, and whether it waits on the
	// coordinator or on an owner (ccs, publisher, query_plane) or operator.
	Owed []status.Owed `json:"owed"`
}

type observedView struct {
	Incarnation      uint64   `json:"incarnation"`
	Version          uint64   `json:"version"`
	Checksum         string   `json:"checksum"`
	CommitTsUnixMs   int64    `json:"commit_ts_unix_ms"`
	ObservedAtUnixMs int64    `json:"observed_at_unix_ms"`
	FactsVersion     uint64   `json:"facts_version"`
	CompactionOwed   bool     `json:"compaction_owed"`
	Debt             debtView `json:"debt"`
}

type debtView struct {
	Objects                  int64   `json:"objects"`
	Bytes                    int64   `json:"bytes"`
	MaxFanOut                int64   `json:"max_fan_out"`
	DeleteDensity            float64 `json:"delete_density"`
	CompactionDue            bool    `json:"compaction_due"`
	CompactionDueSinceUnixMs int64   `json:"compaction_due_since_unix_ms"`
	GCObjects                int64   `json:"gc_objects"`
	GCBytes                  int64   `json:"gc_bytes"`
	GCDueAtUnixMs            int64   `json:"gc_due_at_unix_ms"`
	GCSweptAtUnixMs          int64   `json:"gc_swept_at_unix_ms"`
	RetentionObjects         int64   `json:"retention_objects"`
	RetentionDueAtUnixMs     int64   `json:"retention_due_at_unix_ms"`
	TombstoneActive          bool    `json:"tombstone_active"`
	TransitionDue            bool    `json:"transition_due"`
	TransitionDueAtUnixMs    int64   `json:"transition_due_at_unix_ms"`
}

func debtOf(d observe.Debt) debtView {
	return debtView{Objects: d.Objects, Bytes: d.Bytes, MaxFanOut: d.MaxFanOut, DeleteDensity: d.DeleteDensity, CompactionDue: d.CompactionDue,
		CompactionDueSinceUnixMs: d.CompactionDueSinceUnixMs, GCObjects: d.GCObjects, GCBytes: d.GCBytes, GCDueAtUnixMs: d.GCDueAtUnixMs,
		GCSweptAtUnixMs: d.GCSweptAtUnixMs, RetentionObjects: d.RetentionObjects, RetentionDueAtUnixMs: d.RetentionDueAtUnixMs,
		TombstoneActive: d.TombstoneActive, TransitionDue: d.TransitionDue, TransitionDueAtUnixMs: d.TransitionDueAtUnixMs}
}

func observedOf(o *observe.Observed) *observedView {
	if o == nil {
		return nil
	}
	return &observedView{Incarnation: contract.Lifetime(o.Incarnation), Version: o.Version, Checksum: o.Checksum, CommitTsUnixMs: o.CommitTsUnixMs,
		ObservedAtUnixMs: o.ObservedAtUnixMs, FactsVersion: o.FactsVersion, CompactionOwed: o.CompactionOwed(""), Debt: debtOf(o.Debt)}
}

type previewView struct {
	Outcome  string          `json:"outcome"`
	Version  uint64          `json:"version"`
	Previous uint64          `json:"previous"`
	Tasks    []contract.Task `json:"tasks"`
}

func previewOf(r *observe.Result) *previewView {
	if r == nil {
		return nil
	}
	return &previewView{Outcome: string(r.Outcome), Version: r.Version, Previous: r.Previous, Tasks: r.Tasks}
}

// leaseCounts summarise a collection's lease records by class.
type leaseCounts struct {
	Total   int          `json:"total"`
	Live    int          `json:"live"` // not lease-not-held
	ByClass []classCount `json:"by_class"`
}

type classCount struct {
	Class string `json:"class"`
	Count int    `json:"count"`
}

// --- leases and recover ---

type leasesDoc struct {
	header
	Leases []leaseView `json:"leases"`
}

type leaseView struct {
	Collection   string         `json:"collection"`
	Lease        contract.Lease `json:"lease"`
	Done         bool           `json:"done"`
	Class        lease.Class    `json:"class"`
	Detail       string         `json:"detail"`
	HeartbeatAge string         `json:"heartbeat_age,omitempty"`
	ExpiresIn    string         `json:"expires_in,omitempty"`
	Releasable   bool           `json:"releasable"`
}

func leaseOf(c string, r lease.Report) leaseView {
	return leaseView{Collection: c, Lease: r.Lease, Done: r.Done, Class: r.Class, Detail: r.Detail, HeartbeatAge: r.HeartbeatAge, ExpiresIn: r.ExpiresIn, Releasable: r.Releasable}
}

type recoverDoc struct {
	header
	DryRun bool             `json:"dry_run"`
	Leases []recoverOutcome `json:"leases"`
}

type recoverOutcome struct {
	leaseView
	Action  string `json:"action"`  // release, none, refuse: inspect by hand
	Outcome string `json:"outcome"` // dry-run, released, refused, left alone
	Result  string `json:"result"`
}

// --- plan and apply ---

// planDoc is bcc plan's output and apply's input (the plan file).
type planDoc struct {
	SchemaVersion int             `json:"schema_version"`
	Command       string          `json:"command"`
	Deployment    string          `json:"deployment"`
	State         status.State    `json:"state"`
	Reasons       []string        `json:"reasons"`
	Unknown       []unknownSource `json:"unknown_sources"`
	AsOf          time.Time       `json:"as_of"`
	Fingerprint   string          `json:"fingerprint"`
	// Scope is the --collection the plan was made for ("": the fleet).
	Scope   string          `json:"scope"`
	Intents []status.Intent `json:"intents"`
	Skipped []skipped       `json:"skipped"`
}

type skipped struct {
	Collection string `json:"collection"`
	Reason     string `json:"reason"`
}

type applyDoc struct {
	header
	Fingerprint string        `json:"fingerprint"`
	DryRun      bool          `json:"dry_run"`
	Intents     []applyResult `json:"intents"`
}

type applyResult struct {
	Intent  status.Intent `json:"intent"`
	Outcome string        `json:"outcome"` // dry-run, enqueued, released, refused, manual
	Detail  string        `json:"detail"`
}

// --- gc-plan ---

type gcPlanDoc struct {
	header
	Collection string `json:"collection"`
	// Refused is GC's refusal (nothing would be deleted); empty when GC
	// would run.
	Refused string  `json:"refused"`
	Plan    gc.Plan `json:"plan"`
	// planned: GC planned (Plan is its plan, possibly counted from an
	// unreadable source); false when it refused or could not read.
	planned bool
}

// --- compaction-plan ---

type compactionDoc struct {
	header
	Collections []compactionView `json:"collections"`
}

type compactionView struct {
	Collection string         `json:"collection"`
	State      status.State   `json:"state"`
	Error      string         `json:"error,omitempty"`
	Head       uint64         `json:"head_version"`
	Due        bool           `json:"due"`
	Debt       compactionDebt `json:"debt"`
	Jobs       []jobView      `json:"jobs"`
}

type compactionDebt struct {
	Levels        []levelDebt `json:"levels"`
	FanOut        float64     `json:"fan_out"`
	DeleteDensity float64     `json:"delete_density"`
	Score         float64     `json:"score"`
}

type levelDebt struct {
	Level         int     `json:"level"`
	Objects       int64   `json:"objects"`
	Bytes         int64   `json:"bytes"`
	FanOut        float64 `json:"fan_out"`
	DeleteDensity float64 `json:"delete_density"`
	Fragmentation float64 `json:"fragmentation"`
}

func compactionDebtOf(d compact.DebtReport) compactionDebt {
	v := compactionDebt{Levels: []levelDebt{}, FanOut: d.FanOut, DeleteDensity: d.DeleteDensity, Score: d.Score}
	for _, l := range d.Levels {
		v.Levels = append(v.Levels, levelDebt{Level: l.Level, Objects: l.Objects, Bytes: l.Bytes, FanOut: l.FanOut, DeleteDensity: l.DeleteDensity, Fragmentation: l.Fragmentation})
	}
	return v
}

type jobView struct {
	Reason      string   `json:"reason"`
	Tier        string   `json:"tier"`
	OutputLevel int      `json:"output_level"`
	DropDeletes bool     `json:"drop_deletes"`
	Debt        float64  `json:"debt"`
	Inputs      []string `json:"inputs"`
	Bytes       int64    `json:"bytes"`
}

// --- confirm-lineage ---

type confirmDoc struct {
	header
	Collection string `json:"collection"`
	// Needed: a regression exists to confirm; Recorded: it was recorded
	// (--yes).
	Needed       bool                          `json:"needed"`
	Recorded     bool                          `json:"recorded"`
	Confirmation *contract.LineageConfirmation `json:"confirmation,omitempty"`
}

// noNulls replaces every nil slice and map reachable from v (a pointer)
// by an empty one, so a document never says null for an empty list.
func noNulls(v any) {
	fill(reflect.ValueOf(v), 0)
}

func fill(v reflect.Value, depth int) {
	if depth > 32 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			fill(v.Elem(), depth+1)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if t.Field(i).IsExported() && v.Field(i).CanSet() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := range v.Len() {
			fill(v.Index(i), depth+1)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			return
		}
		// Map values are not addressable: copy, fill, store.
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			fill(e, depth+1)
			v.SetMapIndex(k, e)
		}
	}
}
