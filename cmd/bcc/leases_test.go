package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// healthyLease creates c1 and a lease its holder took a moment ago, as a
// worker of the deployment does (the deployment's lease duration and
// heartbeat interval).
func healthyLease(t *testing.T, e *testEnv) (*awsio.LeaseTable, contract.Lease) {
	t.Helper()
	if err := e.Workload.Create(e.ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Settle(e.ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h, _ := e.Lineage.Head(e.ctx, "c1")
	table := awsio.NewLeaseTable(e.Clients.Dynamo, e.Config.Table)
	l, err := e.workerLeases(table).Acquire(e.ctx, contract.NewTask(contract.KindCompaction, "c1", h.Version, h.ManifestChecksum, 1, 0),
		"healthy-worker", time.Now().Add(-2*time.Second), e.Config.Policy.LeaseDuration.D())
	if err != nil {
		t.Fatal(err)
	}
	return table, l
}

func (e *testEnv) stillHeld(t *testing.T, table *awsio.LeaseTable, l contract.Lease, what string, r result) {
	t.Helper()
	st, _, err := table.Get(e.ctx, l.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lease.LeaseEpoch != l.LeaseEpoch || st.Lease.Holder != l.Holder {
		t.Errorf("%s released a lease its holder heartbeated a moment ago (epoch %d -> %d, holder %s -> %s): bcc %s (exit %d)\n%s%s",
			what, l.LeaseEpoch, st.Lease.LeaseEpoch, l.Holder, st.Lease.Holder, strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
	}
}

// stackWithout registers a copy of the local deployment's stack under
// name without the outputs drop (a deployed stack lacking them).
func stackWithout(t *testing.T, e *testEnv, name string, drop ...string) {
	t.Helper()
	c := &cli{ctx: e.ctx, getenv: func(string) string { return "" }, g: globals{endpoint: e.Stack.URL()}}
	cfg, err := c.awsConfig()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := c.stackOutputs(cfg, e.StackName())
	if err != nil {
		t.Fatal(err)
	}
	var list []localaws.StackOutput
	for k, v := range outs {
		if !strings.Contains(" "+strings.Join(drop, " ")+" ", " "+k+" ") {
			list = append(list, localaws.StackOutput{Key: k, Value: v})
		}
	}
	e.Stack.PutStack(name, list)
}

// Rule 16: how overdue a lease's holder is comes from the lease record
// (the heartbeat time and interval its holder wrote), never from the
// policy bcc holds: that is an input (the built-in default when the
// stack publishes no Policy or the deployment has fixed names, or
// --policy / BCC_POLICY). A deployment running 20 s leases with 5 s
// heartbeats: bcc with the built-in 2 min / 30 s policy, or with an
// operator's 10 min lease, would have called a holder that heartbeated a
// moment ago overdue and released it.
func TestRecoverReleasesNoHealthyLeaseWhateverPolicyBccHolds(t *testing.T) {
	pol, err := policy.Parse([]byte(`{"lease_duration_ms": 20000, "lease_heartbeat_ms": 5000, "clock_skew_ms": 10000}`))
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, localenv.Options{NoDelivery: true, Policy: &pol})
	table, l := healthyLease(t, e)
	stackWithout(t, e, "no-policy-output", resources.OutPolicy)
	fixed := []string{"--prefix", e.Prov.Def.Prefix, "--ccs", e.Config.CCSEndpoint, "--endpoint-url", e.Stack.URL()}
	noPolicy := []string{"--stack", "no-policy-output", "--endpoint-url", e.Stack.URL()}
	long := "--policy=" + `{"lease_duration_ms": 600000}`
	// The holder heartbeats every 5 s, as its worker would, before each
	// write below (a slow machine must not make it overdue).
	beat := func() {
		t.Helper()
		if l, err = e.workerLeases(table).Extend(e.ctx, l, time.Now(), e.Config.Policy.LeaseDuration.D()); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range [][]string{
		append([]string{"recover", "--confirm", "--by", "review"}, fixed...),
		append([]string{"recover", "--confirm", "--by", "review"}, noPolicy...),
		append([]string{"recover", "--confirm", "--by", "review", long}, fixed...),
	} {
		beat()
		r := execBCC(t, nil, v...)
		e.stillHeld(t, table, l, "recover --confirm", r)
	}
	// The views agree: healthy, whatever policy bcc is given.
	for _, v := range [][]string{append([]string{"leases", "-o", "json", long}, fixed...), append([]string{"leases", "-o", "json"}, noPolicy...)} {
		r := execBCC(t, nil, v...)
		if !strings.Contains(r.stdout, `"class": "healthy"`) || r.code != exitOK {
			t.Errorf("bcc %s: the lease is not healthy (exit %d):\n%s%s", strings.Join(v, " "), r.code, r.stdout, r.stderr)
		}
	}
	// apply --confirm: a plan and its application under an operator's
	// policy propose and release nothing.
	pf := filepath.Join(t.TempDir(), "plan.json")
	beat()
	p := execBCC(t, nil, append([]string{"plan", "--collection", "c1", "-o", "json", long}, fixed...)...)
	if strings.Contains(p.stdout, `"release_lease"`) {
		t.Errorf("a plan under an operator's --policy proposes releasing a healthy lease:\n%s", p.stdout)
	}
	if err := os.WriteFile(pf, []byte(p.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	r := execBCC(t, nil, append([]string{"apply", "--plan", pf, "--confirm", "--by", "review", long}, fixed...)...)
	e.stillHeld(t, table, l, "apply --confirm with --policy", r)
	// With --stack a write refuses an override of the stack's policy
	// outright (TestAnotherDeploymentsCCSDoesNotJudgeAWrite).
	r = execBCC(t, []string{`BCC_POLICY={"lease_duration_ms": 600000}`}, "recover", "--confirm", "--by", "review", "--stack", e.StackName(), "--endpoint-url", e.Stack.URL())
	if r.code != exitError || !strings.Contains(r.stderr, "BCC_POLICY") {
		t.Errorf("recover --confirm --stack with BCC_POLICY set: exit %d, want a refusal naming BCC_POLICY\n%s", r.code, r.stderr)
	}
	e.stillHeld(t, table, l, "recover --confirm --stack with BCC_POLICY set", r)
	// A holder that stopped heartbeating is still found, by its own
	// interval: 12 s without a heartbeat (more than two of its 5 s
	// intervals, 8 s before its expiry) is suspect, and released.
	h, _ := e.Lineage.Head(e.ctx, "c1")
	stalled, err := e.workerLeases(table).Acquire(e.ctx, contract.NewTask(contract.KindCompaction, "c1", h.Version, h.ManifestChecksum, 2, 0),
		"stalled-worker", time.Now().Add(-12*time.Second), e.Config.Policy.LeaseDuration.D())
	if err != nil {
		t.Fatal(err)
	}
	r = execBCC(t, nil, append([]string{"recover", "--confirm", "--by", "review"}, fixed...)...)
	if st, _, _ := table.Get(e.ctx, stalled.TaskID); r.code != exitOK || st.Lease.LeaseEpoch != stalled.LeaseEpoch+1 {
		t.Errorf("a holder 12 s without a heartbeat (interval 5 s) was not released: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// With --stack a write judges by the stack's own sources: BCC_CCS_ENDPOINT
// left in the shell from another deployment (or --ccs, the watermark's or
// the policy's override) would judge this deployment's leases by another
// CCS's facts (there c1 is dropped, which makes a healthy lease a
// terminal contradiction that recover --confirm releases). Refused before
// anything is read; read-only views still take the override (a what-if).
func TestAnotherDeploymentsCCSDoesNotJudgeAWrite(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true})
	table, l := healthyLease(t, e)
	other := start(t, localenv.Options{NoDelivery: true})
	if err := other.Workload.Create(other.ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	f, err := other.CCS.Facts(other.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	f.Tombstoned, f.ReservationHorizonUnixMs = true, time.Now().UnixMilli()
	if _, err := other.CCS.PutFacts(other.ctx, f); err != nil {
		t.Fatal(err)
	}
	stack := []string{"--stack", e.StackName(), "--endpoint-url", e.Stack.URL()}
	r := execBCC(t, []string{"BCC_CCS_ENDPOINT=" + other.Config.CCSEndpoint}, append([]string{"recover", "--confirm", "--by", "review"}, stack...)...)
	e.stillHeld(t, table, l, "recover --confirm --stack with another deployment's BCC_CCS_ENDPOINT", r)
	if r.code != exitError || !strings.Contains(r.stderr, "BCC_CCS_ENDPOINT") {
		t.Errorf("recover --confirm --stack with BCC_CCS_ENDPOINT: exit %d, want a refusal naming it\n%s", r.code, r.stderr)
	}
	for _, flag := range []string{"--ccs=" + other.Config.CCSEndpoint, "--watermark-key=elsewhere.json", "--watermark-bucket=elsewhere", `--policy={}`} {
		if r := execBCC(t, nil, append([]string{"recover", "--confirm", flag}, stack...)...); r.code != exitError {
			t.Errorf("recover --confirm --stack %s: exit %d, want 1\n%s%s", flag, r.code, r.stdout, r.stderr)
		}
	}
	// A view takes the override: the other CCS's tombstone, said as such.
	if r := execBCC(t, []string{"BCC_CCS_ENDPOINT=" + other.Config.CCSEndpoint}, append([]string{"recover"}, stack...)...); !strings.Contains(r.stdout, "terminal-contradiction") {
		t.Errorf("recover (a view) with BCC_CCS_ENDPOINT: the override is not what it judged by\n%s%s", r.stdout, r.stderr)
	}
	e.stillHeld(t, table, l, "recover (a view)", r)
}

// A tombstone cleanup deletes the dropped incarnation's head (phase head)
// and carries on under its lease; the tasks that continue it have no
// base (v0). Neither lease is a contradiction: acquired a moment ago,
// both are healthy and recover --confirm leaves them alone.
func TestTombstoneCleanupLeasesAfterTheHeadIsGone(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := e.ctx
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	h, _ := e.Lineage.Head(ctx, "c1")
	f, err := e.CCS.Facts(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	f.Tombstoned, f.ReservationHorizonUnixMs = true, e.clk.Now().UnixMilli()
	if f, err = e.CCS.PutFacts(ctx, f); err != nil {
		t.Fatal(err)
	}
	// The cleanup's head phase: the head pointer is gone.
	if _, err := e.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Config.Bucket), Key: aws.String(contract.HeadKey("c1"))}); err != nil {
		t.Fatal(err)
	}
	table := awsio.NewLeaseTable(e.Clients.Dynamo, e.Config.Table)
	leases := e.workerLeases(table)
	d := e.Config.Policy.LeaseDuration.D()
	running, err := leases.Acquire(ctx, contract.NewTask(contract.KindTombstoneCleanup, "c1", h.Version, h.ManifestChecksum, f.FactsVersion, 0), "cleanup-run", e.clk.Now(), d)
	if err != nil {
		t.Fatal(err)
	}
	baseless, err := leases.Acquire(ctx, contract.NewSweepTask(contract.KindTombstoneCleanup, "c1", 0, "", f.FactsVersion, e.clk.Now().UnixMilli()), "cleanup-continues", e.clk.Now(), d)
	if err != nil {
		t.Fatal(err)
	}
	got := classes(t, e)
	for _, holder := range []string{"cleanup-run", "cleanup-continues"} {
		if got[holder] != lease.ClassHealthy {
			t.Errorf("the tombstone cleanup lease of %s, acquired just now: class %q, want healthy", holder, got[holder])
		}
	}
	r := e.cli("recover", "--confirm", "--by", "review")
	e.stillHeld(t, table, running, "recover --confirm", r)
	e.stillHeld(t, table, baseless, "recover --confirm", r)
}

// Exit codes: recover with a lease that needs a person and that it will
// not release (identity-mismatch here: "refuse: inspect by hand";
// invalid and indeterminate alike) says Degraded and exits 2, as leases
// does for the same record ("2: something needs a person"), dry run or
// confirmed.
func TestRecoverExitCodeOfALeaseThatNeedsALook(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	if err := e.Workload.Create(e.ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	h, _ := e.Lineage.Head(e.ctx, "c1")
	now := e.clk.Now()
	other := contract.NewTask(contract.KindCompaction, "c2", 7, h.ManifestChecksum, 1, 0)
	putLease(t, e, other.TaskID, contract.Lease{Kind: contract.KindCompaction, Collection: "c1", BaseManifestVersion: h.Version,
		BaseManifestChecksum: h.ManifestChecksum, LeaseEpoch: 1, Holder: "mismatch", LeaseExpiryUnixMs: now.Add(time.Minute).UnixMilli(), AcquiredAtUnixMs: now.UnixMilli()})
	l := e.cli("leases", "--now", nowOf(e))
	r := e.cli("recover", "--now", nowOf(e))
	c := e.cli("recover", "--confirm", "--by", "review")
	if l.code != exitAction || r.code != exitAction || c.code != exitAction {
		t.Errorf("a lease that needs a person: leases exit %d, recover exit %d, recover --confirm exit %d; want 2 from each\n%s%s", l.code, r.code, c.code, r.stdout, c.stdout)
	}
	if !strings.Contains(c.stdout, "refuse: inspect by hand") || !strings.Contains(c.stdout, "Degraded") {
		t.Errorf("recover --confirm does not say the lease needs a person:\n%s", c.stdout)
	}
}
