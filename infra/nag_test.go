package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/resources"
)

func TestCdkNagAwsSolutionsHasNoUnsuppressedFindings(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
		for kind, msgs := range map[string]*[]*cxapi.SynthesisMessage{
			"error":   s.ann.FindError(jsii.String("*"), nag),
			"warning": s.ann.FindWarning(jsii.String("*"), nag),
			// any error at all (CDK's own validations too)
			"any error": s.ann.FindError(jsii.String("*"), assertions.Match_AnyValue()),
		} {
			for _, msg := range *msgs {
				t.Errorf("cdk-nag %s at %s: %v", kind, *msg.Id, msg.Entry.Data)
			}
		}
	})
}

// A stack without its owners would fail every reconciliation and alarm by
// design: synthesis refuses it with the documented message (what to pass,
// or SANDBOX=true), unless it is a sandbox, which deploys the stand-ins
// (def) and refuses to point at anything real.
func TestAStackWithoutOwnersIsRefusedUnlessSandbox(t *testing.T) {
	base, err := cdkJSONContext()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  map[string]any
		want string
	}{
		{"cdk.json as is", nil, ErrNoOwners + ": publisherEndpoint (PUBLISHER_ENDPOINT) and ccsEndpoint (CCS_ENDPOINT) not set. " +
			"Without its Manifest Publisher and Catalog Control Service the coordinator fails every reconciliation and alarms"},
		{"publisher only", map[string]any{CtxPublisherEndpoint: ownPublisher}, ErrNoOwners + ": ccsEndpoint (CCS_ENDPOINT) not set"},
		{"ccs only", map[string]any{CtxCCSEndpoint: ownCCS}, "or SANDBOX=true (-c sandbox=true) for a demo-account stack that deploys the stand-in publisher, CCS and watermark"},
		{"sandbox with an owner", map[string]any{CtxSandbox: "true", CtxCCSEndpoint: ownCCS}, "drop ccsEndpoint"},
		{"sandbox with an imported bucket", map[string]any{CtxSandbox: "true", CtxDataBucketName: impBucket}, "drop dataBucketName"},
		{"sandbox without signing", map[string]any{CtxSandbox: "true", CtxOwnerAuth: resources.OwnerAuthNone}, "drop ownerAuth=none"},
		{"sandbox not a boolean", map[string]any{CtxSandbox: "yes"}, `context sandbox "yes": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := map[string]any{}
			for k, v := range base {
				ctx[k] = v
			}
			for k, v := range tc.ctx {
				ctx[k] = v
			}
			cfg, err := configFrom(func(k string) any { return ctx[k] })
			if err == nil {
				cfg.AssetDir = def.cfg.AssetDir
				_, err = NewCoordinatorStack(awscdk.NewApp(nil), cfg.StackName, &CoordinatorStackProps{Config: cfg})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("synthesis error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if !def.cfg.Sandbox || def.c.Sandbox == nil {
		t.Fatal("the default test stack is not the sandbox")
	}
}

// TestSuppressionsAreTheDocumentedOnes pins which findings are suppressed,
// on which resources, and that each carries its reason.
func TestSuppressionsAreTheDocumentedOnes(t *testing.T) {
	reasons := map[string][]string{
		"AwsSolutions-IAM5": {ReasonObjectKeyWildcards, ReasonOwnerRouteWildcard, ReasonNoResourceLevel, ReasonStandinPublisherKeys, ReasonStandinCCSReads},
		"AwsSolutions-IAM4": {ReasonNotificationsHandlerManagedPolicy},
		"AwsSolutions-S1":   {ReasonAccessLogBucket},
		"AwsSolutions-SQS3": {ReasonFailureDestination},
	}
	all(t, func(t *testing.T, s *synth) {
		got := map[string]bool{}
		for id, r := range s.resource {
			md, _ := r["Metadata"].(map[string]any)
			nag, _ := md["cdk_nag"].(map[string]any)
			for _, sup := range list(nag["rules_to_suppress"]) {
				sup := sup.(map[string]any)
				rule := sup["id"].(string)
				if !slices.Contains(reasons[rule], sup["reason"].(string)) {
					t.Errorf("%s: unexpected suppression %s (%v)", id, rule, sup["reason"])
				}
				path, _ := md["aws:cdk:path"].(string)
				path = strings.TrimPrefix(path, s.cfg.StackName+"/")
				got[rule+" "+path[:strings.Index(path, "/")]] = true
			}
		}
		want := map[string]bool{"AwsSolutions-IAM4 " + findChildID(s): true, "AwsSolutions-SQS3 ObserverFailuresQueue": true}
		for _, f := range s.c.Definition.Functions {
			want["AwsSolutions-IAM5 "+exportName(f.Name)+"Role"] = true
		}
		if s != imp {
			want["AwsSolutions-S1 AccessLogBucket"] = true
		}
		if s == def {
			want["AwsSolutions-IAM5 StandinPublisherRole"] = true
			want["AwsSolutions-IAM5 StandinCcsRole"] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("suppressions\n got %v\nwant %v", got, want)
		}
	})
	for rule, rs := range reasons {
		for _, r := range rs {
			if len(r) < 80 || !strings.HasPrefix(r, strings.TrimPrefix(rule, "AwsSolutions-")+":") {
				t.Errorf("%s reason too thin: %q", rule, r)
			}
		}
	}
}

func findChildID(s *synth) string {
	return *findChild(s.c.Stack, "BucketNotificationsHandler").Node().Id()
}

func TestObjectKeyFindingRegexMatchesBothARNForms(t *testing.T) {
	re := ObjectKeyFindingRegex("collections/*/manifests/*")
	if re != `/^Resource::.+\/collections\/\*\/manifests\/\*$/` {
		t.Fatalf("regex %s", re)
	}
}

// TestSynthesisFailsLoudlyWithoutBootstrap: an empty or incomplete asset
// directory must be an error from the stack constructor, never a silently
// synthesized zip without bootstrap.
func TestSynthesisFailsLoudlyWithoutBootstrap(t *testing.T) {
	fns := resources.Default(DefaultPrefix).Functions
	good, err := os.ReadFile(filepath.Join(def.cfg.AssetDir, fns[0].Name, "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		setup func(dir string) // dir is the broken function's asset dir
		want  string
	}{
		{"asset dir missing", func(dir string) { os.RemoveAll(dir) }, "asset directory"},
		{"asset dir empty", func(dir string) { os.Remove(filepath.Join(dir, "bootstrap")) }, "is empty"},
		{"bootstrap missing", func(dir string) {
			os.Remove(filepath.Join(dir, "bootstrap"))
			os.WriteFile(filepath.Join(dir, "main"), good, 0o755)
		}, "bootstrap missing"},
		{"bootstrap empty", func(dir string) { os.WriteFile(filepath.Join(dir, "bootstrap"), nil, 0o755) }, "non-empty"},
		{"bootstrap not executable", func(dir string) { os.Chmod(filepath.Join(dir, "bootstrap"), 0o644) }, "not executable"},
		{"bootstrap not ELF", func(dir string) { os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n"), 0o755) }, "not an ELF"},
		{"bootstrap wrong architecture", func(dir string) {
			os.WriteFile(filepath.Join(dir, "bootstrap"), elfHeader(elf.EM_X86_64), 0o755)
		}, "want an arm64 executable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assets := t.TempDir()
			for _, f := range fns {
				os.MkdirAll(filepath.Join(assets, f.Name), 0o755)
				if err := os.WriteFile(filepath.Join(assets, f.Name, "bootstrap"), good, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			broken := fns[len(fns)-1].Name
			tc.setup(filepath.Join(assets, broken))
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			var c *Coordinator
			var err error
			check(t, "constructor", func() {
				c, err = NewCoordinatorStack(app, "broken", &CoordinatorStackProps{Config: Config{AssetDir: assets, PublisherEndpoint: ownPublisher, CCSEndpoint: ownCCS}})
			})
			if err == nil || c != nil {
				t.Fatalf("NewCoordinatorStack succeeded with a broken %s asset", broken)
			}
			if !strings.Contains(err.Error(), "function "+broken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name function %s and %q", err, broken, tc.want)
			}
			if n := len(*app.Node().Children()); n != 0 {
				t.Fatalf("the failed constructor left %d constructs in the app", n)
			}
		})
	}
}

// elfHeader is a minimal 64-bit little-endian ELF executable header for machine.
func elfHeader(machine elf.Machine) []byte {
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT), Ehsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, h)
	return b.Bytes()
}

func TestConfigFromContext(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"dataBucketName": " b ", "prefix": "x"}})
	c, err := ConfigFromContext(app)
	if err != nil {
		t.Fatal(err)
	}
	if c.Prefix != "x" || c.StackName != "x-coordinator" || c.DataBucketName != "b" || c.AssetDir != "build" {
		t.Fatalf("config %+v", c)
	}
	app = awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"prefix": 3}})
	if _, err := ConfigFromContext(app); err == nil {
		t.Fatal("a non-string prefix was accepted")
	}
	if err := validate(resources.Default("x"), Config{AlarmEmail: "a@b", AlarmTopicArn: "arn:aws:sns:x"}); err == nil {
		t.Fatal("both alarm destinations accepted")
	}
}
