package sim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/testkit/memaws"
)

// Policy is the simulated deployment's policy: production's defaults
// (policy.Default) with tiny objects and delete batches, so that every path
// (splits, several parts, several batches) runs with a few records, a
// shorter GC sweep interval, and short function timeouts, so that the queue
// visibility timeouts derived from them (resources.For) are minutes.
// Everything runs on the simulated clock; functions see it through their
// own skewed clock (bounded by ClockSkew).
func Policy() policy.Policy {
	p := policy.Default()
	p.Compaction.TargetObjectBytes = 400
	// A reported rewrite holds its group a few polls for its cutover (the
	// handoff runs when the schedule says: the wait mostly times out).
	p.Compaction.ResultWait = policy.Duration(200 * time.Millisecond)
	p.GC.SweepInterval = policy.Duration(30 * time.Minute)
	p.GC.BatchSize, p.GC.MaxAttempts, p.GC.PartCache = 3, 3, 64
	p.Functions.CompactionTimeout = policy.Duration(40 * time.Second) // visibility 4m
	p.Functions.GCTimeout = policy.Duration(40 * time.Second)         // visibility 4m
	p.Functions.HandoffTimeout = policy.Duration(20 * time.Second)    // visibility 2m
	// One slot per class: a crashed holder's slot (held until its lease
	// end, the timeout plus clock skew) defers its class's other tasks.
	p.Budgets.ClassConcurrency = policy.ClassConcurrency{Compaction: 1, LifecycleTransition: 1, GC: 1, RetentionReclaim: 1, TombstoneCleanup: 1}
	return p
}

// boundedSweeps is the gc.max_sweep_candidates of a seed's world (0: the
// policy's). Every third seed runs with a bound of 1 to 6 candidates, so
// that sweeps stop at their bound, continue, and must still reclaim a
// backlog larger than the bound (and trim the roots behind it) by the end
// of the quiescent phase. Derived from the seed alone: the schedule's
// random stream is the same as without it.
// conflictChecked says whether a seed's world runs the publisher's
// conflict check (every even seed; derived from the seed alone, so the
// schedule's random stream is the same either way).
func conflictChecked(seed uint64) bool { return seed%2 == 0 }

func boundedSweeps(seed uint64) int {
	if seed%3 != 2 {
		return 0
	}
	return 1 + int(seed/3%6)
}

const (
	// WatermarkKey is where the simulated query plane publishes global_safe_ts.
	WatermarkKey = "query-plane/global_safe_ts.json"
	startMs      = int64(1_760_000_000_000)
)

// Config is one simulation run.
type Config struct {
	Seed   uint64
	Steps  int       // faulty steps before the quiescent phase (default 60)
	Guards guard.Set // the use cases' guards (guard.All() in production)
	// HandoffRaces lets head-moving actions (appends, other cutovers) run
	// inside the handoff's judge-then-cutover window. With a permissive
	// publisher (AcceptRebase) that window is a race the coordinator cannot
	// close; the real publisher's base CAS closes it. Off by default.
	HandoffRaces bool
	// Trace keeps every trace line (for -v); otherwise only the last ones.
	Trace func(string)
}

// Violation is a broken invariant.
type Violation struct {
	Seed      uint64
	Step      int
	Invariant string
	Detail    string
	Trace     []string // the steps that led to it (the last ones)
}

func (v Violation) String() string {
	return fmt.Sprintf("seed %d step %d: invariant %s violated: %s", v.Seed, v.Step, v.Invariant, v.Detail)
}

// version is one committed manifest version as the simulator saw it
// committed (read from the bucket at the moment of the head write).
type version struct {
	v        uint64
	added    []contract.ObjectEntry // its change (inline or from its change parts)
	removed  []contract.ObjectEntry
	rootKey  string
	checksum string
	root     contract.Manifest
	objects  map[string]contract.ObjectEntry // full object set
	parts    []string
	commitTs int64
	supTs    int64 // when its child committed (0: still the head)
	// writtenAt is the simulated time the head naming it was written
	// (the world's clock, the one SQS stamps sends with).
	writtenAt int64
}

func (v *version) has(key string) bool {
	if key == v.rootKey || slices.Contains(v.parts, key) {
		return true
	}
	_, ok := v.objects[key]
	return ok
}

type collection struct {
	name       string
	versions   []*version          // every head, in the order they were written
	byVersion  map[uint64]*version // the current lineage's versions
	committed  map[string]bool     // every root, part and data key ever committed
	abandoned  map[string]bool     // keys only versions abandoned by a head regression hold
	highest    uint64              // the highest version ever the head
	tombstoned bool
	horizon    int64
	inc        uint64 // the lifetime (CCS incarnation) this model describes
	regressed  bool   // the head of this lifetime went back at least once (a restore)
}

func (c *collection) head() *version { return c.versions[len(c.versions)-1] }

type reader struct {
	c              string
	v              uint64
	ver            *version
	openedAt, till int64
}

type note struct {
	key string
	seq int
}

type invocation struct {
	name        string
	skewMs      int64
	faults      bool
	noHeadMoves bool
	queue       string // the queue whose message it consumes
	// incs: the incarnations of the tasks in the batch it consumes, by
	// collection (invariant incarnation-fence attributes deletes by them).
	incs map[string]map[uint64]bool
}

// heldMsg is a task message of a collection's lifetime, kept to be
// delivered again after the name is re-created (a delayed delivery).
type heldMsg struct {
	class, group, body string
	inc                uint64
}

// World is one seed's simulated deployment: the real use cases over
// in-memory ports, the owners' stand-ins, the workload and the scheduler.
type World struct {
	cfg   Config
	pol   policy.Policy
	def   resources.Definition
	rng   *rand.Rand
	t     int64 // the true clock (ms): S3, SQS, the publisher and CCS
	ctx   context.Context
	quiet bool

	// The simulated AWS: one in-memory store per service (memaws), reached
	// through the shipped adapters (awsio) by every function and owner.
	s3       *memaws.S3
	ddb      *memaws.Dynamo
	sqs      *memaws.SQS
	bucket   *awsio.Bucket        // the data bucket
	retiring int                  // >0 while the publisher serves a head retirement (invariant head-owner)
	peek     peekObjects          // the data bucket without faults or hooks (invariant checks)
	state    *awsio.ObservedTable // the coordinator table's observed state
	progress *awsio.ProgressTable // tombstone cleanup cursors
	leases   *awsio.LeaseTable    // ... and its leases
	queues   *awsio.FIFOQueues
	urls     map[string]string // queue class -> queue URL
	// crashedSlots are the lease ends of crashed consumers' class slots
	// (invariant class-slots).
	crashedSlots []int64
	dlqs         map[string]string // queue class -> DLQ URL

	pub  *publisher.Publisher
	late *publisher.Publisher // applies queued cutovers late (base CAS, as a real publisher)
	gen  *workload.Generator
	ccs  *CCS

	cols     map[string]*collection
	colNames []string
	notes    []note
	noteSeq  int
	requests map[string]contract.CutoverRequest
	// handing: every rewrite completion delivered to the handoff, by its
	// cutover request id; staleFacts: requests submitted under facts their
	// task was not planned for (invariant stale-facts).
	handing    map[string]contract.Completion
	staleFacts map[string]string
	readers    []reader
	deleted    map[string]bool // keys deleted at least once
	// unread: collections whose objects changed (a write or a delete under
	// their prefix) since their last readable check; the check reads the
	// whole head, so it runs only when its answer can have changed.
	unread  map[string]bool
	uploads []workload.Upload // other writers' uploads whose commit has not landed
	foreign map[string]bool   // keys of those uploads (never the coordinator's to delete)
	uploadN int
	forgeN  int                       // forged completions sent (forge.go)
	queued  []contract.CutoverRequest // cutovers the publisher received but has not applied yet
	slowPub bool                      // this seed's publisher queues every cutover and applies it late
	// ownerDown: the collection the publisher is unreachable for (an
	// outage of one owner for one collection; "" none). While it lasts,
	// handoff batches run without other faults and invariant isolation
	// holds: no other collection's record fails.
	ownerDown string
	round     int // the quiescent phase's round (-1: the faulty phase)

	stack  []*invocation
	invSeq int
	// nextIncs: the task incarnations of the batch the next invocation
	// consumes (set by consume, taken by invoke).
	nextIncs map[string]map[uint64]bool
	// seen: recent GC and compaction task messages of each collection's
	// current lifetime; held: those of released lifetimes, delivered again
	// after the re-creation; lifetimes: each name's released incarnations.
	seen      map[string][]heldMsg
	held      []heldMsg
	heldN     int
	lifetimes map[string][]uint64
	// confirmed: every lineage confirmation the operator recorded, by
	// name and the incarnation it was planned for; lateConfs: those of
	// released lifetimes still to be recorded late (after the re-creation).
	confirmed map[string]map[uint64][]contract.LineageConfirmation
	lateConfs []contract.LineageConfirmation

	// idleRuns: per head (collection, incarnation, version, checksum)
	// whose full plan is empty, the compaction tasks that leased it in the
	// quiescent phase (invariant idle-reenqueue).
	idleRuns map[string]map[string]bool
	// idleBacklog: per such head, the compaction messages sent before the
	// head was written that leased it rebased onto it (by message id).
	idleBacklog map[string]map[string]bool
	// compacting is the compaction message being handled (the compaction
	// queue's batches are of one message).
	compacting compactionMsg
	// splitCol is the collection tierSplit drives (splitsTiers worlds).
	splitCol string
	// badName: CCS's catalog lists BadCatalogName (badCatalog worlds).
	badName bool
	// nsN numbers the namespaces CCS drops empty; nsWait counts, per
	// dropped namespace not yet released, the reconciliations of the
	// quiescent phase it waited (invariant release-liveness).
	nsN    int
	nsWait map[string]int
	// lostWait counts, per dropped incarnation whose cleanup completion
	// was dead-lettered in the quiescent phase, the reconciliations it
	// waited for its release since (invariant release-liveness); lost
	// says which incarnations lost one already (once each).
	lostWait map[string]int
	lost     map[string]bool
	// steadyCol is written during every GC sweep of it in the quiescent
	// phase (steadyWrites worlds; invariant gc-debt-bounded).
	steadyCol string
	// bigCol was restored over hundreds of versions (bigRestores worlds;
	// invariant regression-resumed).
	bigCol string
	bigInc uint64 // bigCol's incarnation restored

	faultRate float64
	nestRate  float64
	// budgets: how this seed's world paces GC deletes (budgets.go);
	// holders numbers the GC instances' budget takers.
	budgets budgetPlan
	holders int
	// retentionLog: every lifecycle retention_ms CCS gave each name, with
	// when (invariant lifecycle-retention).
	retentionLog map[string][]retentionAt
	// checked: this seed's publisher checks conflicts and the coordinator
	// asks it to (conflictChecked).
	checked bool

	Counts     map[string]int
	step       int
	StepsRun   int
	trace      []string
	violations []Violation
}

// faultKinds are the fault counters reported even when zero.
var FaultKinds = []string{
	"crash-before", "crash-after", "throttle", "ambiguous-applied", "ambiguous-lost", "applied-retried",
	"cutover-timeout-before", "cutover-timeout-after",
	"notify-duplicated", "notify-dropped", "notify-reordered", "notify-failed",
	"sqs-duplicated", "sqs-redelivered", "sqs-dlq", "sqs-dedup-collapsed",
	"concurrent-append", "lease-expiry-mid-task", "takeover", "nested-action", "owner-outage", "outage-batch-mixed",
	"wipe", "watermark-regressed", "watermark-corrupt", "watermark-deleted", "watermark-stalled",
	"reader-opened", "reader-reads", "clock-skewed-invocations", "tombstone", "tombstone-replaced", "facts-changed", "facts-change-in-flight", "facts-change-at-cas",
	"foreign-upload", "foreign-commit-late", "cutover-queued", "cutover-applied-late", "cutover-expired-late",
	"rollback", "rollback-during-backoff", "lineage-confirmed", "lineage-confirmed-late", "bad-catalog-name",
	"namespace-dropped-empty", "cutover-rebased", "append-at-cutover", "late-commit-at-cutover",
	"commit-during-sweep", "restore-large", "completion-dead-lettered",
}

func newWorld(cfg Config) *World {
	if cfg.Steps <= 0 {
		cfg.Steps = 60
	}
	pol := Policy()
	if n := boundedSweeps(cfg.Seed); n > 0 {
		pol.GC.MaxSweepCandidates = n
	}
	budgets := budgetsOf(cfg.Seed)
	budgets.apply(&pol)
	if err := pol.Validate(); err != nil {
		panic(err) // a programming error: the simulated policy is a constant
	}
	w := &World{
		cfg: cfg, pol: pol, def: resources.For("sim", pol), rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed*0x9e3779b97f4a7c15+1)), t: startMs, ctx: context.Background(),
		cols: map[string]*collection{}, requests: map[string]contract.CutoverRequest{}, handing: map[string]contract.Completion{}, staleFacts: map[string]string{}, deleted: map[string]bool{}, foreign: map[string]bool{}, unread: map[string]bool{},
		seen: map[string][]heldMsg{}, lifetimes: map[string][]uint64{}, confirmed: map[string]map[uint64][]contract.LineageConfirmation{},
		Counts: map[string]int{}, round: -1, badName: badCatalog(cfg.Seed), nsWait: map[string]int{}, lostWait: map[string]int{}, lost: map[string]bool{}, budgets: budgets, retentionLog: map[string][]retentionAt{},
	}
	now := func() time.Time { return time.UnixMilli(w.t) }
	w.s3, w.ddb, w.sqs = memaws.NewS3(now), memaws.NewDynamo(), memaws.NewSQS(now)
	w.s3.MaxPageKeys = 4 // small pages, so that every listing pages
	w.s3.Hooks = memaws.Hooks{Fault: w.awsFault, Applied: w.s3Applied}
	w.ddb.Hooks = memaws.Hooks{Fault: w.awsFault, Applied: w.ddbApplied}
	w.sqs.Hooks = memaws.Hooks{Fault: w.awsFault, Applied: w.sqsApplied}
	w.sqs.Pick = func(n int) int { return w.rng.IntN(8) % n }
	if err := w.provision(); err != nil {
		panic(err) // a programming error: provisioning an empty in-memory AWS cannot fail
	}
	// Half the seeds run the publisher with the conflict check and the
	// coordinator told so (issue 26); the others a permissive publisher
	// (AcceptRebase) the coordinator is told has no check, so that its own
	// drop of a moved base is what keeps rule 2.
	w.checked = conflictChecked(cfg.Seed)
	w.pol.PublisherConflictCheck = w.checked
	// The publisher's coverage check is the owner's half of
	// handoff_provenance: the guard's mutation switches both off, so the
	// coordinator's half is proven on its own.
	unconserved := !cfg.Guards.HandoffProvenance
	w.pub = publisher.New(w.bucket, now, publisher.Options{MaxPartObjects: 3, MaxInlineChange: 2, AcceptRebase: !w.checked, Unconserved: unconserved}, nil)
	w.late = publisher.New(w.bucket, now, publisher.Options{MaxPartObjects: 3, MaxInlineChange: 2, OutputsChecked: true, Unconserved: unconserved}, nil)
	w.ccs = newCCS(w)
	w.pub.SetFacts(ccsOwner{w.ccs})
	w.late.SetFacts(ccsOwner{w.ccs})
	// Per-seed intensity: some seeds are calm, some are storms.
	w.faultRate = []float64{0, 0.01, 0.03, 0.06, 0.1}[w.rng.IntN(5)]
	w.nestRate = []float64{0, 0.03, 0.08}[w.rng.IntN(3)]
	w.slowPub = w.rng.IntN(4) == 0
	w.gen = workload.New(w.pub, nil, w.bucket, now, w.rng.Uint64(), workload.Options{
		RecordsPerCommit: 2 + w.rng.IntN(5), KeySpace: 6 + w.rng.IntN(12), DeleteFraction: 0.1 + 0.3*w.rng.Float64(), PayloadBytes: 6,
	})
	return w
}

// ---------------------------------------------------------------------------
// Invocations, clocks and faults.

// Fault is what the fault plan decides for one call.
type Fault int

// Faults a call can suffer.
const (
	FaultNone          Fault = iota
	FaultAmbiguousDone       // applied, but the caller does not learn the outcome
	FaultAmbiguousLost       // not applied, and the caller does not learn the outcome
	FaultThrottle            // not applied; throttled
)

// Crash is panicked by a call to kill the calling function at that point;
// the simulator recovers it and treats the invocation as lost.
type Crash struct{ Where string }

func (w *World) top() *invocation {
	if len(w.stack) == 0 {
		return nil
	}
	return w.stack[len(w.stack)-1]
}

// fnRun is what one invocation of a function gets: its skewed clock, a
// context carrying its request id (the handlers name lease holders by it),
// its metrics (EMF lines counted into Counts as "m:<name>") and a logger
// writing into the trace.
type fnRun struct {
	now func() time.Time
	ctx context.Context
	m   *metrics.Recorder
	out io.Writer
	log *slog.Logger
}

// invoke runs fn as one invocation of function name with its own skewed
// clock. A Crash panicked by a call ends the invocation (crashed = true).
func (w *World) invoke(name string, faults bool, queue string, fn func(r fnRun) error) (crashed bool, err error) {
	w.invSeq++
	inv := &invocation{name: fmt.Sprintf("%s#%d", name, w.invSeq), faults: faults && !w.quiet, queue: queue, incs: w.nextIncs}
	w.nextIncs = nil
	skew := w.pol.ClockSkew.Ms()
	inv.skewMs = w.rng.Int64N(skew+1) - skew/2
	if inv.skewMs != 0 {
		w.count("clock-skewed-invocations")
	}
	if name == "handoff" && !w.cfg.HandoffRaces && !w.checked {
		// A conflict-checking publisher judges a head that moved in the
		// handoff's window itself, at its CAS: in its seeds heads move there.
		inv.noHeadMoves = true
	}
	if outer := w.top(); outer != nil && outer.noHeadMoves {
		inv.noHeadMoves = true
	}
	w.stack = append(w.stack, inv)
	defer func() {
		w.stack = w.stack[:len(w.stack)-1]
		if r := recover(); r != nil {
			c, ok := r.(Crash)
			if !ok {
				panic(r)
			}
			crashed = true
			w.logf("    %s crashed at %s", inv.name, c.Where)
		}
	}()
	r := fnRun{
		now: func() time.Time { return time.UnixMilli(w.t + inv.skewMs) },
		ctx: lambdacontext.NewContext(w.ctx, &lambdacontext.LambdaContext{AwsRequestID: inv.name}),
		m:   metrics.New(name), out: emfCounter{w}, log: slog.New(traceLog{w: w}),
	}
	err = fn(r)
	return false, err
}

// system runs fn as the platform (an event source mapping's receives and
// deletes): no faults, no crashes.
func (w *World) system(fn func()) {
	w.stack = append(w.stack, &invocation{name: "platform"})
	defer func() { w.stack = w.stack[:len(w.stack)-1] }()
	fn()
}

// fault decides what one port call of the running invocation suffers. It
// may first run a nested action (another actor's step interleaved at this
// point). A crash panics Crash.
func (w *World) fault(op, key string, write bool) Fault {
	inv := w.top()
	if inv == nil || !inv.faults || w.quiet {
		return FaultNone
	}
	if len(w.stack) == 1 && w.nestRate > 0 && w.rng.Float64() < w.nestRate {
		w.nested(inv, op, key)
	}
	r := w.faultRate
	if r == 0 {
		return FaultNone
	}
	x := w.rng.Float64()
	switch {
	case x < r*0.2:
		w.count("crash-before")
		panic(Crash{Where: "before " + op + " " + key})
	case x < r*0.45:
		w.count("throttle")
		return FaultThrottle
	case write && x < r*0.75:
		w.count("ambiguous-applied")
		return FaultAmbiguousDone
	case write && x < r:
		w.count("ambiguous-lost")
		return FaultAmbiguousLost
	}
	return FaultNone
}

// awsFault is the fault plan of every simulated AWS call: the sim's fault
// decided for the running invocation, answered the way the SDK answers it
// (a refused write times out or fails with a 500; an applied one loses its
// answer to a timeout or a 500, or is retried by the SDK, which answers
// instead).
func (w *World) awsFault(c memaws.Call) memaws.Fault {
	switch w.fault(c.Op, c.Resource+"/"+c.Key, c.Write) {
	case FaultThrottle:
		return memaws.Throttle
	case FaultAmbiguousLost:
		return []memaws.Fault{memaws.Timeout, memaws.ServerError}[w.rng.IntN(2)]
	case FaultAmbiguousDone:
		f := []memaws.Fault{memaws.AppliedTimeout, memaws.AppliedServerError, memaws.AppliedRetried}[w.rng.IntN(3)]
		if f == memaws.AppliedRetried {
			w.count("applied-retried")
		}
		return f
	}
	return memaws.None
}

// afterWrite may kill the running invocation just after a write took effect.
func (w *World) afterWrite(op, key string) {
	inv := w.top()
	if inv == nil || !inv.faults || w.quiet || w.faultRate == 0 {
		return
	}
	if w.rng.Float64() < w.faultRate*0.2 {
		w.count("crash-after")
		panic(Crash{Where: "after " + op + " " + key})
	}
}

func (w *World) count(k string) { w.Counts[k]++ }

func (w *World) logf(format string, args ...any) {
	line := fmt.Sprintf("[%4d t=+%6.1fm] ", w.step, float64(w.t-startMs)/60000) + fmt.Sprintf(format, args...)
	if w.cfg.Trace != nil {
		w.cfg.Trace(line)
	}
	w.trace = append(w.trace, line)
	if len(w.trace) > 400 {
		w.trace = slices.Clone(w.trace[200:])
	}
}

func (w *World) violate(inv, format string, args ...any) {
	v := Violation{Seed: w.cfg.Seed, Step: w.step, Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	w.logf("VIOLATION %s: %s", inv, v.Detail)
	w.violations = append(w.violations, v)
}

// ---------------------------------------------------------------------------
// Bookkeeping from the bucket: head writes and deletes.

// s3Applied keeps the books of the data bucket (head writes, deletes) and
// may crash the writer just after its write.
func (w *World) s3Applied(ch memaws.Change) {
	if ch.Resource == w.def.Bucket.Name {
		for _, k := range append([]string{ch.Key}, ch.Deleted...) {
			if c, ok := collectionOf(k); ok {
				w.unread[c] = true
			}
		}
		for _, k := range ch.Deleted {
			w.onDelete(k)
		}
		if c, ok := contract.CollectionOfHeadKey(ch.Key); ok && ch.Body != nil {
			w.onHead(c, ch.Body)
		}
	}
	w.afterWrite(ch.Op, ch.Key)
}

// ddbApplied checks the lease contract on every lease write that took
// effect and may crash the writer just after it.
func (w *World) ddbApplied(ch memaws.Change) {
	w.checkLeaseWrite(ch)
	w.afterWrite(ch.Op, ch.Key)
}

// sqsApplied counts deduplicated sends and may crash the sender just after
// its send.
func (w *World) sqsApplied(ch memaws.Change) {
	w.Counts["sqs-dedup-collapsed"] += ch.Deduplicated
	w.afterWrite(ch.Op, ch.Resource)
}

func (w *World) onHead(c string, body []byte) {
	col := w.cols[c]
	if col == nil {
		col = &collection{name: c, byVersion: map[uint64]*version{}, committed: map[string]bool{}, abandoned: map[string]bool{}}
		w.cols[c] = col
	}
	head, err := contract.DecodeHead(contract.HeadKey(c), body)
	if err != nil {
		w.violate("head-valid", "head of %s does not decode: %v", c, err)
		return
	}
	if len(col.versions) == 0 {
		col.inc = head.Inc()
	} else if head.Inc() != col.inc {
		w.violate("incarnation-fence", "head of %s names incarnation %d while its lifetime %d is the current one", c, head.Inc(), col.inc)
		return
	}
	if len(col.versions) > 0 && head.Version <= col.head().v {
		w.onRegression(col, head)
		return
	}
	rb, ok := w.s3.Peek(w.def.Bucket.Name, head.ManifestKey)
	if !ok {
		w.violate("head-valid", "head of %s names missing root %s", c, head.ManifestKey)
		return
	}
	root, err := contract.DecodeManifest(head.ManifestKey, rb)
	if err != nil {
		w.violate("head-valid", "root %s: %v", head.ManifestKey, err)
		return
	}
	v := &version{v: head.Version, rootKey: head.ManifestKey, checksum: head.ManifestChecksum, root: root,
		objects: map[string]contract.ObjectEntry{}, commitTs: root.CommitTsUnixMs, writtenAt: w.t}
	for _, ref := range root.Parts {
		pb, ok := w.s3.Peek(w.def.Bucket.Name, ref.Key)
		if !ok {
			w.violate("head-valid", "root %s names missing part %s", head.ManifestKey, ref.Key)
			return
		}
		p, err := contract.DecodePart(ref, pb)
		if err != nil {
			w.violate("head-valid", "part %s: %v", ref.Key, err)
			return
		}
		v.parts = append(v.parts, ref.Key)
		for _, o := range p.Objects {
			v.objects[o.Key] = o
		}
	}
	v.added, v.removed = root.Change.Added, root.Change.Removed
	for _, ref := range root.Change.Parts {
		pb, ok := w.s3.Peek(w.def.Bucket.Name, ref.Key)
		if !ok {
			w.violate("head-valid", "root %s names missing change part %s", head.ManifestKey, ref.Key)
			return
		}
		p, err := contract.DecodeChangePart(ref, root.Version, pb)
		if err != nil {
			w.violate("head-valid", "change part %s: %v", ref.Key, err)
			return
		}
		v.parts = append(v.parts, ref.Key) // committed with the root, deleted with it
		if p.Kind == contract.ChangeAdded {
			v.added = append(slices.Clip(v.added), p.Objects...)
		} else {
			v.removed = append(slices.Clip(v.removed), p.Objects...)
		}
	}
	if len(col.versions) > 0 {
		prev := col.head()
		prev.supTs = root.CommitTsUnixMs
		if root.ParentVersion != prev.v || root.ParentChecksum != prev.checksum {
			w.violate("head-lineage", "%s v%d's parent is v%d, the previous head was v%d", c, root.Version, root.ParentVersion, prev.v)
		}
	}
	col.versions = append(col.versions, v)
	col.byVersion[v.v] = v
	col.highest = max(col.highest, v.v)
	col.committed[v.rootKey] = true
	delete(col.abandoned, v.rootKey)
	for _, p := range v.parts {
		col.committed[p] = true
		delete(col.abandoned, p)
	}
	for k := range v.objects {
		col.committed[k] = true
		delete(col.abandoned, k) // the lineage holds it again
	}
	if root.Origin.Kind == contract.OriginCutover {
		w.checkCutover(col, v)
	}
	w.noteSeq++
	w.notes = append(w.notes, note{key: contract.HeadKey(c), seq: w.noteSeq})
	w.logf("    head %s -> v%d (%s)", c, v.v, root.Origin.Kind)
}

// onRegression records a head put back to an older version of its
// lineage (an owner's restore): the versions above it are abandoned. They
// count as superseded now (a token opened on them may still read them for
// a token lifetime); what only they hold is no longer the head lineage's
// debt.
func (w *World) onRegression(col *collection, head contract.Head) {
	old := col.byVersion[head.Version]
	if old == nil || old.rootKey != head.ManifestKey {
		w.violate("head-lineage", "%s head went back to v%d, which is not a version of its lineage", col.name, head.Version)
		return
	}
	keep := map[string]bool{}
	for v := old; v != nil; v = col.byVersion[v.root.ParentVersion] {
		keep[v.rootKey] = true
		for _, p := range v.parts {
			keep[p] = true
		}
		for k := range v.objects {
			keep[k] = true
		}
		if v.root.ParentVersion == 0 {
			break
		}
	}
	for n, v := range col.byVersion {
		if n <= head.Version {
			continue
		}
		if v.supTs == 0 {
			v.supTs = w.t
		}
		delete(col.byVersion, n)
		for _, k := range append(append([]string{v.rootKey}, v.parts...), sortedKeys(v.objects)...) {
			if !keep[k] {
				col.abandoned[k] = true
			}
		}
	}
	old.supTs = 0
	col.regressed = true
	col.versions = append(col.versions, old)
	w.noteSeq++
	w.notes = append(w.notes, note{key: contract.HeadKey(col.name), seq: w.noteSeq})
	w.logf("    head %s -> v%d (restored; v%d..v%d abandoned)", col.name, head.Version, head.Version+1, col.highest)
}

// onRefused is invariant false-refusal: GC refuses a collection as a head
// regression (alarmed: an operator is paged) only when its head did go back
// in this lifetime. A head that moved forward while a sweep read it (the
// observer recorded a newer head, commits left roots above the head the
// sweep walked) is no regression.
func (w *World) onRefused(c, reason string) {
	w.checkResumed(c, reason)
	if reason != gc.RefusedRegression {
		return
	}
	w.count("refused-head-regression")
	if col := w.cols[c]; col == nil || !col.regressed {
		inc, v := uint64(0), uint64(0)
		if col != nil && len(col.versions) > 0 {
			inc, v = col.inc, col.head().v
		}
		w.violate("false-refusal", "GC refused %s as a head regression, but its head never went back (incarnation %d, head v%d)", c, inc, v)
	}
}

// checkCutover is invariant (b): a cutover is published only on the head
// its request was based on (and never over deletes its inputs gained).
func (w *World) checkCutover(col *collection, v *version) {
	req, ok := w.requests[v.root.Origin.RequestID]
	if !ok {
		w.violate("stale-cutover", "%s v%d is a cutover of unknown request %s", col.name, v.v, v.root.Origin.RequestID)
		return
	}
	if why := w.staleFacts[req.RequestID]; why != "" {
		w.violate("stale-facts", "%s v%d published cutover %s: %s", col.name, v.v, req.RequestID, why)
	}
	// ... nor under facts that changed after the submission: this runs at
	// the publisher's head CAS, the moment of effect.
	if c, ok := w.handing[req.RequestID]; ok {
		if planned, ok := w.ccs.history[c.Collection][c.CCSFactsVersion]; ok {
			now := w.ccs.facts[c.Collection]
			if why := factsDrift(c.Kind, planned, now); why != "" {
				w.violate("stale-facts", "%s v%d: cutover %s applied at the head CAS under facts v%d, planned under v%d: %s", col.name, v.v, req.RequestID, now.FactsVersion, c.CCSFactsVersion, why)
			}
		}
	}
	if req.BaseVersion == v.root.ParentVersion && req.BaseChecksum == v.root.ParentChecksum {
		return
	}
	if w.checked {
		w.checkRebased(col, v, req)
		return
	}
	for n := req.BaseVersion + 1; n <= v.root.ParentVersion; n++ {
		mid := col.byVersion[n]
		if mid == nil {
			continue
		}
		for _, a := range mid.added {
			if a.DeleteCount == 0 {
				continue
			}
			for _, in := range req.Removed {
				if in.DocCount > 0 && a.MinRecordKey <= in.MaxRecordKey && a.MaxRecordKey >= in.MinRecordKey {
					w.violate("delete-gain", "%s v%d published cutover %s based on v%d although v%d added %s with deletes over input %s",
						col.name, v.v, req.RequestID, req.BaseVersion, n, a.Key, in.Key)
					return
				}
			}
		}
	}
	w.violate("stale-cutover", "%s v%d published cutover %s based on v%d, but its parent is v%d", col.name, v.v, req.RequestID, req.BaseVersion, v.root.ParentVersion)
}

// checkRebased is invariant rebase-check (SYSTEM rule 2 as revised): a
// cutover the publisher applied on a head other than its base was
// conflict-free there. The simulation's own reading of the owner's check
// (written apart from the publisher's), judged when the head write lands:
// the same lifetime, the base in the parent's lineage, every removed input
// in the parent with exactly the request's entry, and no commit since the
// base other than a cutover adding records over an input's key range that
// are not ordered after every input record (invariant delete-gain; a
// newer delete keeps applying to the outputs). The facts are judged by
// invariant stale-facts, what reads by readable.
func (w *World) checkRebased(col *collection, v *version, req contract.CutoverRequest) {
	w.count("cutover-rebased")
	if req.Inc() != col.inc {
		w.violate("rebase-check", "%s v%d: cutover %s of incarnation %d applied to incarnation %d", col.name, v.v, req.RequestID, req.Inc(), col.inc)
		return
	}
	parent := col.byVersion[v.root.ParentVersion]
	lineage := map[uint64]*version{}
	for m := parent; m != nil && m.v > req.BaseVersion; m = col.byVersion[m.root.ParentVersion] {
		lineage[m.v] = m
		if m.root.ParentVersion == req.BaseVersion {
			if base := col.byVersion[req.BaseVersion]; base == nil || base.checksum != req.BaseChecksum || m.root.ParentChecksum != req.BaseChecksum {
				break
			}
			lineage[req.BaseVersion] = col.byVersion[req.BaseVersion]
		}
	}
	if parent == nil || lineage[req.BaseVersion] == nil {
		w.violate("rebase-check", "%s v%d: cutover %s based on v%d applied on v%d, whose lineage does not hold that base", col.name, v.v, req.RequestID, req.BaseVersion, v.root.ParentVersion)
		return
	}
	var newest uint64
	for _, in := range req.Removed {
		newest = max(newest, in.MaxSeq)
		if held, ok := parent.objects[in.Key]; !ok || held != in {
			w.violate("rebase-check", "%s v%d: cutover %s based on v%d applied on v%d, which no longer holds input %s as the request named it (held: %v)",
				col.name, v.v, req.RequestID, req.BaseVersion, parent.v, in.Key, ok)
			return
		}
	}
	for n := req.BaseVersion + 1; n <= parent.v; n++ {
		mid := lineage[n]
		if mid == nil || mid.root.Origin.Kind == contract.OriginCutover {
			continue
		}
		for _, a := range mid.added {
			if a.DocCount == 0 || a.MinSeq > newest {
				continue
			}
			for _, in := range req.Removed {
				if in.DocCount > 0 && a.MinRecordKey <= in.MaxRecordKey && a.MaxRecordKey >= in.MinRecordKey {
					w.violate("delete-gain", "%s v%d: cutover %s based on v%d applied on v%d although v%d added %s (seq %d..) over input %s (max seq %d)",
						col.name, v.v, req.RequestID, req.BaseVersion, parent.v, n, a.Key, a.MinSeq, in.Key, newest)
					return
				}
			}
		}
	}
}

// onDelete is invariant (a), judged at the moment of the delete: nothing
// the head, a manifest a token may still open, or a live reader references.
func (w *World) onDelete(key string) {
	w.deleted[key] = true
	if w.foreign[key] {
		w.violate("foreign-delete", "%s deleted: another writer's upload whose commit has not landed (never the coordinator's, rule 11)", key)
		return
	}
	c, ok := collectionOf(key)
	if ok && key == contract.HeadKey(c) && w.retiring == 0 && w.top() != nil {
		// head-owner: only the Manifest Publisher removes a head (a
		// retirement the tombstone cleanup asked for); no function does.
		w.violate("head-owner", "head of %s deleted by %s, not by the publisher's retirement", c, w.top().name)
	}
	col := w.cols[c]
	if !ok || col == nil {
		return
	}
	// incarnation-fence: nothing of an old lifetime (a late task) deletes
	// an object, or the head, of the name's current lifetime.
	if inv := w.top(); inv != nil && len(col.versions) > 0 {
		if incs, ok := inv.incs[c]; ok && !incs[col.inc] && (key == contract.HeadKey(c) || col.committed[key]) {
			w.violate("incarnation-fence", "%s (of %s incarnation %d) deleted by %s, which runs only tasks of incarnation(s) %v",
				key, c, col.inc, inv.name, sortedIncs(incs))
			return
		}
	}
	for _, v := range col.versions {
		if why := w.protects(col, v, key); why != "" && v.has(key) {
			w.violate("pinned-delete", "%s deleted while %s v%d references it (%s)", key, c, v.v, why)
			return
		}
	}
	w.checkRetention(col, key)
}

// retentionAt is a lifecycle retention_ms CCS gave a name from at on.
type retentionAt struct{ at, ms int64 }

// checkRetention is invariant lifecycle-retention, judged at the moment
// of the delete: a committed object of the lifetime (live or dropped) is
// deleted only once its lifecycle retention has passed by its maximum
// timestamp (SYSTEM rule 3; a drop does not waive it), under the smallest
// retention_ms CCS gave the name within the proof bound before now (a
// delete may rest on facts read that long ago, rule 14).
func (w *World) checkRetention(col *collection, key string) {
	if col.abandoned[key] {
		return // only versions a head regression abandoned hold it: not the lineage's
	}
	var entry contract.ObjectEntry
	found := false
	for _, v := range col.versions {
		if e, ok := v.objects[key]; ok {
			entry, found = e, true
		}
	}
	if !found {
		return
	}
	ret := w.retentionWithin(col.name, w.t-w.pol.GC.ProofMaxAge.Ms())
	if ret > 0 && w.t < entry.MaxTsUnixMs+ret {
		w.violate("lifecycle-retention", "%s of %s (tombstoned %v) deleted %.1fm after its max_ts, inside its lifecycle retention of %.0fm",
			key, col.name, col.tombstoned, float64(w.t-entry.MaxTsUnixMs)/60000, float64(ret)/60000)
	}
}

// retentionWithin is the smallest retention_ms in effect at any time from
// since to now.
func (w *World) retentionWithin(c string, since int64) int64 {
	log := w.retentionLog[c]
	ret := int64(-1)
	for i, r := range log {
		ends := int64(1 << 62)
		if i+1 < len(log) {
			ends = log[i+1].at
		}
		if ends <= since {
			continue
		}
		if ret < 0 || r.ms < ret {
			ret = r.ms
		}
	}
	return max(ret, 0)
}

// protects says why v's objects must exist now ("" when they need not).
func (w *World) protects(col *collection, v *version, key string) string {
	for _, r := range w.readers {
		if r.c == col.name && r.ver == v && r.till > w.t {
			return fmt.Sprintf("held by a reader until +%.1fm", float64(r.till-startMs)/60000)
		}
	}
	sup := v.supTs
	if sup == 0 {
		if !col.tombstoned || col.horizon == 0 {
			return "committed head"
		}
		sup = col.horizon // a tombstone supersedes the head, its root, parts and objects
	}
	if w.t < sup+w.pol.GC.TokenLifetime.Ms() {
		return fmt.Sprintf("superseded at +%.1fm, inside the token lifetime", float64(sup-startMs)/60000)
	}
	return ""
}

// checkReleaseDependencies is invariant (d): when CCS records a release
// intent, every cleanup dependency of the incarnation is gone — every data
// object, every manifest (roots, parts, change parts) and the head — and
// the reservation horizon has passed.
func (w *World) checkReleaseDependencies(req contract.ReleaseIntentRequest) {
	col := w.cols[req.Collection]
	if col == nil {
		return
	}
	if f := w.ccs.facts[req.Collection]; w.t < f.ReservationHorizonUnixMs {
		w.violate("release-dependencies", "release intent %s for %s recorded before its reservation horizon (%d < %d)", req.IntentID, req.Collection, w.t, f.ReservationHorizonUnixMs)
		return
	}
	if k := w.releaseBlocker(req.Collection); k != "" {
		w.violate("release-dependencies", "release intent %s for %s recorded while %s still exists", req.IntentID, req.Collection, k)
	}
}

// releaseBlocker names a key of c a release must wait for ("" when none).
func (w *World) releaseBlocker(c string) string {
	col := w.cols[c]
	for _, k := range w.s3.Keys(w.def.Bucket.Name, contract.CollectionPrefix(c)) {
		if contract.IsDataKey(c, k) && !col.committed[k] && !owned(c, k) {
			continue // another writer's never-committed upload: not a dependency GC may clean
		}
		if col.abandoned[k] && !(contract.IsDataKey(c, k) && owned(c, k)) {
			continue // only versions a head regression abandoned hold it: the owners', not GC's
		}
		if k == contract.HeadKey(c) || contract.IsDataKey(c, k) || col.committed[k] {
			return k
		}
		if inc, ok := contract.ManifestKeyIncarnation(c, k); ok && inc == contract.Lifetime(col.inc) {
			return k // a root or part of the lifetime no head or parent names (a publisher's lost CAS): still the lifetime's
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// Invariants checked after every step.

func (w *World) checkStep() {
	for _, c := range w.colNames {
		col := w.cols[c]
		w.checkIndexed(col)
		if !col.tombstoned {
			w.checkReadable(col)
		}
	}
	// Live readers: every object of the version they hold is readable.
	for _, r := range w.readers {
		if r.till <= w.t {
			continue
		}
		v := r.ver
		for k := range v.objects {
			if !w.exists(k) {
				w.violate("pinned-delete", "reader of %s v%d cannot read %s", r.c, r.v, k)
				return
			}
		}
	}
}

// checkReadable is invariant (c): every key reads as its latest write from
// the committed head.
func (w *World) checkReadable(col *collection) {
	if !w.unread[col.name] {
		return // nothing under the collection changed since it last read right
	}
	w.unread[col.name] = false
	got, _, err := workload.Read(w.ctx, lineage.New(w.peek, 64), w.peek, col.name)
	if err != nil {
		w.violate("readable", "read %s from its head: %v", col.name, err)
		return
	}
	if d := workload.Diff(w.gen.Expected(col.name), got); len(d) > 0 {
		w.violate("readable", "%s reads differently from what was written: %s", col.name, strings.Join(d[:min(len(d), 5)], ", "))
	}
}

// checkIndexed: outstanding debt stays findable from the head. Every
// committed object that still exists is referenced by the head or named by
// the change of a root reachable from it, and every committed root or part
// that exists is reachable (else it is leaked: nothing will ever find it).
// Keys deleted and written again are new, never-committed objects.
func (w *World) checkIndexed(col *collection) {
	reach := map[string]bool{}
	indexed := map[string]bool{}
	h := col.head()
	for k := range h.objects {
		indexed[k] = true
	}
	for v := h; v != nil && w.exists(v.rootKey); v = col.byVersion[v.root.ParentVersion] {
		reach[v.rootKey] = true
		for _, p := range v.parts {
			reach[p] = true
		}
		for _, o := range v.added {
			indexed[o.Key] = true
		}
		for _, o := range v.removed {
			indexed[o.Key] = true
		}
		if v.root.ParentVersion == 0 {
			break
		}
	}
	for _, k := range sortedKeys(col.committed) {
		if w.deleted[k] || !w.exists(k) || col.abandoned[k] && !indexed[k] && !reach[k] {
			continue // abandoned by a head regression: not the head lineage's debt
		}
		if contract.IsDataKey(col.name, k) {
			if !indexed[k] {
				w.violate("debt-indexed", "%s exists but no root reachable from the head of %s names it (leaked)", k, col.name)
				return
			}
		} else if !reach[k] {
			w.violate("debt-indexed", "%s exists but is not reachable from the head of %s (leaked)", k, col.name)
			return
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// writtenByRewrite reports whether key lies in a directory named after one
// of the coordinator's rewrite tasks of c, whatever its level: the sim's own
// reading of where executors write, independent of contract.OwnedOutputTask.
func writtenByRewrite(c, key string) bool {
	dir := "/" + strings.TrimPrefix(key, contract.DataPrefix(c))
	for _, kind := range []string{"compaction", "lifecycletransition"} {
		for _, form := range []string{"/" + kind + "-" + c + "-v", "/" + kind + "-" + c + "-i", "/" + kind + "-i"} {
			if i := strings.Index(dir, form); i >= 0 {
				rest := dir[i+len(form):]
				if strings.HasSuffix(form, "-i") { // a later lifetime: i<N>-v...
					n := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
					if n == 0 || !strings.HasPrefix(rest[n:], "-v") {
						continue
					}
				}
				return true
			}
		}
	}
	return false
}

// owned reports whether key is an output of one of the coordinator's own
// rewrite tasks (the only never-committed objects it may reclaim).
func owned(c, key string) bool {
	_, ok := contract.OwnedOutputTask(c, key)
	return ok
}

func sortedIncs(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
