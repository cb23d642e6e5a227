package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/resources"
)

// The tests synthesize three stacks, once each, in TestMain (jsii keeps one
// Node process per test binary; every synthesis costs seconds, every
// assertion tens of milliseconds):
//
//   - def: cdk.json's context plus sandbox=true, what a newcomer deploys to
//     a demo account (data bucket created, the stand-in owners deployed with
//     it, generated names, no alarm topic);
//   - own: cdk.json's context next to real owners (API Gateway URLs), data
//     bucket created, generated names, no alarm destination on purpose;
//   - imp: an existing bucket imported by name, head events through
//     EventBridge, owner endpoints (an API Gateway URL and a custom domain
//     with its invoke ARN), X-Ray tracing, VPC placement, a watermark in
//     another bucket, an alarm email, another prefix, fixed names.
//
// The function assets are the real functions (functions/<name>/main.go),
// built for linux/arm64 into a temporary directory. Before the functions
// exist, BCC_INFRA_STUB_MISSING_FUNCTIONS=1 builds a do-nothing main for the
// missing ones in a temporary directory outside the repository.
type synth struct {
	cfg      Config
	c        *Coordinator
	tmpl     assertions.Template
	ann      assertions.Annotations
	json     map[string]any // the template
	resource map[string]map[string]any
	byPath   map[string]string // construct path below the stack -> logical id
	outdir   string
}

var def, imp, own *synth

var impSubnets = []string{"subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"}

const (
	impBucket    = "existing-data-bucket"
	impWMBucket  = "query-plane-watermarks"
	impWMKey     = "global/safe_ts.json"
	impPublisher = "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod/v1" // API Gateway: the grant is derived
	impCCS       = "https://ccs.internal.example/v1"                                // a custom domain: the ARN comes from context
	impCCSArn    = "arn:aws:execute-api:eu-west-1:111122223333:ccsapi0001/prod/*"
	impSigning   = "execute-api:eu-west-1"
	impVpc       = "vpc-0123456789abcdef0"
	impSG        = "sg-0123456789abcdef0"
	impEmail     = "oncall@example.com"
	impPolicy    = `{"compaction":{"merge_factor":6},"functions":{"compaction_timeout_ms":"4m"}}`
	ownPublisher = "https://p1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod"
	ownCCS       = "https://c1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod"
)

func TestMain(m *testing.M) {
	reexecWithNode()
	flag.Parse()
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra tests: setup:", err)
		code = 1
	}
	jsii.Close()
	os.Exit(code)
}

// reexecWithNode silences Node 20's end-of-life banner for jsii (the
// machine's Node runs it; make test-infra checks it is 20 or newer). jsii
// reads its environment when the CDK packages register their types
// (package init, before TestMain), so setting it here is too late: the test
// binary re-executes itself once with it set.
func reexecWithNode() {
	if os.Getenv("BCC_INFRA_TEST_REEXEC") != "" {
		return
	}
	env := []string{"BCC_INFRA_TEST_REEXEC=1", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20"}
	self, err := os.Executable()
	if err != nil {
		return
	}
	jsii.Close() // removes the runtime jsii unpacked at init; nothing was started
	err = syscall.Exec(self, os.Args, append(os.Environ(), env...))
	fmt.Fprintln(os.Stderr, "infra tests: re-exec with Node settings failed, continuing:", err)
}

func setup(m *testing.M) (int, error) {
	tmp, err := os.MkdirTemp("", "bcc-infra-test-*")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(tmp)
	assets := filepath.Join(tmp, "assets")
	start := time.Now()
	if err := buildFunctions(assets, filepath.Join(tmp, "stub")); err != nil {
		return 1, err
	}
	built := time.Since(start)

	ctx, err := cdkJSONContext()
	if err != nil {
		return 1, err
	}
	start = time.Now()
	if def, err = synthesize(ctx, map[string]any{CtxSandbox: "true"}, assets, filepath.Join(tmp, "out-def")); err != nil {
		return 1, err
	}
	if own, err = synthesize(ctx, map[string]any{CtxPublisherEndpoint: ownPublisher, CtxCCSEndpoint: ownCCS, CtxNoAlarmDestination: "true"},
		assets, filepath.Join(tmp, "out-own")); err != nil {
		return 1, err
	}
	if imp, err = synthesize(ctx, map[string]any{
		CtxPrefix: "acme", CtxDataBucketName: impBucket, CtxPublisherEndpoint: impPublisher, CtxCCSEndpoint: impCCS,
		CtxWatermarkBucket: impWMBucket, CtxWatermarkKey: impWMKey, CtxAlarmEmail: impEmail, CtxPolicy: impPolicy,
		CtxHeadEvents: resources.HeadEventsEventBridge, CtxCCSInvokeArn: impCCSArn, CtxOwnerSigning: impSigning,
		CtxTracing: "true", CtxVpcID: impVpc, CtxVpcSubnetIDs: strings.Join(impSubnets, ","), CtxVpcSecurityGroups: impSG, CtxFixedNames: "true",
	}, assets, filepath.Join(tmp, "out-imp")); err != nil {
		return 1, err
	}
	if testing.Verbose() {
		fmt.Printf("infra tests: built functions in %s, synthesized 3 stacks in %s\n", built.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	return m.Run(), nil
}

// cdkJSONContext is the "context" of the repository's cdk.json, so that the
// tests synthesize with the same feature flags as the CLI.
func cdkJSONContext() (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("cdk.json: %w", err)
	}
	return f.Context, nil
}

func synthesize(base, extra map[string]any, assets, outdir string) (s *synth, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("synthesis panicked: %v\n%s", r, debug.Stack())
		}
	}()
	ctx := map[string]any{}
	for k, v := range base {
		ctx[k] = v
	}
	for k, v := range extra {
		ctx[k] = v
	}
	ctx["aws:cdk:enable-path-metadata"] = true // as the CLI does
	ctx["aws:cdk:enable-asset-metadata"] = true
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(outdir)})
	cfg, err := ConfigFromContext(app)
	if err != nil {
		return nil, err
	}
	cfg.AssetDir = assets
	c, err := NewCoordinatorStack(app, cfg.StackName, &CoordinatorStackProps{Config: cfg})
	if err != nil {
		return nil, err
	}
	AddNag(app)
	s = &synth{cfg: cfg, c: c, outdir: outdir}
	s.tmpl = assertions.Template_FromStack(c.Stack, nil)
	s.ann = assertions.Annotations_FromStack(c.Stack)
	app.Synth(nil)
	s.json = *s.tmpl.ToJSON()
	s.resource = map[string]map[string]any{}
	s.byPath = map[string]string{}
	for id, r := range s.json["Resources"].(map[string]any) {
		s.resource[id] = r.(map[string]any)
		if md, ok := s.resource[id]["Metadata"].(map[string]any); ok {
			if p, ok := md["aws:cdk:path"].(string); ok {
				s.byPath[strings.TrimPrefix(p, cfg.StackName+"/")] = id
			}
		}
	}
	return s, nil
}

// buildFunctions builds functions/<name> for every function in the resource
// definition into <assets>/<name>/bootstrap, exactly as `make build` does.
func buildFunctions(assets, stubRoot string) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	var real, missing []string
	for _, f := range resources.Default(DefaultPrefix).Functions {
		if _, err := os.Stat(filepath.Join(root, "functions", f.Name, "main.go")); err == nil {
			real = append(real, f.Name)
		} else {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 && os.Getenv("BCC_INFRA_STUB_MISSING_FUNCTIONS") != "1" {
		return fmt.Errorf("functions/%s/main.go missing: the infra tests build the real functions "+
			"(set BCC_INFRA_STUB_MISSING_FUNCTIONS=1 to stand in do-nothing binaries outside the repo while they are written)",
			strings.Join(missing, ", functions/"))
	}
	staging := filepath.Join(filepath.Dir(assets), "bin")
	build := func(dir string, pkgs []string) error {
		args := append([]string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", staging + "/"}, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		return nil
	}
	if len(real) > 0 {
		var pkgs []string
		for _, n := range real {
			pkgs = append(pkgs, "./functions/"+n)
		}
		if err := build(root, pkgs); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "infra tests: STUB binaries for missing functions: %s\n", strings.Join(missing, ", "))
		if err := os.MkdirAll(stubRoot, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(stubRoot, "go.mod"), []byte("module stub\n\ngo 1.26\n"), 0o644); err != nil {
			return err
		}
		var pkgs []string
		for _, n := range missing {
			if err := os.MkdirAll(filepath.Join(stubRoot, n), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(stubRoot, n, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
				return err
			}
			pkgs = append(pkgs, "./"+n)
		}
		if err := build(stubRoot, pkgs); err != nil {
			return err
		}
	}
	for _, n := range append(real, missing...) {
		if err := os.MkdirAll(filepath.Join(assets, n), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(staging, n), filepath.Join(assets, n, "bootstrap")); err != nil {
			return err
		}
	}
	// The sandbox's stand-ins: sandbox/<name> -> <assets>/sandbox/<name>/bootstrap.
	var standins []string
	for _, f := range resources.SandboxDefinition().Functions {
		standins = append(standins, "./sandbox/"+f.Name)
	}
	sb := filepath.Join(filepath.Dir(assets), "sandbox-bin")
	staging = sb
	if err := build(root, standins); err != nil {
		return err
	}
	for _, f := range resources.SandboxDefinition().Functions {
		if err := os.MkdirAll(filepath.Join(assets, sandboxAssetDir, f.Name), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(sb, f.Name), filepath.Join(assets, sandboxAssetDir, f.Name, "bootstrap")); err != nil {
			return err
		}
	}
	return nil
}

// check runs assertions that panic on failure (the CDK assertions library
// does) and turns a panic into a test failure instead of a dead binary.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: %v", what, r)
		}
	}()
	f()
}

// id is the logical id of the CloudFormation resource at a construct path
// relative to the stack ("ObserverRole" means ObserverRole/Resource).
func (s *synth) id(t *testing.T, path string) string {
	t.Helper()
	if !strings.Contains(path, "/") {
		path += "/Resource"
	}
	id, ok := s.byPath[path]
	if !ok {
		t.Fatalf("no resource at %s (have %v)", path, sortedKeys(s.byPath))
	}
	return id
}

// ref renders the references the way render does.
func ref(id string) string       { return "${" + id + "}" }
func getAtt(id, a string) string { return "${" + id + "." + a + "}" }

// render flattens a CloudFormation value to a string: Ref X -> ${X},
// GetAtt X.Y -> ${X.Y}, Join concatenates.
func render(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	case bool:
		return fmt.Sprint(v)
	case map[string]any:
		if r, ok := v["Ref"]; ok {
			return ref(r.(string))
		}
		if ga, ok := v["Fn::GetAtt"]; ok {
			a := ga.([]any)
			return getAtt(a[0].(string), a[1].(string))
		}
		if j, ok := v["Fn::Join"]; ok {
			a := j.([]any)
			var parts []string
			for _, p := range a[1].([]any) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, a[0].(string))
		}
		if s, ok := v["Fn::Sub"].(string); ok {
			return s
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func list(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	default:
		return []any{v}
	}
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// ofType returns the logical ids of the resources of type typ, sorted.
func (s *synth) ofType(typ string) []string {
	var ids []string
	for id, r := range s.resource {
		if r["Type"] == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
