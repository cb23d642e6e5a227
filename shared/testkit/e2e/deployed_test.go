package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/testkit/iamcheck"
	"github.com/searchfabric/bcc/shared/testkit/moto"
)

// Environment variables that choose the backend and the IAM checks
// (make e2e-moto and make e2e-iam set them).
const (
	// EnvMoto=1: start moto_server (one per test binary) and run every
	// test with S3, DynamoDB and SQS served by it.
	EnvMoto = "BCC_E2E_MOTO"
	// EnvTemplate: a synthesized template (cdk.out/<stack>.template.json).
	// Each function then runs as its own identity whose permissions are
	// its role's policies in that template, and every AWS call it makes is
	// judged against them; a denial fails the test that made it. With moto,
	// moto's IAM access control enforces the same policies too.
	EnvTemplate = "BCC_E2E_TEMPLATE"
	// EnvDrop=<function>:<statement>: remove one statement (by Sid, or by
	// its index in the function's policy) before anything runs (trials).
	EnvDrop = "BCC_E2E_IAM_DROP"
	// EnvNeedsReport: write the per-statement report of which recorded
	// calls need each statement to this file (markdown).
	EnvNeedsReport = "BCC_E2E_IAM_REPORT"
)

// deployed is set when EnvTemplate is: the template and, with moto, the server.
var deployed *deployment

type deployment struct {
	tmpl       *iamcheck.Template
	tmplPrefix string
	moto       *moto.Server
	drop       string
	region     string
	account    string

	mu     sync.Mutex
	judged []iamcheck.Judgement
	policy map[string]iamcheck.Policy // of the last environment (statement names for the report)
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx := context.Background()
	var srv *moto.Server
	if os.Getenv(EnvMoto) == "1" {
		var err error
		srv, err = moto.Start(ctx, moto.Options{IAM: os.Getenv(EnvTemplate) != ""})
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer srv.Close()
		os.Setenv(localenv.EnvUpstream, srv.URL)
		fmt.Printf("e2e: S3, DynamoDB and SQS served by moto_server at %s (IAM access control %v; log %s)\n",
			srv.URL, os.Getenv(EnvTemplate) != "", srv.LogFile)
	}
	if path := os.Getenv(EnvTemplate); path != "" {
		tmpl, err := iamcheck.LoadTemplate(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		prefix, err := tmpl.Prefix()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		deployed = &deployment{tmpl: tmpl, tmplPrefix: prefix, moto: srv, drop: os.Getenv(EnvDrop),
			region: localaws.Region, account: localaws.AccountID}
		if srv != nil {
			deployed.region, deployed.account = moto.Region, srv.Account
		}
		fmt.Printf("e2e: functions run under their deployed policies from %s\n", path)
	}
	code := m.Run()
	if deployed != nil {
		if err := deployed.report(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// launch starts a local environment for one test; with a template, each
// function gets its deployed identity and its calls are judged.
func launch(t testing.TB, opts localenv.Options) (*localenv.Env, error) {
	t.Helper()
	if deployed != nil {
		if _, err := deployed.wire(t, &opts, deployed.drop, func(violations []string) {
			for _, v := range violations {
				t.Errorf("IAM: %s", v)
			}
		}); err != nil {
			return nil, err
		}
	}
	return localenv.Start(context.Background(), opts)
}

// wire gives opts per-function identities with the deployed policies (minus
// the statement drop names, if any) and a checker whose violations go to
// judge at the end of t.
func (d *deployment) wire(t testing.TB, opts *localenv.Options, drop string, judge func([]string)) (*iamcheck.Checker, error) {
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("e2e%08x", rand.Uint32())
	}
	def := resources.Default(opts.Prefix)
	policies, err := d.tmpl.FunctionPolicies(iamcheck.Binding{From: resources.Default(d.tmplPrefix), To: def, Region: d.region, Account: d.account})
	if err != nil {
		return nil, err
	}
	if drop != "" {
		if policies, err = dropStatement(policies, drop); err != nil {
			return nil, err
		}
	}
	checker := iamcheck.NewChecker(d.region, d.account, policies)
	opts.FunctionCredentials = map[string]aws.CredentialsProvider{}
	for fn, pol := range policies {
		var creds aws.CredentialsProvider
		var key string
		if d.moto != nil {
			id, err := d.moto.CreateIdentity(context.Background(), def.FunctionName(fn), motoPolicy(pol).Document())
			if err != nil {
				return nil, err
			}
			creds, key = id.Credentials, id.AccessKey
		} else {
			key = "BCCLOCAL" + strings.ToUpper(fn)
			creds = credentials.NewStaticCredentialsProvider(key, "local-"+fn, "")
		}
		checker.Bind(key, fn)
		opts.FunctionCredentials[fn] = creds
	}
	if d.moto != nil {
		opts.Credentials = d.moto.Admin
	}
	prev := opts.OnCall
	opts.OnCall = func(c localaws.Call) {
		checker.Record(c)
		if prev != nil {
			prev(c)
		}
	}
	t.Cleanup(func() {
		judge(checker.Violations())
		if drop != "" {
			return // a trial's policy is not the deployed one
		}
		d.mu.Lock()
		d.judged = append(d.judged, checker.Judged()...)
		d.policy = policies
		d.mu.Unlock()
	})
	return checker, nil
}

// The trial that proves the checks bite: without the compaction statement
// that allows its rewrite outputs, a lifecycle transition's level-0 write
// (collections/<c>/data/l0/<task>/<n>.seg, the write the old policy
// denied) is reported, naming the action and the key; with moto, moto
// itself refuses it too. TestLifecycleTransitionEndToEnd shows the
// deployed policy allows it.
func TestRemovedStatementIsReportedNamingTheDeniedAction(t *testing.T) {
	if deployed == nil {
		t.Skip("needs the deployed policies (" + EnvTemplate + "): make e2e-iam or make e2e-moto")
	}
	clock := newCxClock()
	opts := localenv.Options{NoDelivery: true, Now: clock.Now, Policy: cxPolicy(100)}
	checker, err := deployed.wire(t, &opts, resources.FnCompaction+":WriteRewriteOutputs", func([]string) {})
	if err != nil {
		t.Fatal(err)
	}
	env, err := localenv.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", toCold); err != nil {
		t.Fatal(err)
	}
	cxAppend(t, env, "c1", 4)
	clock.Advance(2 * time.Hour)
	_, body := headTask(t, env, "c1", contract.NewSweepTask, contract.KindLifecycleTransition)
	cxInvoke(t, env, resources.FnCompaction, body)
	_ = env.Close()
	violations := checker.Violations()
	{
		want := []string{"function compaction: s3:PutObject on arn:aws:s3:::" + env.Prov.Def.Bucket.Name + "/collections/c1/data/l0/lifecycletransition-"}
		if deployed.moto != nil {
			want = append(want, "function compaction: the backend refused s3 PutObject (HTTP 403 AccessDenied) on "+env.Prov.Def.Bucket.Name+"/collections/c1/data/l0/")
		}
		for _, w := range want {
			found := false
			for _, v := range violations {
				found = found || strings.HasPrefix(v, w)
			}
			if !found {
				t.Errorf("no violation starting %q among %q", w, violations)
			}
		}
		t.Logf("reported: %q", violations)
	}
}

// motoPolicy is what moto can enforce of pol, adjusted for two ways moto's
// IAM access control departs from AWS's (the checker judges every call by
// AWS's rules regardless):
//
//   - moto authorizes every DynamoDB request against the resource "*" (it
//     never names the table), so an allow on the table's ARN never matches
//     and moto refuses requests the policy allows. DynamoDB statements reach
//     moto with Resource "*": moto still checks their actions, the checker
//     checks the table.
//   - moto authorizes SQS batch operations as actions of their own
//     (sqs:SendMessageBatch ...), where AWS authorizes them by the single
//     action (sqs:SendMessage ...). A statement allowing the single action
//     also allows the batch one at moto, on the same resources.
//   - moto authorizes S3 DeleteObjects once, as s3:DeleteObject on the
//     bucket's ARN (then consults only the bucket policy per key), where
//     AWS authorizes s3:DeleteObject on each key's ARN. A statement allowing
//     s3:DeleteObject on a bucket's objects also allows it on that bucket at
//     moto; the checker judges every key of every batch.
func motoPolicy(pol iamcheck.Policy) iamcheck.Policy {
	var out iamcheck.Policy
	for _, s := range pol.Statements {
		if len(s.Conditions) > 0 {
			// moto judges no condition keys (dynamodb:LeadingKeys):
			// iamcheck does, under make e2e-iam.
			continue
		}
		var ddb, rest []string
		for _, a := range s.Actions {
			switch {
			case strings.HasPrefix(strings.ToLower(a), "dynamodb:"):
				ddb = append(ddb, a)
			case sqsBatch[a] != "":
				rest = append(rest, a, sqsBatch[a])
			default:
				rest = append(rest, a)
			}
		}
		if len(rest) > 0 {
			out.Statements = append(out.Statements, iamcheck.Statement{Sid: s.Sid, Effect: s.Effect, Actions: rest, Resources: s.Resources})
		}
		if len(ddb) > 0 {
			out.Statements = append(out.Statements, iamcheck.Statement{Sid: s.Sid + "DynamoDBAnyTable", Effect: s.Effect, Actions: ddb, Resources: []string{"*"}})
		}
		if slices.Contains(s.Actions, "s3:DeleteObject") {
			var buckets []string
			for _, r := range s.Resources {
				if b, _, ok := strings.Cut(r, "/"); ok && strings.HasPrefix(b, "arn:aws:s3:::") && !slices.Contains(buckets, b) {
					buckets = append(buckets, b)
				}
			}
			if len(buckets) > 0 {
				out.Statements = append(out.Statements, iamcheck.Statement{Sid: s.Sid + "DeleteObjectsBatch", Effect: s.Effect,
					Actions: []string{"s3:DeleteObject"}, Resources: buckets})
			}
		}
	}
	return out
}

// sqsBatch maps an SQS action to the batch action moto checks instead.
var sqsBatch = map[string]string{
	"sqs:SendMessage":             "sqs:SendMessageBatch",
	"sqs:DeleteMessage":           "sqs:DeleteMessageBatch",
	"sqs:ChangeMessageVisibility": "sqs:ChangeMessageVisibilityBatch",
}

// dropStatement removes "<fn>:<sid or index>" from policies.
func dropStatement(policies map[string]iamcheck.Policy, spec string) (map[string]iamcheck.Policy, error) {
	fn, which, ok := strings.Cut(spec, ":")
	pol, known := policies[fn]
	if !ok || !known {
		return nil, fmt.Errorf("%s=%q: want <function>:<statement sid or index>", EnvDrop, spec)
	}
	for i, s := range pol.Statements {
		if s.Sid == which || fmt.Sprint(i) == which {
			out := map[string]iamcheck.Policy{}
			for k, v := range policies {
				out[k] = v
			}
			out[fn] = pol.Without(i)
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s=%q: %s has no statement %s", EnvDrop, spec, fn, which)
}

// unexercisable are the actions the local run cannot make, with why: a
// statement granting only these needs no recorded call.
var unexercisable = map[string]string{
	"logs:CreateLogStream":   "the Lambda service writes a function's logs; the embedded stack sends them to a buffer",
	"logs:PutLogEvents":      "the Lambda service writes a function's logs; the embedded stack sends them to a buffer",
	"sqs:GetQueueAttributes": "Lambda's event source mapping reads queue attributes; the local mapping only receives and deletes",
	"sqs:GetQueueUrl":        "Lambda's event source mapping resolves the queue; the local mapping is given its URL",
	// Owner calls go to the in-process stand-ins, which verify the caller's
	// SigV4 signature (iamauth) but do not emulate API Gateway's IAM
	// authorization against these grants; infra's
	// TestRolesGrantExactlyWhatEachFunctionUses holds each function to
	// exactly the owner routes it calls.
	"execute-api:Invoke": "owner calls reach the in-process stand-ins, which check the signature, not API Gateway's IAM authorization (infra tests pin the routes)",
}

// report prints, for every statement of every function's policy, the
// recorded requests that only it allows (removing it denies them), and for
// a Deny statement the recorded requests it refused (a test attempted the
// act it forbids: TestNoFunctionRoleWritesOperatorRecords,
// TestNoFunctionRoleRemovesTheUndo, TestCompactionRoleCannotOverwriteOutputs).
// After a full run (no -run filter), a statement that no recorded request needs
// fails the run unless all its actions are unexercisable here.
func (d *deployment) report() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.policy == nil {
		return nil
	}
	needed := iamcheck.Needed(d.judged)
	var b strings.Builder
	fmt.Fprintf(&b, "| function | statement | actions | requests only it allows, for a Deny the requests it refused (examples) |\n| --- | --- | --- | --- |\n")
	var unneeded []string
	for _, fn := range sortedFns(d.policy) {
		for i, s := range d.policy[fn].Statements {
			reqs := needed[fn][i]
			var ex []string
			for _, r := range reqs[:min(len(reqs), 2)] {
				ex = append(ex, "`"+r.String()+"`")
			}
			cell := strings.Join(ex, "<br>")
			if len(reqs) > 2 {
				cell += fmt.Sprintf("<br>(%d in all)", len(reqs))
			}
			if len(reqs) == 0 {
				why := whyUnexercisable(s)
				if why == "" {
					unneeded = append(unneeded, fmt.Sprintf("%s statement %d (%s)", fn, i, s))
					why = "NOT EXERCISED"
				}
				cell = "none: " + why
			}
			fmt.Fprintf(&b, "| %s | %d %s | %s | %s |\n", fn, i, s.Sid, strings.Join(s.Actions, ", "), cell)
		}
	}
	fmt.Print("\ne2e: which recorded calls need each deployed statement\n" + b.String())
	if path := os.Getenv(EnvNeedsReport); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		return nil // a partial run proves nothing about coverage
	}
	if len(unneeded) > 0 {
		return fmt.Errorf("deployed statements no recorded call needs (grant unused permissions, or a test is missing): %s", strings.Join(unneeded, "; "))
	}
	return nil
}

func whyUnexercisable(s iamcheck.Statement) string {
	var why []string
	for _, a := range s.Actions {
		w, ok := unexercisable[a]
		if !ok {
			return ""
		}
		why = append(why, w)
	}
	sort.Strings(why)
	return strings.Join(dedupSorted(why), "; ")
}

func dedupSorted(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func sortedFns(m map[string]iamcheck.Policy) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Issue 25 item 4: no function role may write an operator record. Each
// function's identity, under its deployed policy, tries to record a
// lineage confirmation (the record GC trusts to lift a head-regression
// refusal): every attempt is explicitly denied (dynamodb:LeadingKeys on
// resources.OperatorKeyPrefix); the operator's own credentials record it,
// and GC still reads it.
func TestNoFunctionRoleWritesOperatorRecords(t *testing.T) {
	if deployed == nil {
		t.Skip("needs the deployed policies (" + EnvTemplate + "): make e2e-iam or make e2e-moto")
	}
	opts := localenv.Options{NoDelivery: true}
	checker, err := deployed.wire(t, &opts, deployed.drop, func([]string) {}) // the trial BCC_E2E_IAM_DROP=gc:NoOperatorRecords fails it
	if err != nil {
		t.Fatal(err)
	}
	env, err := localenv.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ctx := context.Background()
	conf := contract.LineageConfirmation{SchemaVersion: 1, Collection: "c1", HeadVersion: 2, HeadChecksum: contract.Checksum([]byte("v2")),
		AbandonedHeadVersion: 3, AbandonedHeadChecksum: contract.Checksum([]byte("v3")), ConfirmedBy: "forger", ConfirmedAtUnixMs: 1}
	for _, f := range env.Prov.Def.Functions {
		_ = awsio.NewObservedTable(env.FunctionClients(f.Name).Dynamo, env.Config.Table).ConfirmLineage(ctx, conf)
	}
	denied := map[string]bool{}
	for _, v := range checker.Violations() {
		for _, f := range env.Prov.Def.Functions {
			if strings.HasPrefix(v, "function "+f.Name+": dynamodb:PutItem on ") && strings.Contains(v, "explicitly denied") {
				denied[f.Name] = true
			}
		}
	}
	for _, f := range env.Prov.Def.Functions {
		if !denied[f.Name] {
			t.Errorf("%s may write a lineage confirmation (violations: %q)", f.Name, checker.Violations())
		}
	}
	conf.ConfirmedBy = "ops@example.com"
	if err := awsio.NewObservedTable(env.Clients.Dynamo, env.Config.Table).ConfirmLineage(ctx, conf); err != nil {
		t.Fatalf("the operator's confirmation: %v", err)
	}
	got, ok, err := awsio.NewObservedTable(env.FunctionClients(resources.FnGC).Dynamo, env.Config.Table).LineageConfirmation(ctx, "c1", 1)
	if err != nil || !ok || got.ConfirmedBy != "ops@example.com" {
		t.Fatalf("GC reads %+v %v %v", got, ok, err)
	}
	for _, v := range checker.Violations() {
		if strings.HasPrefix(v, "function gc: dynamodb:GetItem") {
			t.Errorf("GC may not read the confirmation: %s", v)
		}
	}
}

// Issue 25 item 4: the compaction role writes rewrite outputs only where
// no object is, enforced by its deployed policy (s3:if-none-match), not
// only by the code: a PutObject over an output key without If-None-Match
// is explicitly denied; the same write with it is allowed.
func TestCompactionRoleCannotOverwriteOutputs(t *testing.T) {
	if deployed == nil {
		t.Skip("needs the deployed policies (" + EnvTemplate + "): make e2e-iam or make e2e-moto")
	}
	opts := localenv.Options{NoDelivery: true}
	checker, err := deployed.wire(t, &opts, deployed.drop, func([]string) {}) // BCC_E2E_IAM_DROP=compaction:OutputsOnlyWhereNoneIs fails it
	if err != nil {
		t.Fatal(err)
	}
	env, err := localenv.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ctx := context.Background()
	key := contract.RewriteOutputKey("c1", 1, "compaction-0123456789abcdef", 0)
	b := awsio.NewBucket(env.FunctionClients(resources.FnCompaction).S3, env.Config.Bucket)
	if _, err := b.PutIfAbsent(ctx, key, []byte("mine")); err != nil {
		t.Fatalf("compaction's own output write: %v", err)
	}
	for _, v := range checker.Violations() {
		t.Errorf("the If-None-Match write was judged: %s", v)
	}
	_, _ = b.Put(ctx, key, []byte("overwritten"))
	denied := false
	for _, v := range checker.Violations() {
		denied = denied || strings.HasPrefix(v, "function compaction: s3:PutObject on ") && strings.Contains(v, "explicitly denied")
	}
	if !denied {
		t.Fatalf("compaction may overwrite an output without If-None-Match (violations %q)", checker.Violations())
	}
}

// Issue 25 item 3: no function role can take the data bucket's undo away.
// Each function's identity, under its deployed policy, tries every act
// that would (delete an object's version, suspend versioning, change the
// lifecycle, the bucket policy or object lock, delete the bucket): every
// one is explicitly denied by its NoUndoRemoval statement, whatever else
// the role may do in the bucket.
func TestNoFunctionRoleRemovesTheUndo(t *testing.T) {
	if deployed == nil {
		t.Skip("needs the deployed policies (" + EnvTemplate + "): make e2e-iam or make e2e-moto")
	}
	opts := localenv.Options{NoDelivery: true}
	checker, err := deployed.wire(t, &opts, deployed.drop, func([]string) {}) // BCC_E2E_IAM_DROP=gc:NoUndoRemoval fails it
	if err != nil {
		t.Fatal(err)
	}
	env, err := localenv.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ctx := context.Background()
	key := contract.RewriteOutputKey("c1", 1, "compaction-0123456789abcdef", 0)
	if _, err := awsio.NewBucket(env.Clients.S3, env.Config.Bucket).Put(ctx, key, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	bucket := aws.String(env.Config.Bucket)
	for _, f := range env.Prov.Def.Functions {
		c := env.FunctionClients(f.Name).S3
		_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String(key), VersionId: aws.String("v1")})
		_, _ = c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: bucket, Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{{Key: aws.String(key), VersionId: aws.String("v1")}}}})
		_, _ = c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: bucket, VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusSuspended}})
		_, _ = c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: bucket, LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: []s3types.LifecycleRule{{
			ID: aws.String("expire"), Status: s3types.ExpirationStatusEnabled, Filter: &s3types.LifecycleRuleFilter{Prefix: aws.String("")},
			NoncurrentVersionExpiration: &s3types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}}}}})
		_, _ = c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: bucket, Policy: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
		_, _ = c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: bucket})
		_, _ = c.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: bucket, ObjectLockConfiguration: &s3types.ObjectLockConfiguration{ObjectLockEnabled: s3types.ObjectLockEnabledEnabled}})
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: bucket})
	}
	refused := map[string]map[string]bool{}
	for _, j := range checker.Judged() {
		if j.Decision != iamcheck.ExplicitDeny || j.DeniedBy < 0 || checker.Policy(j.Function).Statements[j.DeniedBy].Sid != "NoUndoRemoval" {
			continue
		}
		if refused[j.Function] == nil {
			refused[j.Function] = map[string]bool{}
		}
		refused[j.Function][j.Request.Action] = true
	}
	want := []string{"s3:DeleteObjectVersion", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration",
		"s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketObjectLockConfiguration", "s3:DeleteBucket"}
	for _, f := range env.Prov.Def.Functions {
		for _, a := range want {
			if !refused[f.Name][a] {
				t.Errorf("%s: %s on the data bucket is not refused by NoUndoRemoval (violations %q)", f.Name, a, checker.Violations())
			}
		}
	}
}
