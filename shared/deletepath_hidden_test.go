package shared_test

// Delete paths the call-graph check must also see (issue 23 review: each
// was reported by no check before; TestEveryDeleteGoesThroughTheGate). Each case injects a
// path that deletes outside the gate (no judge, or no check at all) into a
// shipped package, as TestDeletePathCheckCatchesANewCaller does, and
// expects a violation naming it.

import (
	"slices"
	"strings"
	"testing"
)

func TestDeletePathCheckCatchesHiddenCallers(t *testing.T) {
	pkgs, exports := shipped(t)
	cases := map[string]struct{ pkg, src, want string }{
		// Inside package gc the sender is the only caller of the port, but
		// any code may hand the sender a prover of its own: this one never
		// asks judge, and the batch it "proves" is sent.
		"a prover that never asks the gate": {gcPkg, `package gc
import "context"
func (e *Executor) purgeAll(ctx context.Context, c string, keys []string) error {
	_, _, err := e.deleteProven(ctx, batch{collection: c, keys: keys, t: &tally{},
		prove: func(context.Context, []string) ([]string, *Proof, error) { return keys, e.newProof(c, 0, 0, "", e.now()), nil }})
	return err
}`, "purgeAll"},
		// A ProvenBatch assembled field by field (no composite literal)
		// outside the gate's files and handed to the sender's call: no
		// wait, no proof taken, nothing judged.
		"a batch assembled by field assignment": {gcPkg, `package gc
import "context"
func (e *Executor) dropNow(ctx context.Context, c string, keys []string) error {
	var pb ProvenBatch
	pb.keys, pb.proof = keys, e.newProof(c, 0, 0, "", e.now())
	_, _, err := e.call(ctx, batch{collection: c, t: &tally{}}, pb)
	return err
}`, "dropNow"},
		// The SDK client's DeleteObjects through an interface declared
		// where it is used (the handbook's own style): the callee is the
		// local interface's method, not one of deleteCalls.
		"SDK delete through a local interface": {appPkg, `package app
import ("context"; "github.com/aws/aws-sdk-go-v2/service/s3")
type objectRemover interface {
	DeleteObjects(context.Context, *s3.DeleteObjectsInput, ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}
func wipe(ctx context.Context, cl Clients) {
	var r objectRemover = cl.S3
	_, _ = r.DeleteObjects(ctx, &s3.DeleteObjectsInput{})
}`, "DeleteObjects"},
		// A function literal bound at package level is no FuncDecl: the
		// checker never looks inside it.
		"SDK delete in a package-level function value": {appPkg, `package app
import ("context"; "github.com/aws/aws-sdk-go-v2/service/s3")
var wipeAll = func(ctx context.Context, cl Clients) { _, _ = cl.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{}) }`, "DeleteObjects"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, _ := deleteViolations(t, pkgs, exports, map[string]string{tc.pkg: tc.src})
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Fatalf("injected %s: no violation reported (%v), want one containing %q", name, v, tc.want)
			}
		})
	}
}

// The operator CLI is shipped code with the deployment's credentials
// (bcc reads the plan, records confirmations and recovers leases): the
// check covers only what ./functions/... links, so a delete added to
// cmd/bcc is never seen.
func TestDeletePathCheckCoversTheOperatorCLI(t *testing.T) {
	pkgs, _ := shipped(t)
	if !slices.ContainsFunc(pkgs, func(p listed) bool { return p.ImportPath == module+"/cmd/bcc" }) {
		t.Fatalf("cmd/bcc is not among the %d packages the delete-path check type-checks (go list ./functions/... only)", len(pkgs))
	}
}
