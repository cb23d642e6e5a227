package policy_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/policy"
)

func TestDefaultValidates(t *testing.T) {
	if err := policy.Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

// Each bad relation is rejected, and the error names the field to fix.
func TestValidateRejectsEachBadRelation(t *testing.T) {
	ms := func(d time.Duration) policy.Duration { return policy.Duration(d) }
	cases := []struct {
		name  string
		edit  func(*policy.Policy)
		field string
	}{
		{"grace below two heartbeats", func(p *policy.Policy) { p.LeaseDuration = 2*p.LeaseHeartbeat - 1 }, "lease_duration_ms"},
		{"lease not shorter than task lifetime", func(p *policy.Policy) { p.LeaseDuration = p.MaxTaskLifetime }, "lease_duration_ms"},
		{"cutover deadline shorter than the task lifetime", func(p *policy.Policy) { p.CutoverDeadline = p.MaxTaskLifetime - 1 }, "cutover_deadline_ms"},
		{"skew longer than the lease", func(p *policy.Policy) { p.ClockSkew = p.LeaseDuration + 1 }, "clock_skew_ms"},
		{"compaction timeout not shorter than task lifetime", func(p *policy.Policy) {
			p.Functions.CompactionTimeout = ms(15 * time.Minute)
		}, "functions.compaction_timeout_ms"},
		{"lease longer than the compaction queue's visibility", func(p *policy.Policy) {
			p.Functions.CompactionTimeout = ms(10 * time.Second) // visibility 60s
			p.LeaseDuration = ms(90 * time.Second)
			p.ClockSkew = ms(30 * time.Second)
		}, "lease_duration_ms"},
		{"owner timeout not shorter than the observer's timeout", func(p *policy.Policy) {
			p.OwnerTimeout = p.Functions.ObserverTimeout
		}, "owner_timeout_ms"},
		{"owner timeout not shorter than the handoff's timeout", func(p *policy.Policy) {
			p.Functions.ObserverTimeout = ms(5 * time.Minute)
			p.OwnerTimeout = ms(2 * time.Minute)
		}, "owner_timeout_ms"},
		{"no time for a consumer's first record", func(p *policy.Policy) {
			p.BatchStopMargin = p.Functions.ObserverTimeout - p.OwnerTimeout
		}, "batch_stop_margin_ms"},
		{"per-collection delete rate above the global one", func(p *policy.Policy) { p.GC.DeletesPerSec = p.GC.GlobalDeletesPerSec + 1 }, "gc.deletes_per_sec"},
		{"proof max age above half the token lifetime", func(p *policy.Policy) {
			p.GC.TokenLifetime, p.GC.ProofMaxAge = ms(time.Minute), ms(30*time.Second+time.Millisecond)
		}, "gc.proof_max_age_ms"},
		{"retry backoffs longer than the gc timeout", func(p *policy.Policy) { p.GC.RetryBackoff = ms(time.Minute) }, "gc.retry_backoff_ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			tc.edit(&p)
			expectFields(t, p.Validate(), tc.field)
		})
	}
}

func TestValidateRejectsEachBadRange(t *testing.T) {
	cases := []struct {
		edit  func(*policy.Policy)
		field string
	}{
		{func(p *policy.Policy) { p.LeaseDuration = 0 }, "lease_duration_ms"},
		{func(p *policy.Policy) { p.LeaseHeartbeat = 0 }, "lease_heartbeat_ms"},
		{func(p *policy.Policy) { p.MaxTaskLifetime = -1 }, "max_task_lifetime_ms"},
		{func(p *policy.Policy) { p.ClockSkew = -1 }, "clock_skew_ms"},
		{func(p *policy.Policy) { p.OwnerTimeout = 0 }, "owner_timeout_ms"},
		{func(p *policy.Policy) { p.GC.TokenLifetime = 0 }, "gc.token_lifetime_ms"},
		{func(p *policy.Policy) { p.GC.RetentionWindow = -1 }, "gc.retention_window_ms"},
		{func(p *policy.Policy) { p.GC.SweepInterval = 0 }, "gc.sweep_interval_ms"},
		{func(p *policy.Policy) { p.GC.RetryBackoff = 0 }, "gc.retry_backoff_ms"},
		{func(p *policy.Policy) { p.GC.RetryAfter = 0 }, "gc.retry_after_ms"},
		{func(p *policy.Policy) { p.Compaction.RebuildAfter = -1 }, "compaction.rebuild_after_ms"},
		{func(p *policy.Policy) { p.GC.BatchSize = 1001 }, "gc.batch_size"},
		{func(p *policy.Policy) { p.GC.BatchSize = 0 }, "gc.batch_size"},
		{func(p *policy.Policy) { p.GC.DeletesPerSec = 0 }, "gc.deletes_per_sec"},
		{func(p *policy.Policy) { p.GC.GlobalDeletesPerSec = -5 }, "gc.global_deletes_per_sec"},
		{func(p *policy.Policy) { p.GC.MaxAttempts = 0 }, "gc.max_attempts"},
		{func(p *policy.Policy) { p.GC.PartCache = 0 }, "gc.part_cache"},
		{func(p *policy.Policy) { p.CutoverDeadline = 0 }, "cutover_deadline_ms"},
		{func(p *policy.Policy) { p.GC.ProofMaxAge = 0 }, "gc.proof_max_age_ms"},
		{func(p *policy.Policy) { p.GC.ProofMaxAge = policy.Duration(policy.MaxProofMaxAge + time.Millisecond) }, "gc.proof_max_age_ms"},
		{func(p *policy.Policy) { p.GC.MaxSweepCandidates = 0 }, "gc.max_sweep_candidates"},
		{func(p *policy.Policy) { p.Compaction.MergeFactor = 1 }, "compaction.merge_factor"},
		{func(p *policy.Policy) { p.Compaction.TargetObjectBytes = 0 }, "compaction.target_object_bytes"},
		{func(p *policy.Policy) { p.Compaction.MaxJobInputs = 1 }, "compaction.max_job_inputs"},
		{func(p *policy.Policy) { p.Compaction.MaxJobBytes = 0 }, "compaction.max_job_bytes"},
		{func(p *policy.Policy) { p.Compaction.MaxLevel = 0 }, "compaction.max_level"},
		{func(p *policy.Policy) { p.Compaction.ReadRangeBytes = 512 << 10 }, "compaction.read_range_bytes"},
		{func(p *policy.Policy) { p.Compaction.ReadRangeBytes = 16 << 20 }, "compaction.read_range_bytes"},
		{func(p *policy.Policy) { p.Compaction.MaxJobInputs = 64; p.Compaction.ReadRangeBytes = 8 << 20 }, "compaction.read_range_bytes"},
		{func(p *policy.Policy) { p.Compaction.DeleteDensityThreshold = 1.5 }, "compaction.delete_density_threshold"},
		{func(p *policy.Policy) { p.Compaction.FragmentationThreshold = 0.6 }, "compaction.fragmentation_threshold"},
		{func(p *policy.Policy) { p.Handoff.MaxLineageWalk = 0 }, "handoff.max_lineage_walk"},
		{func(p *policy.Policy) { p.Handoff.MaxResubmits = 0 }, "handoff.max_resubmits"},
		{func(p *policy.Policy) { p.Functions.GCTimeout = policy.Duration(16 * time.Minute) }, "functions.gc_timeout_ms"},
		{func(p *policy.Policy) { p.Functions.HandoffTimeout = policy.Duration(time.Millisecond) }, "functions.handoff_timeout_ms"},
		{func(p *policy.Policy) { p.Budgets.ClassConcurrency.Compaction = -1 }, "budgets.class_concurrency.compaction"},
		{func(p *policy.Policy) { p.Budgets.ClassConcurrency.TombstoneCleanup = 1001 }, "budgets.class_concurrency.tombstone_cleanup"},
		{func(p *policy.Policy) { p.Budgets.DeferDelay = policy.Duration(500 * time.Millisecond) }, "budgets.defer_delay_ms"},
		{func(p *policy.Policy) { p.Budgets.DeferDelay = policy.Duration(13 * time.Hour) }, "budgets.defer_delay_ms"},
		{func(p *policy.Policy) { p.Budgets.S3WritesPerSecPerPrefix = 3501 }, "budgets.s3_writes_per_sec_per_prefix"},
		{func(p *policy.Policy) { p.Budgets.S3ReadsPerSecPerPrefix = -1 }, "budgets.s3_reads_per_sec_per_prefix"},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			p := policy.Default()
			tc.edit(&p)
			expectFields(t, p.Validate(), tc.field)
		})
	}
}

func expectFields(t *testing.T, err error, field string) {
	t.Helper()
	var bad policy.Invalid
	if !errors.As(err, &bad) {
		t.Fatalf("want an invalid policy naming %s, got %v", field, err)
	}
	if !slices.Contains(bad.Fields(), field) {
		t.Fatalf("error names %v, want %s: %v", bad.Fields(), field, err)
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("message %q does not name %s", err, field)
	}
}

func TestParseOverridesDefaultsAndAcceptsBothDurationForms(t *testing.T) {
	p, err := policy.Parse([]byte(`{"lease_duration_ms": 150000, "gc": {"token_lifetime_ms": "20m", "batch_size": 500}, "compaction": {"merge_factor": 6}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Default()
	want.LeaseDuration = policy.Duration(150 * time.Second)
	want.GC.TokenLifetime = policy.Duration(20 * time.Minute)
	want.GC.BatchSize = 500
	want.Compaction.MergeFactor = 6
	if p != want {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
	for _, blank := range []string{"", "  \n"} {
		if p, err := policy.Parse([]byte(blank)); err != nil || p != policy.Default() {
			t.Fatalf("blank policy: %+v %v", p, err)
		}
	}
}

func TestParseRejectsWhatItDoesNotUnderstand(t *testing.T) {
	cases := map[string]struct{ json, field string }{
		"unknown key":                {`{"lease_duration": 1000}`, "lease_duration"},
		"unknown nested key":         {`{"gc": {"tokenLifetime_ms": 1000}}`, "gc.tokenLifetime_ms"},
		"case variant":               {`{"Lease_Duration_Ms": 90000}`, "Lease_Duration_Ms"},
		"nested case variant":        {`{"gc": {"Batch_Size": 10}}`, "gc.Batch_Size"},
		"duplicate key":              {`{"gc": {"batch_size": 10, "batch_size": 20}}`, "gc.batch_size"},
		"section not an object":      {`{"gc": 5}`, "gc"},
		"old nanosecond integers":    {`{"observe": {"TokenLifetime": 900000000000}}`, "observe"},
		"wrong type":                 {`{"gc": {"batch_size": "ten"}}`, "gc.batch_size"},
		"fractional milliseconds":    {`{"lease_duration_ms": 1.5}`, "lease_duration_ms"},
		"bad duration string":        {`{"lease_duration_ms": "two minutes"}`, "lease_duration_ms"},
		"sub-millisecond duration":   {`{"lease_duration_ms": "1.5ms"}`, "lease_duration_ms"},
		"valid JSON, invalid policy": {`{"gc": {"batch_size": 5000}}`, "gc.batch_size"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := policy.Parse([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Parse(%s) = %v, want an error naming %s", tc.json, err, tc.field)
			}
		})
	}
	for _, bad := range []string{`{"gc": {}} {}`, `[1]`, `{"gc":`} {
		if _, err := policy.Parse([]byte(bad)); err == nil {
			t.Fatalf("Parse(%s) accepted", bad)
		}
	}
}

// What a policy renders is what it parses back (the embedded stack renders
// a function's configuration to its environment and parses it back).
func TestMarshalRoundTrips(t *testing.T) {
	p := policy.Default()
	p.GC.RetryBackoff = policy.Duration(250 * time.Millisecond)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"lease_duration_ms":120000`) || !strings.Contains(string(b), `"gc":{"token_lifetime_ms":900000`) {
		t.Fatalf("rendered %s", b)
	}
	got, err := policy.Parse(b)
	if err != nil || got != p {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}

func TestPausedCollections(t *testing.T) {
	p, err := policy.Parse([]byte(`{"paused_collections": ["b", "a"]}`))
	if err != nil || !p.PausedCollections.Contains("a") || !p.PausedCollections.Contains("b") || p.PausedCollections.Contains("c") {
		t.Fatalf("%+v %v", p.PausedCollections, err)
	}
	expectFields(t, func() error { _, err := policy.Parse([]byte(`{"paused_collections": ["Bad Name"]}`)); return err }(), "paused_collections[0]")
}

// The compaction fingerprint changes with every planning parameter and
// not with the start or aging timing.
func TestCompactionFingerprint(t *testing.T) {
	base := policy.Default().Compaction
	for name, f := range map[string]func(*policy.Compaction){
		"merge_factor":             func(c *policy.Compaction) { c.MergeFactor++ },
		"target_object_bytes":      func(c *policy.Compaction) { c.TargetObjectBytes++ },
		"max_job_inputs":           func(c *policy.Compaction) { c.MaxJobInputs++ },
		"max_job_bytes":            func(c *policy.Compaction) { c.MaxJobBytes++ },
		"max_level":                func(c *policy.Compaction) { c.MaxLevel++ },
		"delete_density_threshold": func(c *policy.Compaction) { c.DeleteDensityThreshold += 0.01 },
		"fragmentation_threshold":  func(c *policy.Compaction) { c.FragmentationThreshold += 0.01 },
	} {
		c := base
		f(&c)
		if c.Fingerprint() == base.Fingerprint() {
			t.Errorf("%s changed, fingerprint did not", name)
		}
	}
	c := base
	c.StartQuiet += 1
	if c.Fingerprint() != base.Fingerprint() {
		t.Error("start_quiet_ms changed the planning fingerprint")
	}
}
