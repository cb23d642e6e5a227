package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Objects is what the publisher needs from the bucket.
type Objects interface {
	Get(ctx context.Context, key string) ([]byte, error)
	GetWithETag(ctx context.Context, key string) ([]byte, string, error)
	Put(ctx context.Context, key string, body []byte) (string, error)
	PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error)
	PutIfAbsent(ctx context.Context, key string, body []byte) (string, error)
	Size(ctx context.Context, key string) (int64, error)
}

// Options tune the stand-in.
type Options struct {
	MaxPartObjects  int  // objects per manifest part before it splits (default 4096)
	MaxAttempts     int  // CAS attempts for appends (default 20)
	AcceptRebase    bool // accept a cutover whose base moved if its removed objects are all still present
	IdempotencyWalk int  // how many recent roots to search for an already-applied request id (default 16)
	// Queue, when set, runs after a cutover request was checked and before
	// it is applied: it models a publisher that queues requests and applies
	// them late (a test advances the clock or sweeps GC in it). The
	// request's not_after is checked again at the head CAS.
	Queue func(ctx context.Context, req contract.CutoverRequest)
	// Unconserved applies a cutover whatever its coverage (coverage.go):
	// a removal that adds nothing, outputs of another task, outputs that
	// cannot hold what the inputs held. Mutation proofs only.
	Unconserved bool
	// OutputsChecked skips the output check at apply time: the publisher
	// checked them when it received (and queued) the request.
	OutputsChecked bool
	// MaxInlineChange is the most change entries a root holds inline
	// (default and upper bound contract.MaxInlineChange); a larger change
	// goes to change parts. Tests lower it to exercise change parts.
	MaxInlineChange int
	// TrustRefusal takes a 412 on the head CAS as "somebody else won"
	// without re-reading the head: the bug a retried, applied CAS exposes
	// (one append committed twice, an applied cutover answered conflict).
	// Mutation proofs only.
	TrustRefusal bool
	// SkipFactsRecheck applies a cutover without re-reading the CCS facts
	// it carries before the head CAS (facts.go): the gap a facts change
	// between the coordinator's check and the head swap falls into.
	// Mutation proofs only.
	SkipFactsRecheck bool
	// NoConflictCheck is a publisher without the conflict-check capability
	// (contract.ConflictCheckV1): a request on a moved head is a conflict
	// whatever it asks for, and the answer carries no conflict_check.
	NoConflictCheck bool
	// ConflictWalk bounds how many versions since a request's base the
	// conflict check reads (default 64); a longer gap is refused
	// (clause unproven).
	ConflictWalk int
	// SkipClauses switches clauses of the conflict check off (contract
	// Clause* names): the publisher then applies what such a publisher
	// would (removes only inputs still there, by key whatever their
	// entry, over any lineage). Mutation proofs only.
	SkipClauses []string
	// OnArrival, when set, runs first thing when a cutover request
	// arrives, before the publisher reads its head: a test changes the
	// head there, after the coordinator's last look and before the
	// owner's check at the moment of effect.
	OnArrival func(ctx context.Context, req contract.CutoverRequest)
	// RetireLive retires a head without asking CCS whether it dropped the
	// head's incarnation (retire.go): guard retire_tombstoned off.
	// Mutation proofs only.
	RetireLive bool
}

// Publisher is the stand-in Manifest Publisher.
type Publisher struct {
	objects   Objects
	now       func() time.Time
	opts      Options
	log       *slog.Logger
	beforeCAS func()
	// crashAfterRoot: refused commits leave their root (SetCrashAfterRoot).
	crashAfterRoot bool
	facts          FactsSource // CCS, for cutovers that carry ccs_facts (facts.go)
}

// New returns a publisher.
func New(objects Objects, now func() time.Time, opts Options, log *slog.Logger) *Publisher {
	if opts.MaxPartObjects <= 0 {
		opts.MaxPartObjects = 4096
	}
	if opts.MaxInlineChange <= 0 || opts.MaxInlineChange > contract.MaxInlineChange {
		opts.MaxInlineChange = contract.MaxInlineChange
	}
	opts.MaxPartObjects = min(opts.MaxPartObjects, contract.MaxPartObjects)
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 20
	}
	if opts.IdempotencyWalk <= 0 {
		opts.IdempotencyWalk = 16
	}
	if opts.ConflictWalk <= 0 {
		opts.ConflictWalk = 64
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{objects: objects, now: now, opts: opts, log: log}
}

// SetBeforeCAS sets a hook run after a version's root is written and
// right before its head CAS (tests: time passing, a crash window).
func (p *Publisher) SetBeforeCAS(fn func()) { p.beforeCAS = fn }

// SetCrashAfterRoot makes a commit refused before its head CAS leave its
// root in place, as a publisher that crashed between writing the root and
// withdrawing it does (tests of GC's handling of a root above the head).
func (p *Publisher) SetCrashAfterRoot(on bool) { p.crashAfterRoot = on }

// SetOnArrival sets Options.OnArrival (before any cutover is served).
func (p *Publisher) SetOnArrival(fn func(ctx context.Context, req contract.CutoverRequest)) {
	p.opts.OnArrival = fn
}

// SetQueue sets Options.Queue (before any cutover is served).
func (p *Publisher) SetQueue(fn func(ctx context.Context, req contract.CutoverRequest)) {
	p.opts.Queue = fn
}

// Sentinel outcomes.
var (
	ErrExists   = errors.New("collection already exists")
	ErrConflict = errors.New("head moved")
	ErrRejected = errors.New("cutover rejected")
	ErrExpired  = errors.New("cutover request past its not_after")
)

// Snapshot is a committed version as the publisher read it.
type Snapshot struct {
	Head contract.Head
	Root contract.Manifest
	etag string
}

// Create commits version 1 (empty) of a new collection's first lifetime.
func (p *Publisher) Create(ctx context.Context, collection string) (contract.Head, error) {
	return p.CreateIncarnation(ctx, collection, 1)
}

// CreateIncarnation commits version 1 (empty) of a collection's lifetime
// incarnation (the CCS fact): its head and every root carry it, and every
// key it writes has its tag. The head key must be free (the publisher
// retired the previous lifetime's head at its cleanup's request, retire.go).
func (p *Publisher) CreateIncarnation(ctx context.Context, collection string, incarnation uint64) (contract.Head, error) {
	if !contract.ValidCollection(collection) {
		return contract.Head{}, fmt.Errorf("create %q: invalid collection name", collection)
	}
	if contract.Lifetime(incarnation) == 1 {
		incarnation = 0 // the first lifetime is written as absent
	}
	root := contract.Manifest{SchemaVersion: contract.SchemaVersion, Collection: collection, Incarnation: incarnation, Version: 1,
		CommitTsUnixMs: p.now().UnixMilli(), NextSeq: 1, Origin: contract.Origin{Kind: contract.OriginCreate},
		Change: contract.Change{Added: []contract.ObjectEntry{}, Removed: []contract.ObjectEntry{}}, Parts: []contract.PartRef{}}
	head, body, err := p.writeRoot(ctx, root)
	if err != nil {
		return head, err
	}
	if _, err := p.objects.PutIfAbsent(ctx, contract.HeadKey(collection), body); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return head, fmt.Errorf("create %s: %w", collection, ErrExists)
		}
		return head, fmt.Errorf("create %s: %w", collection, err)
	}
	return head, nil
}

// Read returns the committed head and its verified root.
func (p *Publisher) Read(ctx context.Context, collection string) (Snapshot, error) {
	return p.read(ctx, collection, nil)
}

// read is Read opening the root through m (nil: uncached).
func (p *Publisher) read(ctx context.Context, collection string, m *memo) (Snapshot, error) {
	key := contract.HeadKey(collection)
	b, etag, err := p.objects.GetWithETag(ctx, key)
	if err != nil {
		return Snapshot{}, fmt.Errorf("read head of %s: %w", collection, err)
	}
	head, err := contract.DecodeHead(key, b)
	if err != nil {
		return Snapshot{}, err
	}
	root, err := m.openRoot(ctx, p, head.ManifestKey, head.ManifestChecksum)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Head: head, Root: root, etag: etag}, nil
}

func (p *Publisher) openRoot(ctx context.Context, key, checksum string) (contract.Manifest, error) {
	b, err := p.objects.Get(ctx, key)
	if err != nil {
		return contract.Manifest{}, fmt.Errorf("open root %s: %w", key, err)
	}
	if err := contract.VerifyChecksum(key, b, checksum); err != nil {
		return contract.Manifest{}, err
	}
	return contract.DecodeManifest(key, b)
}

func (p *Publisher) loadPart(ctx context.Context, ref contract.PartRef) (contract.Part, error) {
	b, err := p.objects.Get(ctx, ref.Key)
	if err != nil {
		return contract.Part{}, fmt.Errorf("open part %s: %w", ref.Key, err)
	}
	return contract.DecodePart(ref, b)
}

// Change is what a commit applies to its base.
type Change struct {
	Added   []contract.ObjectEntry
	Removed []contract.ObjectEntry
	Origin  contract.Origin
	Seqs    uint64 // sequence numbers consumed from the base's next_seq
	// NotAfterUnixMs, when set, is the last moment (publisher clock) the
	// change may become visible: the head CAS is not attempted after it.
	NotAfterUnixMs int64
	// Facts, when set, are the CCS facts the change was judged under: they
	// are re-read right before the head CAS (facts.go).
	Facts *contract.FactsFence
	// memo reads the base's parts (a cutover's retries read each
	// immutable root and part once; nil: uncached).
	memo *memo
}

// BuildFunc derives a change from the base it will apply to. It is called
// again with the new base after a lost CAS.
type BuildFunc func(ctx context.Context, base Snapshot) (Change, error)

// Commit applies build's change on top of the current head, retrying on a
// lost CAS, and returns the committed head.
func (p *Publisher) Commit(ctx context.Context, collection string, build BuildFunc) (contract.Head, error) {
	for attempt := 0; attempt < p.opts.MaxAttempts; attempt++ {
		base, err := p.Read(ctx, collection)
		if err != nil {
			return contract.Head{}, err
		}
		ch, err := build(ctx, base)
		if err != nil {
			return contract.Head{}, err
		}
		head, err := p.commitOn(ctx, base, ch)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return head, err
	}
	return contract.Head{}, fmt.Errorf("commit to %s: %w after %d attempts", collection, ErrConflict, p.opts.MaxAttempts)
}

// commitOn writes the new version and CASes the head from base. ErrConflict
// means nothing became visible.
func (p *Publisher) commitOn(ctx context.Context, base Snapshot, ch Change) (contract.Head, error) {
	if ch.NotAfterUnixMs > 0 && p.now().UnixMilli() > ch.NotAfterUnixMs {
		return contract.Head{}, fmt.Errorf("commit to %s: %w (%d)", base.Head.Collection, ErrExpired, ch.NotAfterUnixMs)
	}
	np, err := applyChange(ctx, base.Root, base.Head.Version+1, func(ctx context.Context, ref contract.PartRef) (contract.Part, error) {
		return ch.memo.loadPart(ctx, p, ref)
	},
		ch.Added, ch.Removed, p.opts.MaxPartObjects)
	if err != nil {
		return contract.Head{}, err
	}
	for _, key := range slices.Sorted(maps.Keys(np.bodies)) {
		if _, err := p.objects.Put(ctx, key, np.bodies[key]); err != nil {
			return contract.Head{}, fmt.Errorf("write part %s: %w", key, err)
		}
	}
	change, err := buildChange(ctx, base.Root.Collection, base.Root.Incarnation, base.Head.Version+1, ch.Added, ch.Removed, p.opts.MaxInlineChange, p.opts.MaxPartObjects, p.putPart)
	if err != nil {
		return contract.Head{}, err
	}
	root := contract.Manifest{
		SchemaVersion: contract.SchemaVersion, Collection: base.Root.Collection, Incarnation: base.Root.Incarnation, Version: base.Head.Version + 1,
		ParentVersion: base.Head.Version, ParentKey: base.Head.ManifestKey, ParentChecksum: base.Head.ManifestChecksum,
		CommitTsUnixMs: max(p.now().UnixMilli(), base.Root.CommitTsUnixMs+1), NextSeq: base.Root.NextSeq + ch.Seqs, Origin: ch.Origin,
		Change: change, Parts: nonNilRefs(np.refs), Summary: np.summary,
	}
	head, body, err := p.writeRoot(ctx, root)
	if err != nil {
		return head, err
	}
	if p.beforeCAS != nil {
		p.beforeCAS()
	}
	if ch.NotAfterUnixMs > 0 && p.now().UnixMilli() > ch.NotAfterUnixMs {
		p.withdrawRoot(ctx, head)
		return head, fmt.Errorf("cas head of %s: %w (%d)", root.Collection, ErrExpired, ch.NotAfterUnixMs)
	}
	if err := p.recheckFacts(ctx, root.Collection, ch.Facts); err != nil {
		p.withdrawRoot(ctx, head)
		return head, err
	}
	_, err = p.objects.PutIfMatch(ctx, contract.HeadKey(root.Collection), body, base.etag)
	switch {
	case err == nil:
		p.log.Info("head committed", "collection", root.Collection, "version", root.Version, "origin", root.Origin.Kind)
		return head, nil
	case errors.Is(err, store.ErrPreconditionFailed) && p.opts.TrustRefusal:
		// The mutation rule 6 and 13 exist against: a 412 taken at its word.
		return head, fmt.Errorf("cas head of %s from v%d: %w", root.Collection, base.Head.Version, ErrConflict)
	case errors.Is(err, store.ErrPreconditionFailed), errors.Is(err, store.ErrAmbiguous):
		// A 412 may be the SDK's retry of our own applied CAS whose answer
		// was lost (rules 6 and 13), and an ambiguous answer says nothing:
		// the head says what happened. It names our root (its key carries
		// the root's checksum, unique to this commit) only if our write
		// is the one that landed.
		now, rerr := p.Read(ctx, root.Collection)
		if rerr != nil {
			return head, fmt.Errorf("cas head of %s: outcome unknown and re-read failed: %w", root.Collection, errors.Join(err, rerr))
		}
		if now.Head.ManifestChecksum == head.ManifestChecksum {
			p.log.Info("head committed (own write recognised)", "collection", root.Collection, "version", root.Version, "origin", root.Origin.Kind)
			return head, nil
		}
		return head, fmt.Errorf("cas head of %s from v%d (head is v%d): %w", root.Collection, base.Head.Version, now.Head.Version, ErrConflict)
	default:
		return head, fmt.Errorf("cas head of %s: %w", root.Collection, err)
	}
}

func (p *Publisher) putPart(ctx context.Context, key string, body []byte) error {
	_, err := p.objects.Put(ctx, key, body)
	return err
}

// rootDeleter is a plain delete (awsio.Bucket has it).
type rootDeleter interface {
	Delete(ctx context.Context, key string) error
}

// withdrawRoot removes the root of a commit refused before its head CAS
// (expired, CCS facts changed or unreadable): no head ever named it and its
// key is unique to this commit (it carries the root's checksum), so nothing
// else can need it. Left in place it stands above the head, where a root
// may be a regressed head's, and GC keeps every object it names: a
// transition refused stale_facts kept its output forever (make sim
// SEEDS=10000, seed 2247). Best effort: a root left behind only keeps
// storage.
func (p *Publisher) withdrawRoot(ctx context.Context, head contract.Head) {
	d, ok := p.objects.(rootDeleter)
	if !ok || p.crashAfterRoot {
		return
	}
	if err := d.Delete(ctx, head.ManifestKey); err != nil {
		p.log.Warn("refused commit's root left in place", "collection", head.Collection, "key", head.ManifestKey, "err", err)
	}
}

// writeRoot stores an immutable root and returns the head that names it.
func (p *Publisher) writeRoot(ctx context.Context, root contract.Manifest) (contract.Head, []byte, error) {
	body, err := contract.Encode(root)
	if err != nil {
		return contract.Head{}, nil, err
	}
	sum := contract.Checksum(body)
	key := contract.ManifestKey(root.Collection, root.Inc(), root.Version, sum)
	if _, err := p.objects.PutIfAbsent(ctx, key, body); err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
		return contract.Head{}, nil, fmt.Errorf("write root %s: %w", key, err)
	}
	head := contract.Head{SchemaVersion: contract.SchemaVersion, Collection: root.Collection, Incarnation: root.Incarnation, Version: root.Version,
		ManifestKey: key, ManifestChecksum: sum, CommittedAtUnixMs: root.CommitTsUnixMs}
	hb, err := contract.Encode(head)
	return head, hb, err
}

func nonNil(s []contract.ObjectEntry) []contract.ObjectEntry {
	if s == nil {
		return []contract.ObjectEntry{}
	}
	return s
}

func nonNilRefs(s []contract.PartRef) []contract.PartRef {
	if s == nil {
		return []contract.PartRef{}
	}
	return s
}

// memo holds the immutable roots and parts one cutover read (their keys
// carry their checksums), so that its retries after a lost head CAS read
// only what is new: a cutover whose every attempt re-read the lineage lost
// every CAS to a writer committing every 100 ms. One call's lifetime: a
// root deleted meanwhile is not seen deleted by that call, which reads it
// verified once. A nil memo reads through.
type memo struct {
	roots map[string]contract.Manifest
	parts map[string]contract.Part
}

func newMemo() *memo {
	return &memo{roots: map[string]contract.Manifest{}, parts: map[string]contract.Part{}}
}

func (m *memo) openRoot(ctx context.Context, p *Publisher, key, checksum string) (contract.Manifest, error) {
	if m == nil {
		return p.openRoot(ctx, key, checksum)
	}
	if r, ok := m.roots[key+checksum]; ok {
		return r, nil
	}
	r, err := p.openRoot(ctx, key, checksum)
	if err == nil {
		m.roots[key+checksum] = r
	}
	return r, err
}

func (m *memo) loadPart(ctx context.Context, p *Publisher, ref contract.PartRef) (contract.Part, error) {
	if m == nil {
		return p.loadPart(ctx, ref)
	}
	if pt, ok := m.parts[ref.Key+ref.Checksum]; ok {
		return pt, nil
	}
	pt, err := p.loadPart(ctx, ref)
	if err == nil {
		m.parts[ref.Key+ref.Checksum] = pt
	}
	return pt, err
}
