package shared_test

// The delete paths of the shipped code (issue 23, SYSTEM rule 15): every
// physical delete the coordinator makes goes through one gate. The types
// make the gate unavoidable inside package gc (the delete port accepts
// only a gc.ProvenBatch, which only the gate's sender builds); this test
// keeps it so across packages: it type-checks every package a function
// links and fails when any code calls an S3 delete (the SDK's DeleteObject
// and DeleteObjects, the adapter's delete methods, the delete port)
// outside the few functions listed in allowedDeleteCalls, or builds a
// ProvenBatch or a Proof outside the gate's sender. The safety
// documentation's inventory of delete paths names the same functions.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const (
	awsioPkg = module + "/shared/adapters/awsio"
	gcPkg    = module + "/shared/core/gc"
	appPkg   = module + "/shared/lambda/app"
	hoPkg    = module + "/shared/core/handoff"
	s3Pkg    = "github.com/aws/aws-sdk-go-v2/service/s3"
)

// deleteCalls are the callees that delete objects in S3: the SDK's calls
// and every method of ours that leads to one.
var deleteCalls = []string{
	"(*" + s3Pkg + ".Client).DeleteObjects",
	"(*" + s3Pkg + ".Client).DeleteObject",
	"(" + awsioPkg + ".S3API).DeleteObjects",
	"(" + awsioPkg + ".S3API).DeleteObject",
	"(*" + awsioPkg + ".Bucket).DeleteProven",
	"(*" + awsioPkg + ".Bucket).Delete",
	"(*" + awsioPkg + ".Bucket).DeleteIfMatch",
	"(" + gcPkg + ".Deleter).DeleteProven",
	"(" + appPkg + ".GCBucket).DeleteProven",
	"(" + hoPkg + ".Reclaimer).DeleteKeys",
	// The gate's sender inside package gc: whoever calls it sends a batch.
	"(*" + gcPkg + ".Executor).deleteProven",
	"(*" + gcPkg + ".Executor).call",
}

// allowedDeleteCalls is the whole call graph of S3 deletes in shipped
// code: caller -> the delete callees it may call.
var allowedDeleteCalls = map[string][]string{
	// The gate's sender: the only caller of the delete port, called only
	// by its own attempt, which proves first.
	"(*" + gcPkg + ".Executor).call":    {"(" + gcPkg + ".Deleter).DeleteProven"},
	"(*" + gcPkg + ".Executor).attempt": {"(*" + gcPkg + ".Executor).call"},
	// The clients of the gate's sender: the sweep (objects and outputs),
	// the trim (manifests) and the tombstone cleanup, each with a prover
	// that asks the gate (knownProvers).
	"(*" + gcPkg + ".Executor).deleteAll": {"(*" + gcPkg + ".Executor).deleteProven"},
	"(*" + gcPkg + ".Executor).trimCall":  {"(*" + gcPkg + ".Executor).deleteProven"},
	"(*" + gcPkg + ".tombRun).deleteKeys": {"(*" + gcPkg + ".Executor).deleteProven"},
	// The function's wiring of the port to the adapter.
	"(" + appPkg + ".GCBucket).DeleteProven": {"(*" + awsioPkg + ".Bucket).DeleteProven"},
	// The adapter: a proven batch, one DeleteObjects call.
	"(*" + awsioPkg + ".Bucket).DeleteProven": {"(" + awsioPkg + ".S3API).DeleteObjects"},
	// One-key deletes the owners' stand-ins use (the publisher's root
	// withdrawal and head retirement); no shipped code calls them.
	"(*" + awsioPkg + ".Bucket).Delete":        {"(" + awsioPkg + ".S3API).DeleteObject"},
	"(*" + awsioPkg + ".Bucket).DeleteIfMatch": {"(" + awsioPkg + ".S3API).DeleteObject"},
	// The naive cleanup guard ambiguous_reread exists against: only its
	// mutation proofs inject a Reclaimer (testkit/naive); no shipped type
	// implements one (checked below).
	"(*" + hoPkg + ".Handoff).naiveAmbiguous": {"(" + hoPkg + ".Reclaimer).DeleteKeys"},
}

// gateBuilders are the only files of package gc that may build a
// ProvenBatch or a Proof: the sender (after the proof) and the type's own
// narrowing (Only: a subset keeps its proof).
var gateBuilders = map[string]bool{"gate_send.go": true, "gate_proof.go": true}

// knownProvers are the functions a batch's prover may rest on: each puts
// every key to the gate (judge) after re-reading what the batch rests on.
// A function literal of package gc with the prover's signature must call
// one of them, and each must call judge.
var knownProvers = []string{
	"(*" + gcPkg + ".Executor).proveObjects",
	"(*" + gcPkg + ".Executor).proveOutputs",
	"(*" + gcPkg + ".Executor).proveManifests",
	"(*" + gcPkg + ".tombRun).proveTomb",
}

// gateFunc is the gate itself.
const gateFunc = gcPkg + ".judge"

// provenTypes are the types whose fields only the gate's files write.
var provenTypes = []string{gcPkg + ".ProvenBatch", gcPkg + ".Proof", gcPkg + ".batch"}

// listed is one package of go list -export.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Standard   bool
}

// shipped lists every package a function links, with the export data of
// every dependency.
func shipped(t *testing.T) (ours []listed, exports map[string]string) {
	t.Helper()
	// The functions, and the operator CLI (it holds the deployment's
	// credentials).
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Standard", "./functions/...", "./cmd/bcc")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports = map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if strings.HasPrefix(p.ImportPath, module+"/") {
			ours = append(ours, p)
		}
	}
	return ours, exports
}

// deleteViolations type-checks each package (extra adds source files to a
// package, by import path: the checker's own test) and returns every call
// of a delete callee outside allowedDeleteCalls, every ProvenBatch or
// Proof built outside the gate's sender, and the allowed calls it saw.
func deleteViolations(t *testing.T, pkgs []listed, exports map[string]string, extra map[string]string) (violations []string, seen map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	seen = map[string]bool{}
	var named []*types.TypeName
	var reclaimer *types.Interface
	for _, p := range pkgs {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		if src, ok := extra[p.ImportPath]; ok {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, "injected.go"), src, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}}
		tp, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info)
		if err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		for _, name := range tp.Scope().Names() {
			if tn, ok := tp.Scope().Lookup(name).(*types.TypeName); ok {
				named = append(named, tn)
				if p.ImportPath == hoPkg && name == "Reclaimer" {
					reclaimer, _ = tn.Type().Underlying().(*types.Interface)
				}
			}
		}
		for _, f := range files {
			violations = append(violations, scanFile(fset, p.ImportPath, f, info, seen)...)
		}
	}
	for _, tn := range named {
		if _, isIface := tn.Type().Underlying().(*types.Interface); !isIface && reclaimer != nil &&
			(types.Implements(tn.Type(), reclaimer) || types.Implements(types.NewPointer(tn.Type()), reclaimer)) {
			violations = append(violations, fmt.Sprintf("%s: shipped type %s implements %s.Reclaimer (a delete outside the gate)", fset.Position(tn.Pos()), tn.Name(), hoPkg))
		}
	}
	for _, pr := range knownProvers {
		if !seen[pr+" -> "+gateFunc] {
			violations = append(violations, fmt.Sprintf("prover %s does not ask the gate (%s)", pr, gateFunc))
		}
	}
	sort.Strings(violations)
	return violations, seen
}

func scanFile(fset *token.FileSet, pkg string, f *ast.File, info *types.Info, seen map[string]bool) []string {
	var v []string
	file := filepath.Base(fset.Position(f.Pos()).Filename)
	for _, d := range f.Decls {
		// Every declaration: a function's body, and a package-level
		// variable's initializer (a function value bound at package level).
		caller, body := "", ast.Node(d)
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body == nil {
				continue
			}
			body = d.Body
			if obj, ok := info.Defs[d.Name].(*types.Func); ok {
				caller = obj.FullName()
				if pkg == gcPkg && isProver(obj.Type(), info, pkg) && !slices.Contains(knownProvers, caller) {
					v = append(v, fmt.Sprintf("%s: %s has the prover's signature but is not one of the provers that ask the gate", fset.Position(d.Pos()), caller))
				}
			}
		case *ast.GenDecl:
			caller = pkg + " package-level declaration at " + fset.Position(d.Pos()).String()
		}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				v = append(v, scanCall(fset, caller, n.Sel, info, seen)...)
			case *ast.Ident:
				if caller == gcPkg+".judge" || !(pkg == gcPkg) {
					return true
				}
				if fn, ok := info.Uses[n].(*types.Func); ok && fn.FullName() == gateFunc {
					seen[caller+" -> "+gateFunc] = true
				}
			case *ast.FuncLit:
				if pkg == gcPkg && isProver(info.Types[n].Type, info, pkg) && !callsKnownProver(n, info) {
					v = append(v, fmt.Sprintf("%s: %s makes a prover that asks none of the gate's provers (%v)", fset.Position(n.Pos()), caller, knownProvers))
				}
			case *ast.AssignStmt:
				for _, lhs := range n.Lhs {
					sel, ok := lhs.(*ast.SelectorExpr)
					if !ok {
						continue
					}
					if name := derefName(info.Types[sel.X].Type); slices.Contains(provenTypes, name) && !(pkg == gcPkg && gateBuilders[file]) {
						v = append(v, fmt.Sprintf("%s: %s writes %s.%s outside the gate's sender", fset.Position(n.Pos()), caller, name, sel.Sel.Name))
					}
				}
			case *ast.CompositeLit:
				tv, ok := info.Types[n]
				if !ok {
					return true
				}
				name := tv.Type.String()
				if (name == gcPkg+".ProvenBatch" || name == gcPkg+".Proof") && !(pkg == gcPkg && gateBuilders[file]) {
					v = append(v, fmt.Sprintf("%s: %s builds a %s outside the gate's sender", fset.Position(n.Pos()), caller, name))
				}
			}
			return true
		})
	}
	return v
}

// scanCall checks one selected callee: a delete callee is allowed only
// from its listed callers; a call of a known prover is recorded.
func scanCall(fset *token.FileSet, caller string, sel *ast.Ident, info *types.Info, seen map[string]bool) []string {
	fn, ok := info.Uses[sel].(*types.Func)
	if !ok || !slices.Contains(deleteCalls, fn.FullName()) && !takesS3DeleteInput(fn) {
		return nil
	}
	if slices.Contains(allowedDeleteCalls[caller], fn.FullName()) {
		seen[caller+" -> "+fn.FullName()] = true
		return nil
	}
	return []string{fmt.Sprintf("%s: %s calls %s outside the delete gate", fset.Position(sel.Pos()), caller, fn.FullName())}
}

// isProver reports whether t is the signature of gc's prover.
func isProver(t types.Type, info *types.Info, pkg string) bool {
	if t == nil {
		return false
	}
	sig, ok := t.Underlying().(*types.Signature)
	if !ok {
		return false
	}
	// func(context.Context, []string) ([]string, *Proof, error)
	return types.TypeString(types.NewSignatureType(nil, nil, nil, sig.Params(), sig.Results(), sig.Variadic()), nil) ==
		"func(context.Context, []string) ([]string, *"+gcPkg+".Proof, error)"
}

// callsKnownProver reports whether a function literal calls one of the
// provers that ask the gate.
func callsKnownProver(fl *ast.FuncLit, info *types.Info) bool {
	found := false
	ast.Inspect(fl.Body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if fn, ok := info.Uses[sel.Sel].(*types.Func); ok && slices.Contains(knownProvers, fn.FullName()) {
				found = true
			}
		}
		return !found
	})
	return found
}

// derefName is the name of t, or of what it points to.
func derefName(t types.Type) string {
	if t == nil {
		return ""
	}
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	return t.String()
}

// s3DeleteInputs are the SDK's request types of S3's object deletes: any
// function or method that takes one (a client, an interface or a wrapper
// of someone's own, whatever its name) sends a delete.
var s3DeleteInputs = []string{"*" + s3Pkg + ".DeleteObjectsInput", "*" + s3Pkg + ".DeleteObjectInput"}

// takesS3DeleteInput reports whether fn takes an S3 delete request: a
// call of it is a delete even when its receiver is a new interface the
// list of known delete callees does not name.
func takesS3DeleteInput(fn *types.Func) bool {
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return false
	}
	for i := range sig.Params().Len() {
		if slices.Contains(s3DeleteInputs, sig.Params().At(i).Type().String()) {
			return true
		}
	}
	return false
}

// No shipped code deletes from S3 but through the gate, and every allowed
// path is really there (an allow-list of dead entries proves nothing).
func TestEveryDeleteGoesThroughTheGate(t *testing.T) {
	pkgs, exports := shipped(t)
	v, seen := deleteViolations(t, pkgs, exports, nil)
	if len(v) > 0 {
		t.Fatalf("%d delete paths outside the gate (see the inventory in the safety documentation):\n  %s", len(v), strings.Join(v, "\n  "))
	}
	for caller, callees := range allowedDeleteCalls {
		for _, callee := range callees {
			if !seen[caller+" -> "+callee] {
				t.Errorf("allowed delete path %s -> %s is not in the code any more: update allowedDeleteCalls and the inventory", caller, callee)
			}
		}
	}
}

// The checker catches a new delete path: a shipped package that calls the
// adapter's delete, the SDK's, or the delete port, or builds a proof of
// its own, is each reported.
func TestDeletePathCheckCatchesANewCaller(t *testing.T) {
	pkgs, exports := shipped(t)
	cases := map[string]struct{ pkg, src, want string }{
		"adapter one-key delete": {appPkg, `package app
import ("context"; "github.com/searchfabric/bcc/shared/adapters/awsio")
func sweepQuickly(ctx context.Context, b *awsio.Bucket) error { return b.Delete(ctx, "collections/c1/data/x.seg") }`, "sweepQuickly calls (*" + awsioPkg + ".Bucket).Delete"},
		"SDK DeleteObjects": {appPkg, `package app
import ("context"; "github.com/aws/aws-sdk-go-v2/service/s3")
func purge(ctx context.Context, cl Clients) { _, _ = cl.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{}) }`, "purge calls (*" + s3Pkg + ".Client).DeleteObjects"},
		"delete port outside the sender": {gcPkg, `package gc
import "context"
func (e *Executor) shortcut(ctx context.Context, b ProvenBatch) { _, _ = e.ports.Deleter.DeleteProven(ctx, b) }`, "shortcut calls (" + gcPkg + ".Deleter).DeleteProven"},
		"a shipped reclaimer": {appPkg, `package app
import "context"
type quickReclaim struct{}
func (quickReclaim) DeleteKeys(context.Context, []string) error { return nil }`, "shipped type quickReclaim implements"},
		"an S3 interface of its own": {appPkg, `package app
import ("context"; "github.com/aws/aws-sdk-go-v2/service/s3")
type remover interface{ DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) }
func tidy(ctx context.Context, cl Clients) { var r remover = cl.S3; _, _ = r.DeleteObject(ctx, &s3.DeleteObjectInput{}) }`, "tidy calls (" + appPkg + ".remover).DeleteObject"},
		"a proof of its own": {gcPkg, `package gc
func forged(keys []string) ProvenBatch { return ProvenBatch{keys: keys, proof: &Proof{}} }`, "builds a " + gcPkg + ".ProvenBatch"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, _ := deleteViolations(t, pkgs, exports, map[string]string{tc.pkg: tc.src})
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Fatalf("injected %s; violations %v, want one containing %q", name, v, tc.want)
			}
		})
	}
}
