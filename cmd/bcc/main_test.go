package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/contract/strictjson"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/resources"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type testEnv struct {
	*localenv.Env
	t   *testing.T
	ctx context.Context
	clk *clock
}

func start(t *testing.T, opts localenv.Options) *testEnv {
	t.Helper()
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	opts.Now = clk.Now
	env, err := localenv.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return &testEnv{Env: env, t: t, ctx: context.Background(), clk: clk}
}

// common are the flags that point the CLI at the environment, judged at
// the environment's clock.
func (e *testEnv) common(extra ...string) []string {
	c := []string{"--stack", e.StackName(), "--endpoint-url", e.Stack.URL()}
	if !slices.Contains(extra, "--confirm") && !slices.Contains(extra, "--yes") && !slices.Contains(extra, "--now") { // writes take the system's clock
		c = append(c, "--now", strconv.FormatInt(e.clk.Now().UnixMilli(), 10))
	}
	return append(c, extra...)
}

// bcc runs the built binary against the environment, judged at the
// environment's clock unless it writes; err is its stderr when it exits 1.
func (e *testEnv) bcc(cmd string, args ...string) (string, int, error) {
	e.t.Helper()
	r := execBCC(e.t, nil, append([]string{cmd}, e.common(args...)...)...)
	return r.stdout, r.code, r.err()
}

func (e *testEnv) snapshot(args ...string) statusDoc {
	e.t.Helper()
	out, _, err := e.bcc("status", append(args, "-o", "json")...)
	if err != nil {
		e.t.Fatal(err)
	}
	var s statusDoc
	if err := strictjson.Unmarshal([]byte(out), &s, strictjson.RejectUnknown); err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return s
}

func (e *testEnv) stateOf(name string, args ...string) (status.State, []string) {
	e.t.Helper()
	s := e.snapshot(append(args, "--collection", name)...)
	if len(s.Collections) != 1 {
		e.t.Fatalf("want one collection, got %+v", s)
	}
	return s.Collections[0].State, s.Collections[0].Reasons
}

func (e *testEnv) expectState(name string, want status.State, args ...string) {
	e.t.Helper()
	got, why := e.stateOf(name, args...)
	if got != want {
		e.t.Fatalf("%s: state %s (%v), want %s", name, got, why, want)
	}
	e.t.Logf("%s: %s %v", name, got, why)
}

// Each state of the model, reached by a real situation on the embedded
// stack.
func TestEachStateOfTheModel(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := e.ctx
	// NotConfigured: CCS knows the name, nothing was ever committed (a
	// name nothing knows is refused: TestUnknownCollectionHasOneAnswer).
	if _, err := e.CCS.Create(ctx, "ghost", "", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	e.expectState("ghost", status.NotConfigured)
	// Starting: created (facts and head v1), the observer has not recorded it.
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	e.expectState("c1", status.Starting)
	// Running: the observer recorded the head.
	observeHead(t, e, "c1")
	e.expectState("c1", status.Running)
	// Disabled: the policy pauses it.
	e.expectState("c1", status.Disabled, "--policy", `{"paused_collections": ["c1"]}`)
	// Unknown: CCS cannot be reached.
	got, why := e.stateOf("c1", "--ccs", "http://127.0.0.1:1")
	if got != status.Unknown || !strings.Contains(strings.Join(why, " "), "ccs facts unreadable") {
		t.Fatalf("CCS down: %s %v", got, why)
	}
	// Degraded: a message was dead-lettered (the fleet), a lease is
	// stalled (the collection).
	dlq := e.Prov.DLQURLs[resources.QueueCompaction]
	if _, err := e.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(`{"poison":true}`),
		MessageGroupId: aws.String("c1"), MessageDeduplicationId: aws.String("p1")}); err != nil {
		t.Fatal(err)
	}
	if s := e.snapshot(); s.State != status.Degraded || !strings.Contains(strings.Join(s.Reasons, " "), "compaction DLQ holds 1") {
		t.Fatalf("fleet with a dead letter: %s %v", s.State, s.Reasons)
	}
	head, _ := e.Lineage.Head(ctx, "c1")
	task := contract.NewTask(contract.KindCompaction, "c1", head.Version, head.ManifestChecksum, 1, e.clk.Now().UnixMilli())
	leases := e.workerLeases(awsio.NewLeaseTable(e.Clients.Dynamo, e.Config.Table))
	if _, err := leases.Acquire(ctx, task, "stuck-holder", e.clk.Now(), e.Config.Policy.LeaseDuration.D()); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(90 * time.Second) // no heartbeat for 3 intervals, still 30 s before expiry
	e.expectState("c1", status.Degraded)
	e.clk.Advance(time.Minute) // expired: nothing holds it any more
	e.expectState("c1", status.Running)

	// Stopping, then Stopped: CCS tombstones the collection; GC cleans up.
	if _, err := e.Workload.Append(ctx, "c1", e.Workload.Random()); err != nil {
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	facts, err := e.CCS.Facts(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	facts.Tombstoned, facts.ReservationHorizonUnixMs = true, e.clk.Now().UnixMilli()
	if facts, err = e.CCS.PutFacts(ctx, facts); err != nil {
		t.Fatal(err)
	}
	if err := e.Watermark.Publish(ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.expectState("c1", status.Stopping)
	for range 2 { // the head's objects stay a token lifetime after the tombstone
		e.clk.Advance(time.Hour)
		if err := e.Watermark.Publish(ctx, e.clk.Now(), e.clk.Now()); err != nil {
			t.Fatal(err)
		}
		head, _ = e.Lineage.Head(ctx, "c1")
		runGC(t, e, contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli()))
	}
	e.expectState("c1", status.Stopped)
}

// observeHead runs the observer function on c's head event, as S3 would.
func observeHead(t *testing.T, e *testEnv, c string) {
	t.Helper()
	ev := map[string]any{"Records": []any{map[string]any{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
		"s3": map[string]any{"bucket": map[string]any{"name": e.Config.Bucket}, "object": map[string]any{"key": contract.HeadKey(c), "size": 1, "sequencer": "01"}}}}}
	b, _ := json.Marshal(ev)
	if out, err := e.Stack.Invoke(e.ctx, resources.FnObserver, b); err != nil {
		t.Fatalf("observer: %s %v", out, err)
	}
}

func runGC(t *testing.T, e *testEnv, task contract.Task) {
	t.Helper()
	body, _ := contract.Encode(task)
	ev, _ := json.Marshal(map[string]any{"Records": []any{map[string]any{"messageId": "m-" + task.TaskID, "body": string(body), "eventSource": "aws:sqs"}}})
	out, err := e.Stack.Invoke(e.ctx, resources.FnGC, ev)
	if err != nil || strings.Contains(string(out), "m-"+task.TaskID) {
		t.Fatalf("gc function failed: %s %v", out, err)
	}
}

// putLease writes a lease record as the lease adapter does.
func putLease(t *testing.T, e *testEnv, taskID string, l contract.Lease) {
	t.Helper()
	item := map[string]ddb.AttributeValue{
		"pk": &ddb.AttributeValueMemberS{Value: "TASK#" + taskID}, "sk": &ddb.AttributeValueMemberS{Value: "LEASE"},
		"epoch":       &ddb.AttributeValueMemberN{Value: strconv.FormatUint(l.LeaseEpoch, 10)},
		"expiry":      &ddb.AttributeValueMemberN{Value: strconv.FormatInt(l.LeaseExpiryUnixMs, 10)},
		"acquired_at": &ddb.AttributeValueMemberN{Value: strconv.FormatInt(l.AcquiredAtUnixMs, 10)},
		"done":        &ddb.AttributeValueMemberBOOL{Value: false}, "kind": &ddb.AttributeValueMemberS{Value: string(l.Kind)},
		"collection":    &ddb.AttributeValueMemberS{Value: l.Collection},
		"base_version":  &ddb.AttributeValueMemberN{Value: strconv.FormatUint(l.BaseManifestVersion, 10)},
		"base_checksum": &ddb.AttributeValueMemberS{Value: l.BaseManifestChecksum},
	}
	if l.Holder != "" {
		item["holder"] = &ddb.AttributeValueMemberS{Value: l.Holder}
	}
	if _, err := e.Clients.Dynamo.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Config.Table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

type leaseRows struct {
	Leases []lease.Report `json:"leases"`
}

func classes(t *testing.T, e *testEnv) map[string]lease.Class {
	t.Helper()
	out, _, err := e.bcc("leases", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows leaseRows
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]lease.Class{}
	for _, r := range rows.Leases {
		got[r.Lease.Holder+"@"+r.Lease.TaskID] = r.Class
		got[r.Lease.Holder] = r.Class
	}
	return got
}

// Each lease class, reached by a real lease record on the embedded stack;
// recover releases exactly the suspect and terminal ones (dry run first).
func TestEachLeaseClassAndRecover(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true})
	ctx := e.ctx
	for _, c := range []string{"c1", "c2"} {
		if err := e.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Settle(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h1, _ := e.Lineage.Head(ctx, "c1")
	now := e.clk.Now()
	d := e.Config.Policy.LeaseDuration.D()
	table := awsio.NewLeaseTable(e.Clients.Dynamo, e.Config.Table)
	leases := e.workerLeases(table)
	acquire := func(holder string, kind contract.TaskKind, c string, base uint64, checksum string, at time.Time, sweep int64) contract.Lease {
		task := contract.NewSweepTask(kind, c, base, checksum, 1, sweep*60_000)
		l, err := leases.Acquire(ctx, task, holder, at, d)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	acquire("healthy", contract.KindCompaction, "c1", h1.Version, h1.ManifestChecksum, now.Add(-10*time.Second), 1)
	suspect := acquire("suspect", contract.KindCompaction, "c1", h1.Version, h1.ManifestChecksum, now.Add(-90*time.Second), 2)
	acquire("expired", contract.KindCompaction, "c1", h1.Version, h1.ManifestChecksum, now.Add(-5*time.Minute), 3)
	acquire("future", contract.KindCompaction, "c1", h1.Version, h1.ManifestChecksum, now.Add(10*time.Minute), 4)
	// terminal: a compaction on c2's v1 while c2's head moved on.
	h2, _ := e.Lineage.Head(ctx, "c2")
	terminal := acquire("terminal", contract.KindCompaction, "c2", h2.Version, h2.ManifestChecksum, now.Add(-5*time.Second), 5)
	if _, err := e.Workload.Append(ctx, "c2", e.Workload.Random()); err != nil {
		t.Fatal(err)
	}
	// identity mismatch: the record fences c1, its key names a c2 task.
	other := contract.NewTask(contract.KindCompaction, "c2", 7, h1.ManifestChecksum, 1, 0)
	putLease(t, e, other.TaskID, contract.Lease{Kind: contract.KindCompaction, Collection: "c1", BaseManifestVersion: h1.Version,
		BaseManifestChecksum: h1.ManifestChecksum, LeaseEpoch: 1, Holder: "mismatch", LeaseExpiryUnixMs: now.Add(time.Minute).UnixMilli(), AcquiredAtUnixMs: now.UnixMilli()})
	// invalid: no holder.
	putLease(t, e, contract.NewTask(contract.KindCompaction, "c1", h1.Version, h1.ManifestChecksum, 9, 0).TaskID, contract.Lease{Kind: contract.KindCompaction, Collection: "c1",
		BaseManifestVersion: h1.Version, BaseManifestChecksum: h1.ManifestChecksum, LeaseEpoch: 1, LeaseExpiryUnixMs: now.Add(time.Minute).UnixMilli(), AcquiredAtUnixMs: now.UnixMilli()})

	got := classes(t, e)
	want := map[string]lease.Class{"healthy": lease.ClassHealthy, "suspect": lease.ClassSuspect, "expired": lease.ClassNotHeld,
		"future": lease.ClassIndeterminate, "terminal": lease.ClassTerminal, "mismatch": lease.ClassIdentityMismatch, "": lease.ClassInvalid}
	for holder, c := range want {
		if got[holder] != c {
			t.Errorf("lease of %q: class %q, want %q", holder, got[holder], c)
		}
	}
	out, code, err := e.bcc("leases")
	t.Logf("bcc leases (exit %d):\n%s", code, out)
	if err != nil || code != exitAction {
		t.Fatalf("leases: exit %d %v", code, err)
	}

	// Dry run: prints the plan, changes nothing.
	out, code, err = e.bcc("recover")
	t.Logf("bcc recover (exit %d):\n%s", code, out)
	if err != nil || code != exitAction || strings.Count(out, "dry-run") != 2 {
		t.Fatalf("recover dry run: exit %d %v\n%s", code, err, out)
	}
	if st, _, _ := table.Get(ctx, suspect.TaskID); st.Lease.LeaseEpoch != suspect.LeaseEpoch {
		t.Fatal("the dry run changed a lease")
	}
	// Confirmed: both released (epoch bumped); the holders lose them. The
	// identity mismatch, the invalid and the indeterminate records are
	// left to a person: exit 2.
	out, code, err = e.bcc("recover", "--confirm", "--by", "test")
	t.Logf("bcc recover -confirm (exit %d):\n%s", code, out)
	if err != nil || code != exitAction || strings.Count(out, "released") != 2 || strings.Count(out, "refuse: inspect by hand") != 3 {
		t.Fatalf("recover -confirm: exit %d %v\n%s", code, err, out)
	}
	for _, l := range []contract.Lease{suspect, terminal} {
		if _, err := leases.Extend(ctx, l, e.clk.Now(), d); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("the released holder %s still heartbeats: %v", l.Holder, err)
		}
	}
	if got := classes(t, e); got["healthy"] != lease.ClassHealthy || got["future"] != lease.ClassIndeterminate {
		t.Fatalf("recover touched a lease it must leave alone: %v", got)
	}
}

// recover -confirm racing a heartbeat: the holder heartbeats between the
// plan and the write; the conditional write refuses the release.
func TestRecoverRacingAHeartbeatIsRefused(t *testing.T) {
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
	task := contract.NewTask(contract.KindCompaction, "c1", h.Version, h.ManifestChecksum, 1, 0)
	l, err := leases.Acquire(ctx, task, "slow-holder", e.clk.Now().Add(-90*time.Second), d)
	if err != nil {
		t.Fatal(err)
	}
	beforeRelease = func() { // the holder wakes up and heartbeats
		if l, err = leases.Extend(ctx, l, e.clk.Now(), d); err != nil {
			t.Error(err)
		}
	}
	defer func() { beforeRelease = func() {} }()
	out, code, err := e.inproc("recover", "--confirm")
	t.Logf("bcc recover -confirm (exit %d):\n%s", code, out)
	if err != nil || code != exitAction || !strings.Contains(out, "refused") || !strings.Contains(out, "moved since planning") {
		t.Fatalf("racing heartbeat: exit %d %v\n%s", code, err, out)
	}
	if _, err := leases.Extend(ctx, l, e.clk.Now(), d); err != nil {
		t.Fatalf("the holder lost its lease to a refused release: %v", err)
	}
}

// plan shows the reconciliation's tasks; apply executes exactly that plan
// and refuses a plan whose snapshot moved.
func TestPlanApplyAndStaleFingerprint(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := e.ctx
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	save := func(name string) string {
		out, code, err := e.bcc("plan", "-o", "json")
		if err != nil || code != exitAction {
			t.Fatalf("plan: exit %d %v\n%s", code, err, out)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, _, _ := e.bcc("plan")
	t.Logf("bcc plan:\n%s", out)
	stale := save("stale.json")
	if _, err := e.Workload.Append(ctx, "c1", e.Workload.Random()); err != nil {
		t.Fatal(err)
	}
	depth := func() int64 {
		d, err := awsio.QueueDepth(ctx, e.Clients.SQS, e.Prov.Def.Queues[1].Name) // gc
		if err != nil {
			t.Fatal(err)
		}
		return d.Visible
	}
	before := depth()
	out, code, err := e.bcc("apply", "--plan", stale, "--confirm")
	if (err == nil || !strings.Contains(err.Error(), "stale plan")) || code != exitError || depth() != before {
		t.Fatalf("stale plan applied: exit %d %v\n%s", code, err, out)
	}
	t.Logf("stale: %v", err)
	fresh := save("fresh.json")
	var p planDoc
	b, _ := os.ReadFile(fresh)
	if err := json.Unmarshal(b, &p); err != nil || len(p.Intents) == 0 {
		t.Fatalf("plan: %v %+v", err, p)
	}
	// An edited plan (an intent added, the fingerprint kept) is refused.
	edited := p
	extra := contract.NewSweepTask(contract.KindCompaction, "c1", 1, p.Intents[0].Task.BaseManifestChecksum, 1, e.clk.Now().UnixMilli())
	edited.Intents = append(append([]status.Intent{}, p.Intents...), status.Intent{Kind: status.IntentEnqueue, Collection: "c1", Task: &extra, Reason: "mine"})
	eb, _ := json.Marshal(edited)
	editedFile := filepath.Join(dir, "edited.json")
	if err := os.WriteFile(editedFile, eb, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code, err := e.bcc("apply", "--plan", editedFile, "--confirm"); (err == nil || !strings.Contains(err.Error(), "stale plan")) || code != exitError || depth() != before {
		t.Fatalf("edited plan applied: exit %d %v\n%s", code, err, out)
	}
	out, code, err = e.bcc("apply", "--plan", fresh, "--confirm")
	t.Logf("bcc apply -confirm (exit %d):\n%s", code, out)
	if err != nil || code != exitOK {
		t.Fatalf("apply: exit %d %v\n%s", code, err, out)
	}
	for _, in := range p.Intents {
		if in.Task != nil && !strings.Contains(out, "enqueued      "+in.Task.TaskID) && !strings.Contains(out, "(planned as "+in.Task.TaskID+":") {
			t.Fatalf("apply did not enqueue %s:\n%s", in.Task.TaskID, out)
		}
	}
	if depth() <= before {
		t.Fatal("apply enqueued nothing on the gc queue")
	}
}

// TestReadOnlyCommandsWriteNothing runs every read-only command against
// the embedded stack and checks that every AWS call they made was a read
// (rule 10).
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{NoDelivery: true, Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := env.Workload.Append(ctx, "c1", env.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := env.Publisher.Read(ctx, "c1")
	removed := snap.Root.Change.Added
	if _, err := env.Publisher.Commit(ctx, "c1", func(context.Context, publisher.Snapshot) (publisher.Change, error) {
		return publisher.Change{Removed: removed, Origin: contract.Origin{Kind: contract.OriginCutover, RequestID: "r"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.Watermark.Publish(ctx, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := env.Settle(ctx, 5*time.Second); err != nil { // the observer has handled every head event
		t.Fatal(err)
	}
	common := []string{"--stack", env.StackName(), "--endpoint-url", env.Stack.URL()}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	planOut, _, err := runBin(t, append([]string{"plan", "-o", "json"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planFile, []byte(planOut), 0o644); err != nil {
		t.Fatal(err)
	}
	before := env.Stack.Counter().Snapshot()
	var out bytes.Buffer
	for _, args := range [][]string{
		{"gc-plan", "--collection", "c1"}, {"gc-plan", "--collection", "c1", "-o", "json"},
		{"status"}, {"status", "-o", "json"}, {"status", "--collection", "c1"},
		{"leases"}, {"leases", "-o", "json"}, {"recover"}, {"recover", "-o", "json"},
		{"plan"}, {"plan", "-o", "json"}, {"apply", "--plan", planFile},
		{"compaction-plan"}, {"compaction-plan", "--collection", "c1", "-o", "json"},
		{"confirm-lineage", "--collection", "c1", "--by", "test"},
	} {
		o, _, err := runBin(t, append(args, common...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		out.WriteString(o)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "would delete 1 objects") || !strings.Contains(out.String(), removed[0].Key) {
		t.Fatalf("gc-plan does not show the debt:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "compaction due true") {
		t.Fatalf("compaction-plan does not show the due compaction:\n%s", out.String())
	}
	calls := env.Stack.Counter().Since(before)
	for op := range calls {
		switch op {
		case "s3:GetObject", "s3:ListObjects", "s3:ListObjectsV2", "s3:HeadObject", "dynamodb:GetItem", "dynamodb:Scan",
			"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "cloudformation:DescribeStacks":
		default:
			t.Fatalf("a read-only command made %s (%v)", op, calls)
		}
	}
	t.Logf("calls: %v", calls)
	if _, err := env.Bucket.Size(ctx, removed[0].Key); err != nil {
		t.Fatalf("planned object was touched: %v", err)
	}
}

// confirm-lineage prints what it would record without -yes (and writes
// nothing), records it with -yes, and GC's plan then resumes.
func TestConfirmLineageAfterHeadRegression(t *testing.T) {
	ctx := context.Background()
	// Head events held: an observer run delivered while confirm-lineage
	// runs would write observed state and be counted as the command's write.
	env, err := localenv.Start(ctx, localenv.Options{NoDelivery: true, HoldS3Events: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := env.Workload.Append(ctx, "c1", env.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Publisher.Restore(ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	if err := env.Watermark.Publish(ctx, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	common := []string{"--stack", env.StackName(), "--endpoint-url", env.Stack.URL(), "--collection", "c1"}
	var out bytes.Buffer
	if code, err := runInto(t, &out, append([]string{"gc-plan"}, common...)...); err != nil || code != exitAction || !strings.Contains(out.String(), "head_regression") {
		t.Fatalf("gc-plan must show the refusal (exit 2): %d %v\n%s", code, err, out.String())
	}
	before := env.Stack.Counter().Snapshot()
	out.Reset()
	if _, err := runInto(t, &out, append([]string{"confirm-lineage", "--by", "test"}, common...)...); err != nil || !strings.Contains(out.String(), "not recorded") {
		t.Fatalf("without -yes nothing is recorded: %v\n%s", err, out.String())
	}
	for op := range env.Stack.Counter().Since(before) {
		if op == "dynamodb:PutItem" || op == "dynamodb:DeleteItem" || op == "dynamodb:UpdateItem" {
			t.Fatalf("confirm-lineage without -yes wrote (%s)", op)
		}
	}
	// A confirmation is for one lifetime: naming another than the head's
	// is refused before anything is written.
	out.Reset()
	if _, err := runInto(t, &out, append([]string{"confirm-lineage", "--by", "test", "--incarnation", "2", "--yes"}, common...)...); err == nil || !strings.Contains(err.Error(), "head of c1 is incarnation 1") {
		t.Fatalf("-incarnation 2 on a first-lifetime head must be refused: %v\n%s", err, out.String())
	}
	out.Reset()
	if _, err := runInto(t, &out, append([]string{"confirm-lineage", "--by", "test", "--incarnation", "1", "--yes"}, common...)...); err != nil || !strings.Contains(out.String(), "recorded") ||
		!strings.Contains(out.String(), "c1 incarnation 1: head v2 is the truth") {
		t.Fatalf("confirm: %v\n%s", err, out.String())
	}
	out.Reset()
	if _, err := runInto(t, &out, append([]string{"gc-plan"}, common...)...); err != nil || strings.Contains(out.String(), "REFUSED") ||
		!strings.Contains(out.String(), "lineage confirmation: incarnation 1, head v2 by test") {
		t.Fatalf("after the confirmation GC is not refused and names the confirmation: %v\n%s", err, out.String())
	}
	out.Reset()
	if _, err := runInto(t, &out, append([]string{"status"}, common...)...); err != nil || !strings.Contains(out.String(), "lineage confirmed for incarnation 1 (head v2) by test") {
		t.Fatalf("status shows the confirmation with its incarnation: %v\n%s", err, out.String())
	}
}

// drain receives and deletes every message of the task queues, returning
// their task ids.
func drain(t *testing.T, e *testEnv) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for _, class := range []string{resources.QueueCompaction, resources.QueueGC} {
		url := e.Prov.QueueURLs[class]
		for {
			r, err := e.Clients.SQS.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Messages) == 0 {
				break
			}
			for _, m := range r.Messages {
				task, err := contract.DecodeTask("test", []byte(aws.ToString(m.Body)))
				if err != nil {
					t.Fatal(err)
				}
				ids[task.TaskID] = true
				if _, err := e.Clients.SQS.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return ids
}

// What bcc plan shows is what the scheduled reconciliation enqueues: the
// same rule (observe.PlanReconcile) over the same state at the same time.
func TestPlanIsWhatTheScheduledReconciliationEnqueues(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := e.ctx
	for _, c := range []string{"c1", "c2", "c3"} {
		if err := e.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 { // c1: compaction due
		if _, err := e.Workload.Append(ctx, "c1", e.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	observeHead(t, e, "c1") // c1 observed; c2, c3 never
	observeHead(t, e, "c3")
	if _, err := e.Workload.Append(ctx, "c3", e.Workload.Random()); err != nil { // c3's head moves past the observed one
		t.Fatal(err)
	}
	before := drain(t, e)
	e.clk.Advance(2 * time.Hour)
	out, _, err := e.bcc("plan", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var p planDoc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	planned := map[string]bool{}
	for _, in := range p.Intents {
		if in.Kind == status.IntentEnqueue {
			planned[in.Task.TaskID] = true
		}
	}
	// The scheduled event fans out one reconcile message per collection;
	// Reconcile also delivers those to the observer, as the deployed event
	// source mapping does.
	if res, err := e.Reconcile(ctx); err != nil {
		t.Fatalf("reconcile: %s %v", res, err)
	}
	after := drain(t, e)
	t.Logf("planned %v; enqueued by the reconciliation %v (before it: %v)", planned, after, before)
	if len(planned) < 4 {
		t.Fatalf("fixture: want tasks for three collections, planned %v", planned)
	}
	for id := range after {
		if !planned[id] {
			t.Errorf("the reconciliation enqueued %s, which the plan did not show", id)
		}
	}
	for id := range planned {
		if !after[id] && !before[id] { // FIFO deduplication drops a copy of a task enqueued before
			t.Errorf("the plan showed %s, which the reconciliation did not enqueue", id)
		}
	}
}

// inproc runs bcc in this process (for the test seams), as the binary
// would.
func (e *testEnv) inproc(cmd string, args ...string) (string, int, error) {
	e.t.Helper()
	var out, errb bytes.Buffer
	code := Main(e.ctx, append([]string{cmd}, e.common(args...)...), &out, &errb, func(string) string { return "" })
	if code == exitError {
		return out.String(), code, errors.New(errb.String())
	}
	return out.String(), code, nil
}

// runBin runs the built binary; err is its stderr when it exits 1.
func runBin(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	r := execBCC(t, nil, args...)
	return r.stdout, r.code, r.err()
}

// runInto is runBin appending stdout to out.
func runInto(t *testing.T, out *bytes.Buffer, args ...string) (int, error) {
	t.Helper()
	o, code, err := runBin(t, args...)
	out.WriteString(o)
	return code, err
}

// workerLeases takes leases on table as a worker of the deployment does:
// each lease records the deployment's heartbeat interval.
func (e *testEnv) workerLeases(table *awsio.LeaseTable) *lease.Leases {
	return lease.New(table, guard.All()).WithHeartbeat(e.Config.Policy.LeaseHeartbeat.D())
}

// Rule 10 beyond TestReadOnlyCommandsWriteNothing's fixture: a head
// regression, a suspect lease, a dead letter, a tombstoned collection;
// --debug, help, completion, __complete, what-if --now, a stale plan.
func TestViewsWriteNothingInAnyState(t *testing.T) {
	e := populated(t)
	f, err := e.CCS.Facts(e.ctx, "c2")
	if err != nil {
		t.Fatal(err)
	}
	f.Tombstoned, f.ReservationHorizonUnixMs = true, e.clk.Now().UnixMilli()
	if _, err := e.CCS.PutFacts(e.ctx, f); err != nil {
		t.Fatal(err)
	}
	common := []string{"--stack", e.StackName(), "--endpoint-url", e.Stack.URL()}
	pf := filepath.Join(t.TempDir(), "plan.json")
	p := execBCC(t, nil, append([]string{"plan", "-o", "json"}, common...)...)
	if err := os.WriteFile(pf, []byte(p.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	before := e.Stack.Counter().Snapshot()
	for _, args := range [][]string{
		{"status"}, {"status", "--debug"}, {"status", "--collection", "c2"}, {"status", "--now", future},
		{"leases", "--all"}, {"recover"}, {"recover", "--now", future, "-o", "json"}, {"plan", "--debug"},
		{"gc-plan", "--collection", "c3"}, {"gc-plan", "--collection", "c2", "--now", future}, {"gc-plan", "--collection", "c1", "--keys"},
		{"compaction-plan", "--keys"}, {"confirm-lineage", "--collection", "c3", "--by", "x"}, {"confirm-lineage", "--collection", "c3", "--by", "x", "--now", future},
		{"apply", "--plan", pf}, {"apply", "--plan", pf, "--debug", "-o", "json"},
		{"help", "status"}, {"status", "--help"}, {"completion", "bash"}, {"__complete", "status", "--"}, {"__complete", "apply", "--plan", ""},
	} {
		r := execBCC(t, nil, append(args, common...)...)
		t.Logf("bcc %v: exit %d", args, r.code)
	}
	calls := e.Stack.Counter().Since(before)
	for op := range calls {
		switch op {
		case "s3:GetObject", "s3:ListObjects", "s3:ListObjectsV2", "s3:HeadObject", "dynamodb:GetItem", "dynamodb:Scan", "dynamodb:Query",
			"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "cloudformation:DescribeStacks":
		default:
			t.Errorf("a read-only command made %s (%v)", op, calls)
		}
	}
	t.Logf("calls: %v", calls)
}
