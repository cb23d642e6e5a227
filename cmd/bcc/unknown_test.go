package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// Unknown, not guessed: when the query plane's watermark cannot be read
// (deleted here; S3 denied or down likewise) GC deletes nothing, so
// status (of the collection and of the fleet) and gc-plan say Unknown,
// list the watermark under unknown_sources and exit 2.
func TestUnreadableWatermarkIsUnknown(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	if err := e.Workload.Create(e.ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	observeHead(t, e, "c1")
	if r := e.cli("status", "--collection", "c1"); r.code != exitOK {
		t.Fatalf("fixture: c1 is not Running before: %+v", r)
	}
	if _, err := e.Clients.S3.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Config.WatermarkBucket), Key: aws.String(e.Config.WatermarkKey)}); err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]string{{"status", "--collection", "c1"}, {"status"}, {"gc-plan", "--collection", "c1"}} {
		r := e.cli(v[0], append(v[1:], "-o", "json")...)
		var h header
		_ = json.Unmarshal([]byte(r.stdout), &h)
		if r.code != exitAction || h.State != status.Unknown || len(h.Unknown) == 0 {
			t.Errorf("bcc %s with the watermark unreadable: exit %d, state %s, unknown_sources %v; want exit 2, Unknown, the watermark listed\n%s",
				strings.Join(v, " "), r.code, h.State, h.Unknown, r.stdout)
		}
	}
}

// One answer, not guessed: a collection CCS knows that has no head yet
// (NotConfigured in status; likewise a dropped collection whose cleanup
// deleted its head) has nothing to compact: a definite answer, exit 0,
// not a blind read (Unknown "head and manifest unreadable", exit 2, on
// every run).
func TestCompactionPlanOfACollectionWithoutAHead(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	if _, err := e.CCS.Create(e.ctx, "fresh", "", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	st := e.cli("status", "--collection", "fresh")
	if !strings.Contains(st.stdout, "NotConfigured") {
		t.Fatalf("fixture: %+v", st)
	}
	for _, args := range [][]string{{"compaction-plan"}, {"compaction-plan", "--collection", "fresh"}} {
		r := e.cli(args[0], args[1:]...)
		if r.code != exitOK || strings.Contains(r.stdout, "Unknown") {
			t.Errorf("bcc %s: exit %d, want 0 (no head: nothing to compact, as status says NotConfigured)\n%s", strings.Join(args, " "), r.code, r.stdout)
		}
	}
}

// Unknown, not guessed: with no collection listed and the lease records
// unreadable (the table missing or its Scan denied), plan says Unknown
// and exits 2 as status does for the same snapshot, never "nothing to
// do".
func TestPlanWithUnreadableLeaseRecordsIsUnknown(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	args := []string{"--prefix", e.Prov.Def.Prefix, "--table", "no-such-table", "--ccs", e.Config.CCSEndpoint, "--endpoint-url", e.Stack.URL()}
	st := execBCC(t, nil, append([]string{"status"}, args...)...)
	if st.code != exitAction || !strings.Contains(st.stdout, "lease records unreadable") {
		t.Fatalf("fixture: status sees the unreadable lease records: %+v", st)
	}
	r := execBCC(t, nil, append([]string{"plan"}, args...)...)
	if r.code != exitAction || strings.Contains(r.stdout, "nothing to do") {
		t.Errorf("bcc plan with the lease records unreadable: exit %d, want 2 and Unknown\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Rule 17, one bad item fails only itself: a collection whose head cannot
// be read is skipped by plan (its intents for the others stand), and
// apply --confirm carries out the others' intents, saying the skipped one
// is left out (exit 2: it needs a person). While it stays Unknown it is
// part of the fingerprint; readable again, the plan is stale.
func TestApplyOfAFleetPlanWithOneBadCollection(t *testing.T) {
	e := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	for _, c := range []string{"c1", "c2"} {
		if err := e.Workload.Create(e.ctx, c, contract.Lifecycle{}); err != nil {
			t.Fatal(err)
		}
	}
	good, err := e.Bucket.Get(e.ctx, contract.HeadKey("c2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Bucket.Put(e.ctx, contract.HeadKey("c2"), []byte(`{"not": "a head"`)); err != nil {
		t.Fatal(err)
	}
	p := e.cli("plan", "-o", "json")
	var doc planDoc
	if err := json.Unmarshal([]byte(p.stdout), &doc); err != nil || len(doc.Skipped) != 1 || len(doc.Intents) == 0 {
		t.Fatalf("fixture: want c1's intents and c2 skipped: %v %+v", err, p)
	}
	dir := t.TempDir()
	save := func(name string, b []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	pf := save("plan.json", []byte(p.stdout))
	// A dry run says the plan is current.
	if r := e.cli("apply", "--plan", pf); r.code != exitAction || !strings.Contains(r.stdout, "still current") {
		t.Errorf("apply (dry run) of a plan that skipped only c2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// An edited plan that says it skipped c1 too is refused.
	var edited map[string]any
	if err := json.Unmarshal([]byte(p.stdout), &edited); err != nil {
		t.Fatal(err)
	}
	edited["skipped"] = append(edited["skipped"].([]any), map[string]any{"collection": "c1", "reason": "edited"})
	b, _ := json.Marshal(edited)
	if r := e.cli("apply", "--plan", save("edited.json", b), "--confirm", "--by", "review"); r.code != exitError || !strings.Contains(r.stderr, "stale plan") {
		t.Errorf("an edited skip list was applied: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// c2 readable again: the plan that skipped it is stale.
	if _, err := e.Bucket.Put(e.ctx, contract.HeadKey("c2"), good); err != nil {
		t.Fatal(err)
	}
	if r := e.cli("apply", "--plan", pf, "--confirm", "--by", "review"); r.code != exitError || !strings.Contains(r.stderr, "stale plan") {
		t.Errorf("a plan that skipped c2, applied once c2 is readable: exit %d, want a stale plan\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := e.Bucket.Put(e.ctx, contract.HeadKey("c2"), []byte(`{"not": "a head"`)); err != nil {
		t.Fatal(err)
	}
	r := e.cli("apply", "--plan", pf, "--confirm", "--by", "review")
	if !strings.Contains(r.stdout, "enqueued") {
		t.Errorf("apply --confirm of a plan that skipped only c2 applied none of c1's %d intents: exit %d\n%s%s", len(doc.Intents), r.code, r.stdout, r.stderr)
	}
	if r.code != exitAction || !strings.Contains(r.stdout, "not planned   c2") {
		t.Errorf("apply --confirm does not say c2 was left out (exit %d, want 2):\n%s", r.code, r.stdout)
	}
}
