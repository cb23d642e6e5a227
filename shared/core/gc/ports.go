package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/policy"
)

// Objects reads objects (the data bucket).
type Objects interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// Lineage reads the committed lineage: the head, roots verified against the
// checksum that names them, parts verified as they are read, all strictly
// decoded. Production uses *lineage.Reader; nothing in this package ever
// reads a manifest another way.
type Lineage interface {
	Head(ctx context.Context, collection string) (contract.Head, error)
	WalkFrom(ctx context.Context, collection string, floor uint64) (lineage.Walk, error)
	// WalkFromHead walks from a head read before (a retired head);
	// RootAt reads a root no head names, verified against its key.
	WalkFromHead(ctx context.Context, h contract.Head, floor uint64) (lineage.Walk, error)
	RootAt(ctx context.Context, collection, key string) (contract.Manifest, error)
	RootAtSum(ctx context.Context, collection, key string) (contract.Manifest, string, error)
	Lookup(ctx context.Context, m *contract.Manifest, objectKey string) (contract.ObjectEntry, bool, error)
	Each(ctx context.Context, m *contract.Manifest, keep func(contract.PartRef) bool, fn func(contract.ObjectEntry) error) error
	// VerifyPart reads the part at ref.Key and verifies it; Verified says
	// whether this reader already read and verified the part at key.
	VerifyPart(ctx context.Context, ref contract.PartRef) error
	Verified(key string) bool
	// EachChange streams a root's change entries of one kind (inline or
	// in change parts, one part at a time); ChangeHolds looks one key up
	// in it; VerifyChangePart reads and verifies one change part.
	EachChange(ctx context.Context, m *contract.Manifest, kind string, fn func(contract.ObjectEntry) error) error
	ChangeHolds(ctx context.Context, m *contract.Manifest, kind, objectKey string) (bool, error)
	VerifyChangePart(ctx context.Context, m *contract.Manifest, ref contract.ChangePartRef) error
}

// Listed is one key a listing proposed.
type Listed struct {
	Key          string
	LastModified time.Time
}

// ErrStopListing, returned by a page callback, ends a listing early
// without error.
var ErrStopListing = errors.New("stop listing")

// Lister proposes keys under a prefix, one page at a time (memory: one
// page). A listing is never the truth about what is live or what may be
// deleted (rule 5): every proposed key is checked against the committed
// lineage before anything happens to it.
type Lister interface {
	List(ctx context.Context, prefix string, page func([]Listed) error) error
}

// DeleteResult is one DeleteObjects call's answer: keys confirmed gone (a
// key that was already gone counts) and keys that failed with their reason.
type DeleteResult struct {
	Deleted []string
	Failed  map[string]string
}

// Deleter is the delete port: one DeleteObjects call of a ProvenBatch (up
// to awslimit.S3DeleteObjectsMaxKeys keys). It accepts nothing else: only
// the gate makes a ProvenBatch, after every wait (gate_send.go). An
// implementation refuses a batch whose proof is stale when it would send
// it (ProvenBatch.Fresh, an error wrapping ErrStaleProof: nothing sent),
// checks again on every attempt its SDK makes, and bounds those attempts
// by the proof's Remaining time.
type Deleter interface {
	DeleteProven(ctx context.Context, b ProvenBatch) (DeleteResult, error)
}

// FactsSource reads CCS scheduling facts (lifecycle retention, tombstone).
type FactsSource interface {
	Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
}

// WatermarkSource reads the query plane's published global_safe_ts.
type WatermarkSource interface {
	Watermark(ctx context.Context) (contract.Watermark, error)
}

// Memory is what the coordinator remembers of a collection's lineage:
// the highest head it observed (version and checksum; version 0: none)
// and an operator's confirmation of a head regression. It is disposable
// state: when it is lost, the roots that exist above the head are still
// evidence of a regression (fail closed). Both are per lifetime of the
// name: a confirmation is asked for, and applied to, the head's
// incarnation only (guard.LineageIncarnation).
type Memory interface {
	HighestObserved(ctx context.Context, collection string, incarnation uint64) (version uint64, checksum string, err error)
	LineageConfirmation(ctx context.Context, collection string, incarnation uint64) (contract.LineageConfirmation, bool, error)
}

// UnverifiedMemory is the memory's head an observer advanced from over a
// gap without checking descent (observe/descent.go): GC judges it against
// the lineage it walks, as it judges the highest observed head, and
// clears it once the lineage holds it (optional: without it only the
// highest observed head is remembered).
type UnverifiedMemory interface {
	UnverifiedFrom(ctx context.Context, collection string, incarnation uint64) (version uint64, checksum string, err error)
	ClearUnverified(ctx context.Context, collection string, incarnation, version uint64, checksum string) error
}

// SweepRecord is what a finished sweep left of one incarnation's debt:
// GC debt (RemainingObjects, due at NextDueUnixMs; 0: none) and the
// lifecycle retention window (RetentionObjects, due at
// RetentionDueUnixMs), which reconciliation schedules as its own class
// (retention_reclaim).
//
// HeadVersion is the head the record is for (the swept head, or the
// observed head it was carried forward to). Without Added the record
// replaces the debt only while the observed state still holds that head:
// an observation that advanced the state meanwhile added debt the record
// never saw; replacing it would lose that debt until the next periodic
// sweep. With Added (the state's running totals of the debt its advances
// added, read while it held HeadVersion: SweptHeadMovedError) the record
// applies while the state holds HeadVersion or any later head: the debt
// the later advances added is kept by difference, because the totals grew
// by exactly that much. Such a record is not tied to the head standing
// still, so a writer that commits between every attempt cannot keep it
// from landing.
type SweepRecord struct {
	Collection                           string
	Incarnation                          uint64
	HeadVersion                          uint64
	HeadChecksum                         string // of the head the record is for (empty: any checksum)
	RemainingObjects, RemainingBytes     int64
	NextDueUnixMs                        int64
	RetentionObjects, RetentionDueUnixMs int64
	SweptAtUnixMs                        int64
	Added                                *AddedTotals
}

// AddedTotals are an observed state's running totals of the GC debt its
// advances added (never reset: observe.Debt.GCAddedObjects).
type AddedTotals struct{ Objects, Bytes int64 }

// SweepRecorder records what a finished sweep left (disposable debt
// state). A record without Added applies only while the observed state
// still holds the head it is for (HeadVersion, and HeadChecksum when set);
// one with Added while the state holds that head or a later one.
// Otherwise RecordGCSweep returns a *SweptHeadMovedError naming the head
// the state holds and its totals (nil when there is no state: wiped,
// reconciliation rebuilds it). A record with Added that landed while
// advances added debt after the totals were read returns a
// *SweepRecordRacedError: their debt is counted, but the due time the
// record wrote may be later than theirs, so the caller lowers it
// (LowerGCDue). LowerGCDue makes the recorded due time of the GC debt at
// most due (set when none is recorded); lowering is always safe, a due
// time only says when reconciliation sweeps.
type SweepRecorder interface {
	RecordGCSweep(ctx context.Context, sw SweepRecord) error
	LowerGCDue(ctx context.Context, collection string, incarnation uint64, dueUnixMs int64) error
}

// SweptHeadMovedError: the observed state holds another head than the one
// a sweep record is for (the observer recorded newer commits during the
// sweep, or has not yet recorded the swept head). Added are its running
// totals of the debt advances added, read with that head (one item, one
// read).
type SweptHeadMovedError struct {
	Collection string
	Version    uint64
	Checksum   string
	Added      AddedTotals
}

func (e *SweptHeadMovedError) Error() string {
	return fmt.Sprintf("record gc sweep of %s: the observed state holds v%d %s", e.Collection, e.Version, e.Checksum)
}

// SweepRecordRacedError: a sweep record with Added landed, and advances
// up to Version (Checksum) added debt after its totals were read.
type SweepRecordRacedError struct {
	Collection string
	Version    uint64
	Checksum   string
}

func (e *SweepRecordRacedError) Error() string {
	return fmt.Sprintf("gc sweep record of %s landed while the observer recorded heads up to v%d %s", e.Collection, e.Version, e.Checksum)
}

// CompletionSink reports a deleting task's completion to the handoff (its
// message identity is contract.CompletionID).
type CompletionSink interface {
	Report(ctx context.Context, c contract.Completion) error
}

// WatermarkObject reads the watermark from one object, strictly.
type WatermarkObject struct {
	Objects Objects
	Key     string
}

// Watermark reads and decodes the watermark object.
func (w WatermarkObject) Watermark(ctx context.Context) (contract.Watermark, error) {
	b, err := lineage.GetLimited(ctx, w.Objects, "watermark", w.Key, contract.MaxWatermarkBytes)
	if err != nil {
		return contract.Watermark{}, fmt.Errorf("read watermark %s: %w", w.Key, err)
	}
	return contract.DecodeWatermark(w.Key, b)
}

// Sightings are when the coordinator first saw each tombstone, by
// (collection, incarnation, CCS's tombstone time, CCS facts version): a tombstone's objects
// count as evicted no earlier than that (rule 16: a time another owner
// asserts never opens a gate on its own). Disposable: a lost sighting is
// recorded again, later (a tombstone is then seen later, never earlier).
type Sightings interface {
	// FirstSighting reads the recorded sighting (ok false: none).
	FirstSighting(ctx context.Context, collection string, incarnation uint64, tombstonedAt int64, factsVersion uint64) (at int64, ok bool, err error)
	// FirstConfirmationSighting reads when the coordinator first saw an
	// operator's lineage confirmation (ConfirmationID; ok false: none).
	FirstConfirmationSighting(ctx context.Context, collection string, incarnation uint64, id string) (at int64, ok bool, err error)
}

// SightingRecorder also records sightings.
type SightingRecorder interface {
	Sightings
	// RecordSighting records at as the first sighting unless one is
	// recorded, and returns the one kept.
	RecordSighting(ctx context.Context, collection string, incarnation uint64, tombstonedAt int64, factsVersion uint64, at int64) (int64, error)
	// RecordConfirmationSighting records at as the first sighting of the
	// confirmation id unless one is recorded, and returns the one kept.
	RecordConfirmationSighting(ctx context.Context, collection string, incarnation uint64, id string, at int64) (int64, error)
}

// ConfirmationID names one lineage confirmation for its sighting: the
// restored head it confirms and the time written into it.
func ConfirmationID(c contract.LineageConfirmation) string {
	return fmt.Sprintf("%d#%s#%d", c.HeadVersion, c.HeadChecksum, c.ConfirmedAtUnixMs)
}

// ReadPorts are everything a plan needs. They can only read: a plan (and
// the CLI, which gets nothing else) cannot change anything (rule 10).
type ReadPorts struct {
	Objects Objects
	Lineage Lineage // optional: a lineage.Reader over Objects
	Lister  Lister  // optional: without it nothing is proposed as never-committed (nor found above the head)
	Memory  Memory  // optional: the highest head version observed, lineage confirmations
	// Seen reads first sightings of tombstones (optional: without it a
	// tombstone counts as first seen now).
	Seen      Sightings
	Facts     FactsSource
	Watermark WatermarkSource
}

// Ports are everything the executor needs.
type Ports struct {
	ReadPorts
	Deleter     Deleter
	Sweeps      SweepRecorder  // optional
	Completions CompletionSink // optional (tombstone cleanup completions)
	// Budget is the fleet-wide delete budget (optional: without it the
	// global rate holds per instance only).
	Budget FleetBudget
	// PrefixBudget is the S3 per-prefix write budget a delete batch also
	// takes, before its proof (optional).
	PrefixBudget PrefixTaker
	Progress     ProgressStore // tombstone cleanup cursors (required for tombstone_cleanup tasks)
	Heads        HeadRetirer   // the Manifest Publisher: retires a dropped incarnation's head pointer
	// Sightings records first sightings of tombstones (optional: without
	// it every run counts a tombstone from its own start, later still).
	Sightings SightingRecorder
	// Continuations enqueue the next slice of a sweep that stopped at its
	// bound (optional: without it the next reconciliation continues).
	Continuations TaskQueue
}

// TaskQueue enqueues tasks to their FIFO queue.
type TaskQueue interface {
	Enqueue(ctx context.Context, tasks []contract.Task) error
}

// Config tunes GC.
type Config struct {
	TokenLifetime   time.Duration // a superseded manifest stays openable this long
	RetentionWindow time.Duration // evict_commit_ts < global_safe_ts - RetentionWindow
	MaxTaskLifetime time.Duration // a rewrite task runs at most this long
	ClockSkew       time.Duration // bound on the skew between any two clocks
	// CutoverDeadline is how long after a rewrite task started a publisher
	// may still apply its cutover (the request's not_after). A
	// never-committed output is reclaimed only once that moment has passed
	// on every clock: its write time + CutoverDeadline + 2 x ClockSkew
	// (guard.CutoverDeadline), and never before MaxTaskLifetime + ClockSkew.
	CutoverDeadline time.Duration
	BatchSize       int           // keys per DeleteObjects call (<= awslimit.S3DeleteObjectsMaxKeys)
	MaxAttempts     int           // attempts per key before the task fails
	RetryBackoff    time.Duration // first retry backoff (doubles)
	RetryAfter      time.Duration // next due time when blocked (unreadable watermark)
	PartCache       int           // verified parts cached by the lineage reader
	// ProofMaxAge bounds how old the eligibility proof behind a delete call
	// may be when the call is made: every call, retries included, rests on
	// a head (and gates) read at most this long before (guard.FreshProof).
	ProofMaxAge time.Duration
	// MaxSweepCandidates bounds the deletes of one sweep: eligible
	// candidates already gone do not count (it holds at most twice this
	// many while a listing tells which still exist); a sweep that finds
	// more deletes these and reports the rest as debt due now, so the
	// next sweep continues.
	MaxSweepCandidates int
	// TombstoneRunBudget and TombstoneMaxCalls bound one run of a
	// tombstone cleanup (wall time on the executor's clock, delete
	// calls); the next run resumes from the stored cursor.
	TombstoneRunBudget time.Duration
	TombstoneMaxCalls  int
	// ReleaseReaskAfter: a cleanup closed as done this long ago whose
	// release CCS has not recorded runs again and reports again
	// (policy.Policy.ReleaseReaskAfter; guard.ReleaseReask).
	ReleaseReaskAfter time.Duration
	Guards            guard.Set
}

// ConfigFrom is GC's configuration under a validated policy, with guards g.
func ConfigFrom(p policy.Policy, g guard.Set) Config {
	return Config{TokenLifetime: p.GC.TokenLifetime.D(), RetentionWindow: p.GC.RetentionWindow.D(), MaxTaskLifetime: p.MaxTaskLifetime.D(),
		ClockSkew: p.ClockSkew.D(), CutoverDeadline: p.CutoverDeadline.D(), BatchSize: p.GC.BatchSize, MaxAttempts: p.GC.MaxAttempts,
		RetryBackoff: p.GC.RetryBackoff.D(), RetryAfter: p.GC.RetryAfter.D(), PartCache: p.GC.PartCache, ProofMaxAge: p.GC.ProofMaxAge.D(),
		MaxSweepCandidates: p.GC.MaxSweepCandidates, TombstoneRunBudget: TombstoneBudget(p), TombstoneMaxCalls: p.GC.TombstoneMaxCalls,
		ReleaseReaskAfter: p.ReleaseReaskAfter(), Guards: g}
}

// TombstoneBudget is the time budget of one tombstone cleanup run under p:
// gc.tombstone_run_budget_ms, capped at 80% of the GC function's timeout.
func TombstoneBudget(p policy.Policy) time.Duration {
	limit := p.Functions.GCTimeout.D() * 4 / 5
	if b := p.GC.TombstoneRunBudget.D(); b > 0 && b < limit {
		return b
	}
	return limit
}

// DefaultConfig is the production default (guards all on).
func DefaultConfig() Config { return ConfigFrom(policy.Default(), guard.All()) }

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.BatchSize <= 0 || c.BatchSize > awslimit.S3DeleteObjectsMaxKeys {
		c.BatchSize = d.BatchSize
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = d.RetryBackoff
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = d.RetryAfter
	}
	if c.PartCache <= 0 {
		c.PartCache = d.PartCache
	}
	if c.ProofMaxAge <= 0 {
		c.ProofMaxAge = d.ProofMaxAge
	}
	if c.CutoverDeadline < c.MaxTaskLifetime {
		c.CutoverDeadline = c.MaxTaskLifetime
	}
	if c.MaxSweepCandidates <= 0 {
		c.MaxSweepCandidates = d.MaxSweepCandidates
	}
	if c.TombstoneRunBudget <= 0 {
		c.TombstoneRunBudget = d.TombstoneRunBudget
	}
	if c.TombstoneMaxCalls <= 0 {
		c.TombstoneMaxCalls = d.TombstoneMaxCalls
	}
	if c.ReleaseReaskAfter <= 0 {
		c.ReleaseReaskAfter = d.ReleaseReaskAfter
	}
	return c
}

// lineageOf is the lineage port of rp, defaulting to a verified reader.
func lineageOf(rp ReadPorts, cfg Config) Lineage {
	if rp.Lineage != nil {
		return rp.Lineage
	}
	return lineage.New(rp.Objects, cfg.PartCache)
}
