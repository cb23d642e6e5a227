package e2e

// Conflict-checked cutovers (issue 26; SYSTEM rule 2 as revised): a
// compaction result whose base the head moved past is submitted pinned to
// its base, and the publisher applies it on the current head only when its
// conflict check proves it conflict-free there. Each refusal clause has a
// test here: the head moves in the window after the handoff's last look and
// before the publisher reads its head (publisher OnArrival), so only the
// owner's check at the moment of effect stands between the result and the
// head; each test also runs with its clause removed and shows the harm.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/resources"
)

// checkedPolicy is cxPolicy(4) with the publisher's conflict check declared.
func checkedPolicy(conflictCheck bool) localenv.Options {
	p := cxPolicy(4)
	p.PublisherConflictCheck = conflictCheck
	return localenv.Options{NoDelivery: true, Policy: p}
}

// checkRun is one scenario's outcome.
type checkRun struct {
	env            *localenv.Env
	base           uint64 // the result's base
	completion     contract.Completion
	before, after  map[string][]byte // reads at the head the request met, and after the handoff
	cutover        bool              // a cutover of the result is in the lineage
	refusedClauses map[string]float64
}

// runChecked compacts c1 (set up by setup, then 4 level-0 objects more
// unless setup made its own), then hands the result off while move
// changes the head in the publisher's arrival window.
func runChecked(t *testing.T, opts localenv.Options, setup func(env *localenv.Env), move func(env *localenv.Env, c contract.Completion), prep ...func(env *localenv.Env)) checkRun {
	t.Helper()
	env := cxStart(t, opts)
	for _, f := range prep {
		f(env)
	}
	ctx := context.Background()
	if setup != nil {
		setup(env)
	} else {
		cxSetup(t, env, "c1", 4)
	}
	task, body := cxTask(t, env, "c1")
	if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
		t.Fatal("compaction failed")
	}
	bodies := cxReceive(t, env, resources.QueueHandoff)
	if len(bodies) != 1 {
		t.Fatalf("%d completions reported, want the compaction's", len(bodies))
	}
	c, err := contract.DecodeCompletion("test", []byte(bodies[0]))
	if err != nil {
		t.Fatal(err)
	}
	run := checkRun{env: env, base: task.BaseManifestVersion, completion: c}
	moved := false
	env.Publisher.SetOnArrival(func(ctx context.Context, req contract.CutoverRequest) {
		if moved {
			return
		}
		moved = true
		move(env, c)
		run.before = reads(t, env, "c1")
	})
	if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
		t.Fatal("handoff failed")
	}
	env.Publisher.SetOnArrival(nil)
	if !moved {
		t.Fatal("the cutover never reached the publisher")
	}
	run.after = reads(t, env, "c1")
	reqID := contract.CutoverRequestID(c.TaskID, *c.Coverage)
	for _, r := range cxCutovers(cxLineage(t, env, "c1")) {
		if r.Origin.RequestID == reqID {
			run.cutover = true
		}
	}
	run.refusedClauses = map[string]float64{}
	for _, cl := range []string{contract.ClauseIncarnation, contract.ClauseInputGone, contract.ClauseChecksumChanged, contract.ClauseDeleteSinceBase, contract.ClauseUnproven} {
		if n := cxMetricDim(env, "CutoversRefusedByCheck", "Clause", cl); n > 0 {
			run.refusedClauses[cl] = n
		}
	}
	_ = ctx
	return run
}

func reads(t *testing.T, env *localenv.Env, c string) map[string][]byte {
	t.Helper()
	got, _, err := workload.Read(context.Background(), env.Lineage, env.Bucket, c)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// readsChanged says how the reads after the handoff differ from those at
// the head the request met ("" when equal): a rewrite never changes reads.
func (r checkRun) readsChanged() string {
	for _, k := range slices.Sorted(maps.Keys(r.before)) {
		if v, ok := r.after[k]; !ok {
			return fmt.Sprintf("%s was %q, now gone", k, r.before[k])
		} else if !bytes.Equal(v, r.before[k]) {
			return fmt.Sprintf("%s was %q, now %q", k, r.before[k], v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.after)) {
		if _, ok := r.before[k]; !ok {
			return fmt.Sprintf("%s was deleted, now reads %q (resurrected)", k, r.after[k])
		}
	}
	return ""
}

// refusedBy asserts the result was refused by clause alone and nothing
// changed what reads.
func (r checkRun) refusedBy(t *testing.T, clause string) {
	t.Helper()
	if r.cutover {
		t.Fatalf("the result was cut over; want it refused by clause %s", clause)
	}
	if r.refusedClauses[clause] != 1 || len(r.refusedClauses) != 1 {
		t.Fatalf("refusals by clause %v, want one by %s", r.refusedClauses, clause)
	}
	if cxMetric(r.env, "StaleResultsDropped") != 1 {
		t.Fatalf("StaleResultsDropped %v, want the refused result dropped (rebuilt from the head)", cxMetric(r.env, "StaleResultsDropped"))
	}
	if d := r.readsChanged(); d != "" {
		t.Fatalf("reads changed: %s", d)
	}
}

// withoutClause is checkedPolicy(true) with a publisher lacking clause.
func withoutClause(clause string) localenv.Options {
	o := checkedPolicy(true)
	o.Publisher = publisher.Options{SkipClauses: []string{clause}}
	return o
}

// appendWrites commits writes to c.
func appendWrites(t *testing.T, env *localenv.Env, c string, writes ...workload.Write) contract.Head {
	t.Helper()
	h, err := env.Workload.Append(context.Background(), c, writes)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The rewrite lands on a newer head when nothing it replaces was touched:
// an append committed after its base, with deletes of the inputs' keys
// ordered after them (they keep applying to the outputs).
func TestConflictCheckedCutoverLandsOnNewerHead(t *testing.T) {
	r := runChecked(t, checkedPolicy(true), nil, func(env *localenv.Env, c contract.Completion) {
		var ws []workload.Write
		for _, k := range slices.Sorted(maps.Keys(env.Workload.Expected("c1")))[:3] {
			ws = append(ws, workload.Write{Key: k, Delete: true})
		}
		appendWrites(t, env, "c1", append(ws, workload.Write{Key: "doc-new", Payload: []byte("new")})...)
	})
	if !r.cutover || cxMetric(r.env, "CutoversRebased") != 1 || cxMetric(r.env, "StaleResultsDropped") != 0 {
		t.Fatalf("cutover %v, CutoversRebased %v, StaleResultsDropped %v: want the result applied on the newer head",
			r.cutover, cxMetric(r.env, "CutoversRebased"), cxMetric(r.env, "StaleResultsDropped"))
	}
	roots := cxLineage(t, r.env, "c1")
	if roots[0].Origin.Kind != contract.OriginCutover || roots[0].ParentVersion != r.base+1 {
		t.Fatalf("head v%d (%s) on v%d: want the cutover on v%d, the append after the base v%d", roots[0].Version, roots[0].Origin.Kind, roots[0].ParentVersion, r.base+1, r.base)
	}
	if d := r.readsChanged(); d != "" {
		t.Fatalf("reads changed: %s", d)
	}
	cxVerify(t, r.env, "c1")
}

// Clause input_gone: a writer removed one of the inputs after the base.
// Without the clause the publisher removes what is still there and adds
// the outputs: the removed object's records come back.
func TestConflictCheckRefusesInputGone(t *testing.T) {
	move := func(env *localenv.Env, c contract.Completion) {
		gone := c.Coverage.Removed[0]
		if _, err := env.Publisher.Commit(context.Background(), "c1", func(context.Context, publisher.Snapshot) (publisher.Change, error) {
			return publisher.Change{Removed: []contract.ObjectEntry{gone}, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkedRun(t, contract.ClauseInputGone, nil, move)
}

// Clause checksum_changed: a writer replaced one input in place (the same
// key, other bytes) after the base. Without the clause the publisher
// removes the key whatever it holds now: the new record is lost.
func TestConflictCheckRefusesChecksumChanged(t *testing.T) {
	move := func(env *localenv.Env, c contract.Completion) {
		old := c.Coverage.Removed[0]
		if _, err := env.Publisher.Commit(context.Background(), "c1", func(ctx context.Context, base publisher.Snapshot) (publisher.Change, error) {
			var buf bytes.Buffer
			w := segment.NewWriter(&buf, segment.WriterOptions{})
			if err := w.Add(segment.Record{Key: "doc-inplace", Seq: base.Root.NextSeq, TsUnixMs: env.Now().UnixMilli(), Payload: []byte("rewritten")}); err != nil {
				return publisher.Change{}, err
			}
			f, err := w.Close()
			if err != nil {
				return publisher.Change{}, err
			}
			if _, err := env.Bucket.Put(ctx, old.Key, buf.Bytes()); err != nil {
				return publisher.Change{}, err
			}
			repl := f.Entry(old.Key, int64(buf.Len()), contract.Checksum(buf.Bytes()), contract.TierHot, 0)
			return publisher.Change{Removed: []contract.ObjectEntry{old}, Added: []contract.ObjectEntry{repl}, Seqs: 1, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkedRun(t, contract.ClauseChecksumChanged, nil, move)
}

// Clause delete_since_base: after the base, another writer's upload built
// on an older head is committed: its records are ordered among the
// inputs' (a delete of an input's key, and a put of a key whose delete
// marker the rewrite dropped). Without the clause the dropped marker no
// longer hides the older put: a deleted key reads again.
func TestConflictCheckRefusesDeleteSinceBase(t *testing.T) {
	var late workload.Upload
	setup := func(env *localenv.Env) {
		ctx := context.Background()
		if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
		appendWrites(t, env, "c1", workload.Write{Key: "doc-a", Payload: []byte("a")})
		var err error
		// Built on v2: its records take v2's next sequence numbers.
		late, err = env.Workload.Upload(ctx, "c1", contract.DataPrefix("c1")+"l0/ingest-late.seg", 0,
			[]workload.Write{{Key: "doc-a", Delete: true}, {Key: "doc-k", Payload: []byte("zombie")}})
		if err != nil {
			t.Fatal(err)
		}
		appendWrites(t, env, "c1", workload.Write{Key: "doc-b", Payload: []byte("b")}, workload.Write{Key: "doc-k", Payload: []byte("k")},
			workload.Write{Key: "doc-x", Payload: []byte("x")}, workload.Write{Key: "doc-k", Delete: true})
		appendWrites(t, env, "c1", workload.Write{Key: "doc-c", Payload: []byte("c")})
		appendWrites(t, env, "c1", workload.Write{Key: "doc-d", Payload: []byte("d")})
		cxSettle(t, env)
	}
	move := func(env *localenv.Env, c contract.Completion) {
		if _, err := env.Workload.CommitUpload(context.Background(), late); err != nil {
			t.Fatal(err)
		}
	}
	checkedRun(t, contract.ClauseDeleteSinceBase, setup, move)
}

// Clause incarnation: the name was dropped and re-created after the base;
// the new lifetime imported the same objects and committed past the
// base's version number. Without the clause the old lifetime's result is
// applied to the new one.
func TestConflictCheckRefusesIncarnationChanged(t *testing.T) {
	move := func(env *localenv.Env, c contract.Completion) {
		ctx := context.Background()
		head, err := env.Lineage.Head(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		// The publisher's side of the drop: its head retired (removed as
		// Retire does; Retire itself asks CCS, which this scene keeps
		// unchanged so that the clause, not the facts check, decides).
		if err := env.Bucket.Delete(ctx, contract.HeadKey("c1")); err != nil || head.Version == 0 {
			t.Fatalf("retire: %v", err)
		}
		if _, err := env.Publisher.CreateIncarnation(ctx, "c1", 2); err != nil {
			t.Fatal(err)
		}
		// The new lifetime imports the same objects ...
		if _, err := env.Publisher.Commit(ctx, "c1", func(_ context.Context, base publisher.Snapshot) (publisher.Change, error) {
			var top uint64
			for _, o := range c.Coverage.Removed {
				top = max(top, o.MaxSeq)
			}
			return publisher.Change{Added: c.Coverage.Removed, Seqs: top + 1 - base.Root.NextSeq, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		// ... and commits past the old base's version number, away from
		// the inputs' keys.
		for h := uint64(2); h <= c.BaseManifestVersion; h++ {
			appendWrites(t, env, "c1", workload.Write{Key: fmt.Sprintf("zz-%d", h), Payload: []byte("z")})
		}
	}
	checkedRun(t, contract.ClauseIncarnation, nil, move)
}

// Clause incarnation, the other way out of the base's lineage: the head
// was restored to a version older than the base (every input still in
// it). make sim found it (seed 676): a head below the base had no version
// "since the base" to judge, and the result was applied to the restored
// lineage.
func TestConflictCheckRefusesHeadRestoredBelowBase(t *testing.T) {
	setup := func(env *localenv.Env) {
		ctx := context.Background()
		cxSetup(t, env, "c1", 4)
		// v6 imports a level-1 object: the level-0 job's base, not its input.
		u, err := env.Workload.Upload(ctx, "c1", contract.DataPrefix("c1")+"l1/import-1/0000.seg", 1, []workload.Write{{Key: "imp-1", Payload: []byte("i")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Workload.CommitUpload(ctx, u); err != nil {
			t.Fatal(err)
		}
		cxSettle(t, env)
	}
	move := func(env *localenv.Env, c contract.Completion) {
		if _, err := env.Publisher.Restore(context.Background(), "c1", c.BaseManifestVersion-1); err != nil {
			t.Fatal(err)
		}
	}
	runChecked(t, checkedPolicy(true), setup, move).refusedBy(t, contract.ClauseIncarnation)
	t.Run("clause_removed", func(t *testing.T) {
		if r := runChecked(t, withoutClause(contract.ClauseIncarnation), setup, move); !r.cutover {
			t.Fatalf("without the clause the result was still refused (%v)", r.refusedClauses)
		}
	})
}

// Facts changed since the task was judged (the collection was
// tombstoned) while the head also moved: refused at the head CAS
// (stale_facts); without the publisher's re-check it is applied.
func TestConflictCheckRefusesFactsChanged(t *testing.T) {
	move := func(env *localenv.Env, c contract.Completion) {
		appendWrites(t, env, "c1", workload.Write{Key: "doc-new", Payload: []byte("new")})
		changeFacts(t, env, "c1", func(f *contract.CollectionFacts) {
			f.Tombstoned, f.ReservationHorizonUnixMs = true, env.Now().UnixMilli()
		})
	}
	r := runChecked(t, checkedPolicy(true), nil, move)
	if r.cutover || cxMetric(r.env, "StaleFactsDropped") != 1 {
		t.Fatalf("cutover %v, StaleFactsDropped %v: want the result refused at the head CAS", r.cutover, cxMetric(r.env, "StaleFactsDropped"))
	}
	t.Run("clause_removed", func(t *testing.T) {
		o := checkedPolicy(true)
		o.Publisher = publisher.Options{SkipFactsRecheck: true}
		if r := runChecked(t, o, nil, move); !r.cutover {
			t.Fatal("without the publisher's facts re-check the result was still refused: the test does not prove the clause")
		}
	})
}

// checkedRun runs a refusal scenario with the check whole (refused by
// clause, reads unchanged) and with clause removed (the result lands,
// and for the data clauses reads change).
func checkedRun(t *testing.T, clause string, setup func(env *localenv.Env), move func(env *localenv.Env, c contract.Completion)) {
	t.Helper()
	runChecked(t, checkedPolicy(true), setup, move).refusedBy(t, clause)
	t.Run("clause_removed", func(t *testing.T) {
		r := runChecked(t, withoutClause(clause), setup, move)
		if !r.cutover {
			t.Fatalf("without clause %s the result was still refused (%v): the test does not prove the clause", clause, r.refusedClauses)
		}
		d := r.readsChanged()
		if clause != contract.ClauseIncarnation && d == "" {
			t.Fatalf("without clause %s the result landed but reads did not change", clause)
		}
		t.Logf("without clause %s: the result landed; %s", clause, d)
	})
}

// A publisher without the capability answers conflict without the check:
// the coordinator counts it, drops the result and rebuilds from the head,
// as without the policy's declaration.
func TestPublisherWithoutConflictCheckRebuilds(t *testing.T) {
	o := checkedPolicy(true)
	o.Publisher = publisher.Options{NoConflictCheck: true}
	r := runChecked(t, o, nil, func(env *localenv.Env, c contract.Completion) {
		appendWrites(t, env, "c1", workload.Write{Key: "doc-new", Payload: []byte("new")})
	})
	if r.cutover || cxMetric(r.env, "PublisherConflictCheckMissing") != 1 || cxMetric(r.env, "StaleResultsDropped") != 1 {
		t.Fatalf("cutover %v, PublisherConflictCheckMissing %v, StaleResultsDropped %v: want a conflict recognised as the missing capability",
			r.cutover, cxMetric(r.env, "PublisherConflictCheckMissing"), cxMetric(r.env, "StaleResultsDropped"))
	}
	// The rebuild: a fresh task at the head compacts and lands.
	_, body := cxTask(t, r.env, "c1")
	cxInvoke(t, r.env, resources.FnCompaction, body)
	if n := cxHandoff(t, r.env); n != 1 || cxMetric(r.env, "CutoversAccepted") != 1 {
		t.Fatalf("rebuild reported %d completions, %v accepted", n, cxMetric(r.env, "CutoversAccepted"))
	}
	cxVerify(t, r.env, "c1")
}

// A reported rewrite holds its collection's queue group until its cutover
// is in the lineage (compaction.result_wait_ms), so the collection's next
// rewrite plans on a head without its inputs: with every queue delivered,
// the wait ends because the result landed, not at its bound.
func TestReportedRewriteHoldsItsGroupUntilItLands(t *testing.T) {
	env := cxStart(t, localenv.Options{})
	cxSetup(t, env, "c1", 4)
	if cxMetric(env, "CutoversAccepted") < 1 {
		t.Fatal("no cutover")
	}
	landed, timedOut := cxMetricDim(env, "RewriteResultWait", "Why", "landed"), cxMetricDim(env, "RewriteResultWait", "Why", "timeout")
	if landed < 1 || timedOut != 0 {
		t.Fatalf("RewriteResultWait landed %v, timeout %v: want the wait to end when the cutover landed", landed, timedOut)
	}
	cxVerify(t, env, "c1")
}

// Lifecycle transitions follow the same rule: a transition whose base the
// head moved past (an append committed in the publisher's arrival window)
// lands on the newer head when the publisher's check proves it
// conflict-free there, and is refused (input_gone) when an object it moves
// was removed since its base; what reads never changes. Without the clause
// the removed object comes back in its new tier.
func TestConflictCheckedTransition(t *testing.T) {
	embeddedOnly(t, s3ClockMoves)
	for _, tc := range []struct {
		name   string
		remove bool // the move also removes one of the transition's inputs
		skip   bool // the publisher lacks clause input_gone
	}{{"unrelated_append_lands", false, false}, {"input_removed_refused", true, false}, {"input_removed_clause_removed", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newCxClock()
			opts := localenv.Options{NoDelivery: true, Now: clock.Now, Policy: cxPolicy(100)}
			if tc.skip {
				opts.Publisher = publisher.Options{SkipClauses: []string{contract.ClauseInputGone}}
			}
			env := cxStart(t, opts)
			ctx := context.Background()
			if err := env.Workload.Create(ctx, "c1", toCold); err != nil {
				t.Fatal(err)
			}
			cxAppend(t, env, "c1", 3)
			cxSettle(t, env)
			clock.Advance(2 * time.Hour)
			task, body := transitionTask(t, env, "c1")
			if failed, _ := cxInvoke(t, env, resources.FnCompaction, body); len(failed) > 0 {
				t.Fatal("transition failed")
			}
			bodies := cxReceive(t, env, resources.QueueHandoff)
			if len(bodies) != 1 {
				t.Fatalf("%d completions reported, want the transition's", len(bodies))
			}
			c, err := contract.DecodeCompletion("test", []byte(bodies[0]))
			if err != nil {
				t.Fatal(err)
			}
			var before map[string][]byte
			moved := false
			env.Publisher.SetOnArrival(func(ctx context.Context, req contract.CutoverRequest) {
				if moved {
					return
				}
				moved = true
				if tc.remove {
					gone := c.Coverage.Removed[0]
					if _, err := env.Publisher.Commit(ctx, "c1", func(context.Context, publisher.Snapshot) (publisher.Change, error) {
						return publisher.Change{Removed: []contract.ObjectEntry{gone}, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
					}); err != nil {
						t.Error(err)
					}
				}
				appendWrites(t, env, "c1", workload.Write{Key: "doc-young", Payload: []byte("young")})
				before = reads(t, env, "c1")
			})
			if failed, _ := cxInvoke(t, env, resources.FnHandoff, bodies...); len(failed) > 0 {
				t.Fatal("handoff failed")
			}
			env.Publisher.SetOnArrival(nil)
			if !moved {
				t.Fatal("the cutover never reached the publisher")
			}
			after := reads(t, env, "c1")
			run := checkRun{before: before, after: after}
			if d := run.readsChanged(); tc.skip {
				if d == "" {
					t.Fatal("without clause input_gone the transition did not change reads: the test does not prove the clause")
				}
				t.Logf("without clause input_gone: %s", d)
				return
			} else if d != "" {
				t.Fatalf("reads changed: %s", d)
			}
			_, objs := headObjects(t, env, "c1")
			rebased := cxMetricDim(env, "CutoversRebased", "Kind", string(contract.KindLifecycleTransition))
			refused := cxMetricDim(env, "CutoversRefusedByCheck", "Clause", contract.ClauseInputGone)
			if tc.remove {
				if rebased != 0 || refused != 1 || tiers(objs)[contract.TierCold] != 0 {
					t.Fatalf("transition of v%d: CutoversRebased %v, refused by input_gone %v, tiers %v: want it refused, nothing moved", task.BaseManifestVersion, rebased, refused, tiers(objs))
				}
				return
			}
			if rebased != 1 || refused != 0 || tiers(objs)[contract.TierCold] != 3 || tiers(objs)[contract.TierHot] != 1 {
				t.Fatalf("transition of v%d: CutoversRebased %v, refused %v, tiers %v: want it applied on the newer head (3 cold + the young append hot)", task.BaseManifestVersion, rebased, refused, tiers(objs))
			}
			cxVerify(t, env, "c1")
		})
	}
}
