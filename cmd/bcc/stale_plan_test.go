package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// The values the session of docs/operations.md shows in its stale-plan
// error; the golden file carries them in place of this run's, so that the
// block the session shows is the golden file byte for byte.
const (
	docPlanFingerprint   = "sha256:35c7ff072cc7a5c72936373e"
	docPlanAsOf          = "2026-12-01T16:25:12Z"
	docRereadFingerprint = "sha256:8a6ebe4d7eb5611681bca1b9"
)

var fingerprintToken = regexp.MustCompile(`sha256:[0-9a-f]{24}\b`)

// The error bcc apply prints for a stale plan, from the real path: a plan
// saved, the collection appended to, the plan applied with --confirm. It
// is refused, exit 1, nothing enqueued; its transcript (this run's
// fingerprints and plan time replaced by the session's) is the golden file
// stale-plan, which docs/operations.md shows (TestDocsShowTheGoldenTranscripts).
func TestStalePlanErrorIsGolden(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	ctx := e.ctx
	if err := e.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	out, code, err := e.bcc("plan", "-o", "json")
	if err != nil || code != exitAction {
		t.Fatalf("plan: exit %d %v\n%s", code, err, out)
	}
	var p planDoc
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Intents) == 0 || !fingerprintToken.MatchString(p.Fingerprint) {
		t.Fatalf("plan: %v %+v", err, p)
	}
	file := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	// The workload commits since: the snapshot moved.
	if _, err := e.Workload.Append(ctx, "c1", e.Workload.Random()); err != nil {
		t.Fatal(err)
	}
	depth := func() int64 {
		t.Helper()
		var n int64
		for _, q := range e.Prov.Def.Queues {
			d, err := awsio.QueueDepth(ctx, e.Clients.SQS, q.Name)
			if err != nil {
				t.Fatal(err)
			}
			n += d.Visible
		}
		return n
	}
	before := depth()
	// The deployment from the environment, so that the command line reads
	// as the session's.
	r := execBCC(t, []string{"BCC_STACK=" + e.StackName(), "AWS_ENDPOINT_URL=" + e.Stack.URL()}, "apply", "--plan", file, "--confirm")
	if r.code != exitError || r.stdout != "" || !strings.Contains(r.stderr, "stale plan") {
		t.Fatalf("a stale plan: exit %d, want 1 and a stale plan\n%s%s", r.code, r.stdout, r.stderr)
	}
	if d := depth(); d != before {
		t.Fatalf("a stale plan enqueued %d messages", d-before)
	}
	// This run's values, each where the error names it, become the
	// session's: the plan's fingerprint and time, then the fingerprint of
	// the sources re-read (a different one).
	tr := transcript(r)
	tr = strings.Replace(tr, file, "plan.json", 1)
	asOf := p.AsOf.Format(time.RFC3339)
	if strings.Count(tr, p.Fingerprint) != 1 || strings.Count(tr, asOf) != 1 {
		t.Fatalf("the error names the plan's fingerprint %s and time %s once each:\n%s", p.Fingerprint, asOf, tr)
	}
	tr = strings.Replace(tr, p.Fingerprint, docPlanFingerprint, 1)
	tr = strings.Replace(tr, asOf, docPlanAsOf, 1)
	others := 0
	tr = fingerprintToken.ReplaceAllStringFunc(tr, func(fp string) string {
		if fp == docPlanFingerprint {
			return fp
		}
		others++
		return docRereadFingerprint
	})
	if others != 1 {
		t.Fatalf("the error names %d re-read fingerprints, want 1:\n%s", others, tr)
	}
	golden(t, "stale-plan", tr)
}
