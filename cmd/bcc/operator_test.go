package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/resources"
)

// The tests of issue 29's "tried as a new operator would", one per
// bullet, on the built binary against the embedded stack. (The first
// bullet, a write taking its time from a flag, is clock_test.go.)

// populated is a deployment with something to show: c1 with 15 objects
// added and then removed (deferred: inside the token lifetime), observed,
// a suspect lease; c2 created; c3's head put back from v3 to v2 (a
// regression to confirm); a dead letter on the compaction DLQ.
func populated(t *testing.T) *testEnv {
	t.Helper()
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := e.ctx
	for _, c := range []string{"c1", "c2", "c3"} {
		if err := e.Workload.Create(ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := e.Workload.Append(ctx, "c3", e.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	observeHead(t, e, "c3")
	if _, err := e.Publisher.Restore(ctx, "c3", 2); err != nil {
		t.Fatal(err)
	}
	var added []contract.ObjectEntry
	now := e.clk.Now().UnixMilli()
	if _, err := e.Publisher.Commit(ctx, "c1", func(ctx context.Context, base publisher.Snapshot) (publisher.Change, error) {
		added = nil
		for i := range 15 {
			key := contract.AppendSegmentKey("c1", base.Head.Inc(), base.Head.Version+1, i)
			body := []byte("segment " + key)
			if _, err := e.Bucket.Put(ctx, key, body); err != nil {
				return publisher.Change{}, err
			}
			added = append(added, contract.ObjectEntry{Key: key, Size: int64(len(body)), Checksum: contract.Checksum(body), Tier: contract.TierHot,
				DocCount: 1, MinTsUnixMs: now, MaxTsUnixMs: now, MinSeq: 1, MaxSeq: 1, MinRecordKey: "a", MaxRecordKey: "z"})
		}
		return publisher.Change{Added: added, Origin: contract.Origin{Kind: contract.OriginAppend}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Publisher.Commit(ctx, "c1", func(context.Context, publisher.Snapshot) (publisher.Change, error) {
		return publisher.Change{Removed: added, Origin: contract.Origin{Kind: contract.OriginCutover, RequestID: "r"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	if err := e.Watermark.Publish(ctx, e.clk.Now(), e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	h, _ := e.Lineage.Head(ctx, "c1")
	leases := e.workerLeases(awsio.NewLeaseTable(e.Clients.Dynamo, e.Config.Table))
	if _, err := leases.Acquire(ctx, contract.NewTask(contract.KindCompaction, "c1", h.Version, h.ManifestChecksum, 1, 0), "stuck", e.clk.Now().Add(-100*time.Second), e.Config.Policy.LeaseDuration.D()); err != nil {
		t.Fatal(err)
	}
	e.deadLetter(t, e.Prov.DLQURLs[resources.QueueCompaction])
	return e
}

func (e *testEnv) deadLetter(t *testing.T, url string) {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"poison":true}`)}
	if strings.HasSuffix(url, ".fifo") {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String("c1"), aws.String(fmt.Sprint(time.Now().UnixNano()))
	}
	if _, err := e.Clients.SQS.SendMessage(e.ctx, in); err != nil {
		t.Fatal(err)
	}
}

// Bullet 2: blind reads never report healthy. With CCS left out, or the
// endpoint down, every view says Unknown and exits 2; nothing says "0
// leases", "no live lease" or "nothing to do".
func TestBlindReadsAreUnknown(t *testing.T) {
	e := populated(t)
	prefix := []string{"--prefix", e.Prov.Def.Prefix}
	views := [][]string{{"status"}, {"leases"}, {"recover"}, {"plan"}, {"compaction-plan"}, {"gc-plan", "--collection", "c1"},
		{"confirm-lineage", "--collection", "c1", "--by", "alice"}, {"recover", "--confirm"}}
	for _, blind := range []struct {
		name string
		args []string
	}{
		{"no CCS", append([]string{"--endpoint-url", e.Stack.URL()}, prefix...)},
		{"endpoint down", append([]string{"--endpoint-url", "http://127.0.0.1:1", "--ccs", "http://127.0.0.1:1/ccs"}, prefix...)},
	} {
		for _, v := range views {
			args := append(append([]string{}, v...), blind.args...)
			r := execBCC(t, nil, args...)
			if r.code != exitAction || !strings.Contains(r.stdout, "Unknown") {
				t.Errorf("%s: bcc %s: exit %d, want 2 and Unknown:\n%s%s", blind.name, strings.Join(v, " "), r.code, r.stdout, r.stderr)
			}
			for _, healthy := range []string{"(0 leases", "no live lease", "nothing to do", "no regression to confirm", "released"} {
				if strings.Contains(r.stdout, healthy) {
					t.Errorf("%s: bcc %s reports %q from a blind read:\n%s", blind.name, strings.Join(v, " "), healthy, r.stdout)
				}
			}
			j := execBCC(t, nil, append(args, "-o", "json")...)
			var h header
			if err := json.Unmarshal([]byte(j.stdout), &h); err != nil || h.State != status.Unknown || len(h.Unknown) == 0 || j.code != exitAction {
				t.Errorf("%s: bcc %s -o json: exit %d state %q unknown %v (%v)\n%s", blind.name, strings.Join(v, " "), j.code, h.State, h.Unknown, err, j.stdout)
			}
		}
	}
	// Without CCS the lease records are still listed (45 leases are not
	// "0 leases" because the catalog is unreadable).
	r := execBCC(t, nil, "leases", "--all", "--endpoint-url", e.Stack.URL(), "--prefix", e.Prov.Def.Prefix)
	if !strings.Contains(r.stdout, "1 records") {
		t.Fatalf("the lease record is hidden when CCS is left out:\n%s", r.stdout)
	}
	// Nothing was released from a blind read.
	out, _, _ := e.bcc("leases", "-o", "json")
	if !strings.Contains(out, `"class": "suspect-heartbeat-overdue"`) {
		t.Fatalf("a blind recover --confirm released the lease:\n%s", out)
	}
}

// Bullet 3: one answer for an unknown collection, from every command that
// takes one.
func TestUnknownCollectionHasOneAnswer(t *testing.T) {
	e := populated(t)
	want := `bcc: unknown collection "ghost": CCS has no facts for it and the bucket bcc-data holds no head for it (bcc status lists the collections CCS knows)`
	for _, v := range [][]string{{"status"}, {"leases"}, {"recover"}, {"plan"}, {"gc-plan"}, {"compaction-plan"}, {"confirm-lineage", "--by", "alice"}} {
		r := e.cli(v[0], append(v[1:], "--collection", "ghost")...)
		if r.code != exitError || strings.TrimSpace(r.stderr) != want || r.stdout != "" {
			t.Errorf("bcc %s --collection ghost: exit %d\n%s%s", v[0], r.code, r.stdout, r.stderr)
		}
	}
	r := execBCC(t, nil, "gc-plan", "--collection", "ghost", "--stack", e.StackName(), "--endpoint-url", e.Stack.URL())
	golden(t, "unknown-collection", strings.ReplaceAll(transcript(r), e.Stack.URL(), "http://127.0.0.1:4566"))
}

// Bullet 3: persistent flags anywhere, BCC_POLICY (and the other
// variables) from the environment, SDK logs only with --debug.
func TestFlagsAnywhereEnvironmentAndDebug(t *testing.T) {
	e := populated(t)
	url := e.Stack.URL()
	before := execBCC(t, nil, "--stack", e.StackName(), "--endpoint-url", url, "-o", "json", "status", "--collection", "c2")
	after := execBCC(t, nil, "status", "--collection", "c2", "-o", "json", "--endpoint-url", url, "--stack", e.StackName())
	env := execBCC(t, []string{"BCC_STACK=" + e.StackName(), "AWS_ENDPOINT_URL=" + url, "BCC_OUTPUT=json"}, "status", "--collection", "c2")
	for _, r := range []result{before, after, env} {
		var d statusDoc
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.Collections) != 1 || d.Collections[0].State != status.Starting {
			t.Fatalf("bcc %v: %v\n%s%s", r.args, err, r.stdout, r.stderr)
		}
	}
	r := execBCC(t, []string{"BCC_POLICY={\"paused_collections\":[\"c2\"]}"}, "status", "--collection", "c2", "--stack", e.StackName(), "--endpoint-url", url)
	if !strings.Contains(r.stdout, "c2                   Disabled") {
		t.Fatalf("BCC_POLICY from the environment is ignored:\n%s", r.stdout)
	}
	quiet := execBCC(t, nil, "status", "--prefix", "bcc", "--endpoint-url", "http://127.0.0.1:1")
	loud := execBCC(t, nil, "status", "--prefix", "bcc", "--endpoint-url", "http://127.0.0.1:1", "--debug")
	if quiet.stderr != "" || !strings.Contains(loud.stderr, "retrying request") {
		t.Fatalf("SDK logs: without --debug %q; with --debug %d bytes", quiet.stderr, len(loud.stderr))
	}
}

// Exit codes on the built binary: 0 fine, 1 usage or error, 2 something
// needs a person.
func TestExitCodes(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	if err := e.Workload.Create(e.ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	for _, tc := range []struct {
		code int
		args []string
	}{
		{exitOK, []string{"status"}}, {exitOK, []string{"leases"}}, {exitOK, []string{"recover"}},
		{exitOK, []string{"confirm-lineage", "--collection", "c1", "--by", "alice"}},
		{exitError, []string{"status", "--collection", "ghost"}}, {exitError, []string{"apply", "--plan", "/nonexistent.json"}},
		{exitError, []string{"stauts"}},
	} {
		if r := e.cli(tc.args[0], tc.args[1:]...); r.code != tc.code {
			t.Errorf("bcc %v: exit %d, want %d", tc.args, r.code, tc.code)
		}
	}
	e.deadLetter(t, e.Prov.DLQURLs[resources.QueueGC])
	if r := e.cli("status"); r.code != exitAction {
		t.Errorf("status with a dead letter: exit %d, want 2", r.code)
	}
}

// Bullet 4: status shows the reconcile queue and every DLQ (each is
// alarmed), the observer's failure queue included; human output has no
// Go map dump and counts what it does not list.
func TestStatusShowsEveryQueueAndSummarises(t *testing.T) {
	e := populated(t)
	e.deadLetter(t, e.Prov.DLQURLs[resources.QueueReconcile])
	e.deadLetter(t, e.Prov.FailureQueueURL)
	out, code, err := e.bcc("status")
	if err != nil || code != exitAction {
		t.Fatalf("status: %d %v", code, err)
	}
	for _, want := range []string{"reconcile DLQ holds 1 messages", "observer-failures DLQ holds 1 messages", "compaction DLQ holds 1 messages",
		"\nreconcile ", "\nobserver-failures ", "15 deferred (15 ", "leases: 1 (1 suspect-heartbeat-overdue)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	doc := e.snapshot()
	var classes []string
	for _, q := range doc.Queues {
		classes = append(classes, q.Class)
	}
	if strings.Join(classes, ",") != "compaction,gc,handoff,reconcile,observer-failures" {
		t.Fatalf("status queues: %v", classes)
	}
	gcOut, _, _ := e.bcc("gc-plan", "--collection", "c1")
	keysOut, _, _ := e.bcc("gc-plan", "--collection", "c1", "--keys")
	for name, o := range map[string]string{"status": out, "gc-plan": gcOut, "gc-plan --keys": keysOut} {
		if strings.Contains(o, "map[") {
			t.Errorf("%s prints a Go map:\n%s", name, o)
		}
	}
	if n := strings.Count(gcOut, "collections/c1/"); n > 0 || !strings.Contains(gcOut, "deferred 15 objects") {
		t.Errorf("gc-plan lists %d deferred keys without --keys (want a count):\n%s", n, gcOut)
	}
	if n := strings.Count(keysOut, "collections/c1/data/"); n != 15 {
		t.Errorf("gc-plan --keys lists %d deferred keys, want 15:\n%s", n, keysOut)
	}
}

// Bullet 5: the stack's outputs name the deployment. Names come from the
// outputs, not from a prefix guess (a stack whose Deployment output is
// another name still reads this deployment's bucket, table and queues);
// BCC_STACK does the same; the BccCommand output runs as printed;
// without --stack or --prefix bcc asks instead of guessing.
func TestStackFindsTheDeployment(t *testing.T) {
	e := populated(t)
	outs := map[string]string{}
	r := execBCC(t, nil, "status", "--stack", e.StackName(), "--endpoint-url", e.Stack.URL(), "-o", "json")
	if r.code == exitError {
		t.Fatal(r.stderr)
	}
	// A stack of the same resources under generated-looking names: only
	// the outputs can find them.
	var list []localaws.StackOutput
	for _, q := range e.Prov.Def.Queues {
		outs[resources.OutQueueURL(q.Class)], outs[resources.OutDLQURL(q.Class)] = e.Prov.QueueURLs[q.Class], e.Prov.DLQURLs[q.Class]
	}
	outs[resources.OutObserverFailuresURL] = e.Prov.FailureQueueURL
	outs[resources.OutDataBucketName], outs[resources.OutTableName] = e.Config.Bucket, e.Config.Table
	outs[resources.OutCCSEndpoint], outs[resources.OutDeployment] = e.Config.CCSEndpoint, "renamed"
	for k, v := range outs {
		list = append(list, localaws.StackOutput{Key: k, Value: v})
	}
	e.Stack.PutStack("renamed-stack", list)
	via := execBCC(t, []string{"BCC_STACK=renamed-stack", "AWS_ENDPOINT_URL=" + e.Stack.URL()}, "status", "-o", "json")
	var a, b statusDoc
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(via.stdout), &b); err != nil {
		t.Fatalf("%v\n%s%s", err, via.stdout, via.stderr)
	}
	if len(b.Collections) != 3 || b.Deployment != "renamed" || len(b.Unknown) != 0 || b.Queues[0].DLQVisible != 1 {
		t.Fatalf("the renamed stack's outputs were not what bcc read: %+v", b)
	}
	// The ready command lines.
	for key, want := range map[string]string{resources.OutBccStackCommand: "deployment bcc (stack bcc-coordinator)", resources.OutBccCommand: "deployment bcc (prefix bcc)"} {
		cmd := strings.Fields(outputOf(t, e, key))
		if len(cmd) < 2 || cmd[0] != "bcc" {
			t.Fatalf("%s %v", key, cmd)
		}
		if r := execBCC(t, nil, cmd[1:]...); r.code == exitError || !strings.Contains(r.stdout, want) {
			t.Fatalf("the stack's %s does not run: %+v", key, r)
		}
	}
	// A flag wins over the environment: a flag naming the deployment one
	// way sets aside a variable naming it the other way.
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"BCC_STACK=nope"}, []string{"--prefix", e.Prov.Def.Prefix, "--ccs", e.Config.CCSEndpoint}, "deployment bcc (prefix bcc)"},
		{[]string{"BCC_PREFIX=nope", "BCC_BUCKET=nope", "BCC_TABLE=nope"}, []string{"--stack", e.StackName()}, "deployment bcc (stack bcc-coordinator)"},
	} {
		r := execBCC(t, tc.env, append([]string{"status", "--endpoint-url", e.Stack.URL()}, tc.args...)...)
		if r.code == exitError || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%v bcc status %v: the flag does not win (exit %d)\n%s%s", tc.env, tc.args, r.code, r.stdout, r.stderr)
		}
	}
	if r := execBCC(t, []string{"BCC_STACK=" + e.StackName(), "BCC_PREFIX=bcc"}, "status", "--endpoint-url", e.Stack.URL()); r.code != exitError || !strings.Contains(r.stderr, "BCC_STACK and BCC_PREFIX") {
		t.Errorf("two variables naming the deployment two ways: %+v", r)
	}
	if r := execBCC(t, nil, "status", "--stack", "nope", "--endpoint-url", e.Stack.URL()); r.code != exitError || !strings.Contains(r.stderr, `stack "nope" does not exist`) {
		t.Fatalf("an unknown stack: %+v", r)
	}
	if r := execBCC(t, nil, "status", "--endpoint-url", e.Stack.URL()); r.code != exitError || !strings.Contains(r.stderr, "which deployment?") {
		t.Fatalf("no deployment named: %+v", r)
	}
}

// outputOf reads one output of the local stack as a deployed one's is
// read (DescribeStacks).
func outputOf(t *testing.T, e *testEnv, key string) string {
	t.Helper()
	c := &cli{ctx: e.ctx, getenv: func(string) string { return "" }, g: globals{endpoint: e.Stack.URL()}}
	cfg, err := c.awsConfig()
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.stackOutputs(cfg, e.StackName())
	if err != nil {
		t.Fatal(err)
	}
	return m[key]
}
