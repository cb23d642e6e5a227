package observe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/store"
)

type memObjects map[string][]byte

func (m memObjects) Get(_ context.Context, key string) ([]byte, error) {
	b, ok := m[key]
	if !ok {
		return nil, store.ErrNotFound
	}
	return b, nil
}

type memState map[string]observe.Observed

func (m memState) Advance(_ context.Context, st observe.Observed) (observe.Observed, error) {
	prev := m[st.Collection]
	if prev.Version >= st.Version {
		return prev, fmt.Errorf("observed v%d: %w", prev.Version, store.ErrConditionFailed)
	}
	m[st.Collection] = st
	return prev, nil
}
func (m memState) Get(_ context.Context, c string, _ uint64) (observe.Observed, error) {
	return m[c], nil
}
func (m memState) Revert(_ context.Context, st, prev observe.Observed) error {
	m[st.Collection] = prev
	return nil
}

type recQueue struct{ tasks []contract.Task }

func (q *recQueue) Enqueue(_ context.Context, tasks []contract.Task) error {
	q.tasks = append(q.tasks, tasks...)
	return nil
}

type fixedFacts struct{ f contract.CollectionFacts }

func (f fixedFacts) Facts(context.Context, string) (contract.CollectionFacts, error) { return f.f, nil }
func (f fixedFacts) Collections(context.Context) ([]string, error) {
	return []string{f.f.Collection}, nil
}

// commitRoot writes version v of "c1" whose parts have the given lifecycle
// fields (the observer reads the root only, never the parts).
func commitRoot(t *testing.T, objs memObjects, v uint64, parts ...contract.PartRef) {
	t.Helper()
	m := contract.Manifest{SchemaVersion: 1, Collection: "c1", Version: v, CommitTsUnixMs: 1, Origin: contract.Origin{Kind: contract.OriginAppend},
		Change: contract.Change{Added: []contract.ObjectEntry{}, Removed: []contract.ObjectEntry{}}, Parts: []contract.PartRef{}}
	if v > 1 {
		m.ParentVersion, m.ParentChecksum = v-1, contract.Checksum([]byte("parent"))
		m.ParentKey = contract.ManifestKey("c1", 1, v-1, m.ParentChecksum)
	}
	for i, p := range parts {
		sum := contract.Checksum(fmt.Appendf(nil, "part %d %d", v, i))
		p.Key, p.Checksum, p.ObjectCount = contract.PartKey("c1", 1, v, sum), sum, 1
		p.FirstKey = fmt.Sprintf("%sl%d/x.seg", contract.DataPrefix("c1"), i)
		p.LastKey = p.FirstKey
		m.Parts = append(m.Parts, p)
		m.Summary.Objects++
	}
	body, err := contract.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	sum := contract.Checksum(body)
	objs[contract.ManifestKey("c1", 1, v, sum)] = body
	head, _ := contract.Encode(contract.Head{SchemaVersion: 1, Collection: "c1", Version: v, ManifestKey: contract.ManifestKey("c1", 1, v, sum), ManifestChecksum: sum, CommittedAtUnixMs: 1})
	objs[contract.HeadKey("c1")] = head
}

func part(minMaxTs int64, tiers ...string) contract.PartRef {
	return contract.PartRef{MinObjectMaxTsUnixMs: minMaxTs, Tiers: tiers}
}

const hour = int64(time.Hour / time.Millisecond)

// tierPart is a part reference with per-tier minimum max_ts.
func tierPart(mins map[string]int64) contract.PartRef {
	var p contract.PartRef
	for _, t := range []string{"cold", "hot", "warm"} {
		if m, ok := mins[t]; ok {
			p.Tiers, p.TierMinMaxTsUnixMs = append(p.Tiers, t), append(p.TierMinMaxTsUnixMs, m)
			if len(p.Tiers) == 1 || m < p.MinObjectMaxTsUnixMs {
				p.MinObjectMaxTsUnixMs = m
			}
		}
	}
	return p
}

// The observer enqueues a lifecycle_transition only when the CCS facts
// have a transition and a part of another tier is old enough; it takes
// precedence over compaction (one rewrite per base) and never runs for a
// tombstoned collection.
func TestObserverTransitionDueOnlyWhenFactsAndPartsSaySo(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	nowMs := now.UnixMilli()
	cold := contract.Lifecycle{TransitionAfterMs: hour, TransitionToTier: contract.TierCold}
	for _, tc := range []struct {
		name       string
		lc         contract.Lifecycle
		tomb       bool
		compaction bool
		parts      []contract.PartRef
		want       []contract.TaskKind
	}{
		{"no transition policy", contract.Lifecycle{RetentionMs: hour}, false, false, []contract.PartRef{part(nowMs-10*hour, "hot")}, nil},
		{"old objects already in the target tier", cold, false, false, []contract.PartRef{part(nowMs-10*hour, "cold")}, nil},
		{"objects younger than the transition age", cold, false, false, []contract.PartRef{part(nowMs-hour+2*60_000, "hot"), part(nowMs-10*hour, "cold")}, nil},
		{"old hot objects", cold, false, false, []contract.PartRef{part(nowMs-10*hour, "cold"), part(nowMs-2*hour, "hot", "warm")}, []contract.TaskKind{contract.KindLifecycleTransition}},
		{"transition before compaction", cold, false, true, []contract.PartRef{part(nowMs-2*hour, "hot")}, []contract.TaskKind{contract.KindLifecycleTransition}},
		{"compaction alone", cold, false, true, []contract.PartRef{part(nowMs-10*hour, "cold")}, []contract.TaskKind{contract.KindCompaction}},
		{"tombstoned", cold, true, false, []contract.PartRef{part(nowMs-2*hour, "hot")}, []contract.TaskKind{contract.KindTombstoneCleanup}},
		// After a transition: old objects already cold beside young hot
		// ones in one part. Per tier it is not due; compaction runs.
		{"mixed part: old cold, young hot", cold, false, true, []contract.PartRef{tierPart(map[string]int64{"cold": nowMs - 10*hour, "hot": nowMs - 60_000})}, []contract.TaskKind{contract.KindCompaction}},
		{"mixed part: old hot", cold, false, true, []contract.PartRef{tierPart(map[string]int64{"cold": nowMs - 10*hour, "hot": nowMs - 2*hour})}, []contract.TaskKind{contract.KindLifecycleTransition}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, q := memObjects{}, &recQueue{}
			commitRoot(t, objs, 1, tc.parts...)
			cfg := observe.DefaultConfig()
			cfg.CompactionDue = func(contract.Summary) bool { return tc.compaction }
			facts := fixedFacts{contract.CollectionFacts{Collection: "c1", FactsVersion: 3, Lifecycle: tc.lc, Tombstoned: tc.tomb}}
			res, err := observe.New(objs, memState{}, q, facts, func() time.Time { return now }, cfg, nil, nil).Observe(context.Background(), "c1")
			if err != nil {
				t.Fatal(err)
			}
			var kinds []contract.TaskKind
			for _, tk := range q.tasks {
				kinds = append(kinds, tk.Kind)
				if tk.Kind == contract.KindLifecycleTransition && tk.SweepUnixMs != contract.SweepMinute(nowMs) {
					t.Fatalf("transition task sweep %d, want %d", tk.SweepUnixMs, contract.SweepMinute(nowMs))
				}
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tc.want) {
				t.Fatalf("enqueued %v, want %v (debt %+v)", kinds, tc.want, res.Debt)
			}
		})
	}
}

// A transition becomes due with time alone: reconciliation enqueues it for
// the unchanged head once the objects age past transition_after_ms, and
// not before.
func TestReconcileEnqueuesTransitionThatBecameDue(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	clock := t0
	objs, q, st := memObjects{}, &recQueue{}, memState{}
	commitRoot(t, objs, 1, part(t0.UnixMilli()-10*60_000, "hot"))
	facts := fixedFacts{contract.CollectionFacts{Collection: "c1", FactsVersion: 1, Lifecycle: contract.Lifecycle{TransitionAfterMs: hour, TransitionToTier: contract.TierWarm}}}
	o := observe.New(objs, st, q, facts, func() time.Time { return clock }, observe.DefaultConfig(), nil, nil)
	if _, err := o.Observe(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		for _, tk := range q.tasks {
			if tk.Kind == contract.KindLifecycleTransition {
				n++
			}
		}
		return n
	}
	clock = t0.Add(30 * time.Minute)
	if _, err := o.Reconcile(context.Background(), facts); err != nil || count() != 0 {
		t.Fatalf("young objects: %d transition tasks, err %v", count(), err)
	}
	clock = t0.Add(51 * time.Minute)
	rep, err := o.Reconcile(context.Background(), facts)
	if err != nil || count() != 1 || rep.Enqueued[contract.KindLifecycleTransition] != 1 {
		t.Fatalf("aged objects: %d transition tasks (report %+v), err %v", count(), rep, err)
	}
	if q.tasks[len(q.tasks)-1].BaseManifestVersion != 1 {
		t.Fatalf("task base %+v", q.tasks[len(q.tasks)-1])
	}
}
