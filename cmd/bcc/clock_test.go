package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

// abandonedOutput builds a head regression whose abandoned lineage holds a
// coordinator-owned rewrite output: c1 v1..v2, a compaction cutover v3
// (its output), an append v4 the coordinator observed, then the head put
// back to v2. The environment's clock starts 48 hours before the real one
// (every grace of the output has passed) and ends at the real clock.
func abandonedOutput(t *testing.T) (*testEnv, string) {
	t.Helper()
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	e.clk.Advance(-48 * time.Hour)
	ctx := e.ctx
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Workload.Append(ctx, "c1", e.Workload.Random()); err != nil { // v2
		t.Fatal(err)
	}
	snap, err := e.Publisher.Read(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	head := snap.Head
	task := contract.NewTask(contract.KindCompaction, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli())
	key := contract.RewriteOutputKey("c1", 1, task.TaskID, 0)
	body := []byte("merged output of " + task.TaskID)
	if _, err := e.Bucket.Put(ctx, key, body); err != nil {
		t.Fatal(err)
	}
	now := e.clk.Now().UnixMilli()
	// The merge of v2's objects (the handoff checks a rewrite keeps its
	// inputs' records and ranges).
	out := contract.ObjectEntry{Key: key, Size: int64(len(body)), Checksum: contract.Checksum(body), Tier: contract.TierHot, Level: 1}
	for i, o := range snap.Root.Change.Added {
		out.DocCount, out.DeleteCount = out.DocCount+o.DocCount, out.DeleteCount+o.DeleteCount
		if i == 0 {
			out.MinTsUnixMs, out.MaxTsUnixMs, out.MinSeq, out.MaxSeq, out.MinRecordKey, out.MaxRecordKey = o.MinTsUnixMs, o.MaxTsUnixMs, o.MinSeq, o.MaxSeq, o.MinRecordKey, o.MaxRecordKey
			continue
		}
		out.MinTsUnixMs, out.MaxTsUnixMs = min(out.MinTsUnixMs, o.MinTsUnixMs), max(out.MaxTsUnixMs, o.MaxTsUnixMs)
		out.MinSeq, out.MaxSeq = min(out.MinSeq, o.MinSeq), max(out.MaxSeq, o.MaxSeq)
		out.MinRecordKey, out.MaxRecordKey = min(out.MinRecordKey, o.MinRecordKey), max(out.MaxRecordKey, o.MaxRecordKey)
	}
	comp := contract.Completion{SchemaVersion: 1, TaskID: task.TaskID, Kind: task.Kind, Collection: "c1",
		BaseManifestVersion: head.Version, BaseManifestChecksum: head.ManifestChecksum, CCSFactsVersion: 1, Outcome: contract.OutcomeSucceeded,
		StartedAtUnixMs: now, FinishedAtUnixMs: now, Coverage: &contract.Coverage{Removed: snap.Root.Change.Added, Added: []contract.ObjectEntry{out}}}
	uc, _ := app.HandoffUseCase(e.Config, e.FunctionClients(resources.FnHandoff), app.Runtime{Now: e.clk.Now, Out: e.Metrics, Log: e.Log}, app.HandoffOptions{})
	if res, err := uc.Process(ctx, comp); err != nil || res.Outcome != handoff.OutcomeAccepted {
		t.Fatalf("compaction cutover: %+v %v", res, err) // v3 holds the output
	}
	if _, err := e.Workload.Append(ctx, "c1", e.Workload.Random()); err != nil { // v4
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	if _, err := e.Publisher.Restore(ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	e.clk.mu.Lock()
	e.clk.t = time.Now().UTC()
	e.clk.mu.Unlock()
	if err := e.Watermark.Publish(ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	return e, key
}

// sweep runs the GC function on c1's head as its queue would.
func (e *testEnv) sweep(t *testing.T) {
	t.Helper()
	head, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	runGC(t, e, contract.NewSweepTask(contract.KindGC, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli()))
}

func (e *testEnv) exists(t *testing.T, key string) bool {
	t.Helper()
	_, err := e.Bucket.Size(e.ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// Rule 16: a confirmation is recorded at the system's clock. An operator
// who keeps the incident's -now is refused (nothing recorded); the
// confirmation made then protects the abandoned roots' objects for a token
// lifetime from the real confirmation time, and not longer.
func TestConfirmationWithAnOldNowStillProtectsForATokenLifetime(t *testing.T) {
	e, out := abandonedOutput(t)
	ctx := e.ctx
	incident := strconv.FormatInt(time.Now().Add(-47*time.Hour).UnixMilli(), 10)
	observed := awsio.NewObservedTable(e.Clients.Dynamo, e.Config.Table)
	res := e.cli("confirm-lineage", "--collection", "c1", "--by", "test", "--now", incident, "--yes")
	if res.code != exitError || !strings.Contains(res.stderr, "--now") {
		t.Fatalf("--now with --yes must be refused (exit 1): %+v", res)
	}
	if _, ok, err := observed.LineageConfirmation(ctx, "c1", 1); err != nil || ok {
		t.Fatalf("a refused confirmation recorded something: %v %v", ok, err)
	}
	before := time.Now()
	if res := e.cli("confirm-lineage", "--collection", "c1", "--by", "test", "--yes"); res.code != exitOK {
		t.Fatalf("confirm: %+v", res)
	}
	after := time.Now()
	conf, ok, err := observed.LineageConfirmation(ctx, "c1", 1)
	if err != nil || !ok {
		t.Fatalf("no confirmation recorded: %v", err)
	}
	if at := conf.ConfirmedAtUnixMs; at < before.UnixMilli() || at > after.UnixMilli() {
		t.Fatalf("confirmed at %d, not the system's clock [%d, %d]", at, before.UnixMilli(), after.UnixMilli())
	}
	e.sweep(t)
	if !e.exists(t, out) {
		t.Fatalf("the abandoned root's output was deleted right after the confirmation: %s", out)
	}
	e.clk.Advance(10 * time.Minute) // inside the token lifetime
	e.sweep(t)
	if !e.exists(t, out) {
		t.Fatalf("the abandoned root's output was deleted inside the token lifetime: %s", out)
	}
	e.clk.Advance(10 * time.Minute) // token lifetime + skew passed since the confirmation
	if err := e.Watermark.Publish(ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.sweep(t)
	if e.exists(t, out) {
		t.Fatalf("positive control: a token lifetime after the confirmation the output is reclaimed: %s", out)
	}
}

// Rule 16 for recover: --confirm with --now is refused; the release
// writes the system's clock as the released lease's expiry.
func TestRecoverConfirmTakesTheSystemClock(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true})
	ctx := e.ctx
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Settle(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h, _ := e.Lineage.Head(ctx, "c1")
	d := e.Config.Policy.LeaseDuration.D()
	table := awsio.NewLeaseTable(e.Clients.Dynamo, e.Config.Table)
	leases := e.workerLeases(table)
	healthy, err := leases.Acquire(ctx, contract.NewTask(contract.KindCompaction, "c1", h.Version, h.ManifestChecksum, 1, 0), "healthy", e.clk.Now(), d)
	if err != nil {
		t.Fatal(err)
	}
	stalled, err := leases.Acquire(ctx, contract.NewTask(contract.KindCompaction, "c1", h.Version, h.ManifestChecksum, 2, 0), "stalled", e.clk.Now().Add(-90*time.Second), d)
	if err != nil {
		t.Fatal(err)
	}
	// A --now 100 s ahead judges the healthy lease suspect (no heartbeat
	// for more than three intervals, not yet expired) and would release
	// it: refused before anything is read or written.
	future := strconv.FormatInt(time.Now().Add(100*time.Second).UnixMilli(), 10)
	if res := e.cli("recover", "--confirm", "--now", future); res.code != exitError || !strings.Contains(res.stderr, "--now") {
		t.Fatalf("recover --confirm --now must be refused: %+v", res)
	}
	if st, _, _ := table.Get(ctx, healthy.TaskID); st.Lease.LeaseEpoch != healthy.LeaseEpoch {
		t.Fatal("a refused recover released the healthy lease")
	}
	before := time.Now()
	if res := e.cli("recover", "--confirm", "--by", "test"); res.code != exitOK || strings.Count(res.stdout, "released") != 1 {
		t.Fatalf("recover --confirm: %+v", res)
	}
	after := time.Now()
	st, _, err := table.Get(ctx, stalled.TaskID)
	if err != nil || st.Lease.LeaseEpoch != stalled.LeaseEpoch+1 {
		t.Fatalf("the stalled lease was not released: %+v %v", st, err)
	}
	if x := st.Lease.LeaseExpiryUnixMs; x < before.UnixMilli() || x > after.UnixMilli() {
		t.Fatalf("released with expiry %d, not the system's clock [%d, %d]", x, before.UnixMilli(), after.UnixMilli())
	}
	if st, _, _ := table.Get(ctx, healthy.TaskID); st.Lease.LeaseEpoch != healthy.LeaseEpoch {
		t.Fatal("recover released the healthy lease")
	}
}

// Rule 16 for apply: a plan's as_of is an input. A plan made with a --now
// ahead of the clock proposes releasing a healthy lease; apply justifies
// every release at the system's clock and refuses it. A plan from the
// future beyond the skew allowance is refused whole.
func TestApplyJustifiesReleasesAtTheSystemClock(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true})
	ctx := e.ctx
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Settle(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h, _ := e.Lineage.Head(ctx, "c1")
	table := awsio.NewLeaseTable(e.Clients.Dynamo, e.Config.Table)
	healthy, err := e.workerLeases(table).Acquire(ctx, contract.NewTask(contract.KindCompaction, "c1", h.Version, h.ManifestChecksum, 1, 0), "healthy", time.Now(), e.Config.Policy.LeaseDuration.D())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plan := func(ahead time.Duration, release bool) string {
		r := e.cli("plan", "--collection", "c1", "-o", "json", "--now", strconv.FormatInt(time.Now().Add(ahead).UnixMilli(), 10))
		if release != strings.Contains(r.stdout, `"release_lease"`) {
			t.Fatalf("a plan %s ahead: want a release intent %v: %+v", ahead, release, r)
		}
		f := dir + "/plan-" + ahead.String() + ".json"
		if err := os.WriteFile(f, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if r := e.cli("apply", "--plan", plan(100*time.Second, true), "--confirm"); r.code != exitAction || !strings.Contains(r.stdout, "not releasable at the system's clock") {
		t.Fatalf("apply must refuse the release at the system's clock: %+v", r)
	}
	if r := e.cli("apply", "--plan", plan(time.Hour, false), "--confirm"); r.code != exitError || !strings.Contains(r.stderr, "later than the system's clock") {
		t.Fatalf("a plan from the future must be refused: %+v", r)
	}
	if st, _, _ := table.Get(ctx, healthy.TaskID); st.Lease.LeaseEpoch != healthy.LeaseEpoch {
		t.Fatal("apply released the healthy lease")
	}
}

// Rule 16 for apply: the enqueue is a write, at the system's clock. A
// plan made with --now six hours back is current (nothing moved), and
// apply --confirm enqueues its tasks at the clock: enqueued_at_unix_ms,
// and a sweep task's sweep_unix_ms (a lifecycle transition's cutoff, part
// of the task's identity), are the clock's, never the plan's as_of.
func TestApplyEnqueuesAtTheSystemClock(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	if err := e.Workload.Create(e.ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-6 * time.Hour)
	p := e.cli("plan", "-o", "json", "--now", strconv.FormatInt(past.UnixMilli(), 10))
	if !strings.Contains(p.stdout, `"kind": "enqueue"`) {
		t.Fatalf("fixture: the plan has no enqueue intent: %+v", p)
	}
	pf := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(pf, []byte(p.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	r := e.cli("apply", "--plan", pf, "--confirm", "--by", "review")
	after := time.Now()
	if r.code == exitError {
		t.Fatalf("apply --confirm of a current plan: %+v", r)
	}
	n, sweeps := 0, 0
	for _, class := range []string{resources.QueueCompaction, resources.QueueGC} {
		out, err := e.Clients.SQS.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.Prov.QueueURLs[class]), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			task, err := contract.DecodeTask("review", []byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatal(err)
			}
			n++
			t.Logf("enqueued %s %s sweep %d", task.Kind, task.TaskID, task.SweepUnixMs)
			if task.SweepUnixMs != 0 {
				sweeps++
				if sw := task.SweepUnixMs; sw < contract.SweepMinute(before.UnixMilli()) || sw > after.UnixMilli() {
					t.Errorf("apply --confirm enqueued %s with sweep_unix_ms %s (the plan's --now), not the system's clock's minute",
						task.TaskID, time.UnixMilli(sw).UTC().Format(time.RFC3339))
				}
			}
			if at := task.EnqueuedAtUnixMs; at < before.Add(-time.Second).UnixMilli() || at > after.UnixMilli() {
				t.Errorf("apply --confirm enqueued %s with enqueued_at_unix_ms %s (the plan's --now), not the system's clock [%s, %s]",
					task.TaskID, time.UnixMilli(at).UTC().Format(time.RFC3339), before.UTC().Format(time.RFC3339), after.UTC().Format(time.RFC3339))
			}
		}
	}
	if n == 0 || sweeps == 0 {
		t.Fatalf("fixture: apply enqueued %d tasks, %d sweep tasks: %+v", n, sweeps, r)
	}
}
