package app_test

import (
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

func env(pol string) func(string) string {
	m := map[string]string{resources.EnvBucket: "b", resources.EnvTable: "t", resources.EnvPolicy: pol}
	return func(k string) string { return m[k] }
}

// A function refuses to boot with a policy it does not understand or that
// does not validate, and says which field is wrong.
func TestFromEnvRejectsABadPolicyNamingTheField(t *testing.T) {
	for pol, field := range map[string]string{
		`{"gc": {"batch_size": 2000}}`:                         "gc.batch_size",
		`{"gc_batch_size": 10}`:                                "gc_batch_size",
		`{"observe": {"TokenLifetime": 900000000000}}`:         "observe",
		`{"Lease_Duration_Ms": 60000}`:                         "Lease_Duration_Ms",
		`{"lease_duration_ms": "20m"}`:                         "lease_duration_ms",
		`{"functions": {"compaction_timeout_ms": "15m"}}`:      "functions.compaction_timeout_ms",
		`{"compaction": {"merge_factor": 1}}`:                  "compaction.merge_factor",
		`{"gc": {"deletes_per_sec": 5000}}`:                    "gc.deletes_per_sec",
		`{"owner_timeout_ms": 30000}`:                          "owner_timeout_ms",
		`{"gc": {"token_lifetime_ms": 0}, "clock_skew_ms": 1}`: "gc.token_lifetime_ms",
	} {
		_, err := app.FromEnv(env(pol))
		if err == nil || !strings.Contains(err.Error(), resources.EnvPolicy) || !strings.Contains(err.Error(), field) {
			t.Errorf("BCC_POLICY=%s: err %v, want one naming %s and %s", pol, err, resources.EnvPolicy, field)
		}
	}
}

// The embedded stack renders a function's configuration to its environment
// and the function parses it back: the policy survives exactly.
func TestEnvRoundTripsThePolicy(t *testing.T) {
	c, err := app.FromEnv(env(`{"gc": {"sweep_interval_ms": "30m"}, "compaction": {"merge_factor": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	rendered := c.Env()
	back, err := app.FromEnv(func(k string) string { return rendered[k] })
	if err != nil {
		t.Fatal(err)
	}
	if back.Policy != c.Policy || c.Policy.Compaction.MergeFactor != 3 || c.Policy == policy.Default() {
		t.Fatalf("policy %+v rendered and parsed back as %+v", c.Policy, back.Policy)
	}
	if d, err := app.FromEnv(env("")); err != nil || d.Policy != policy.Default() {
		t.Fatalf("no BCC_POLICY: %+v %v", d.Policy, err)
	}
}

// Issue 25 item 2: a function refuses to boot with an owner endpoint it
// could be answered over in plain text by anyone on the path: https, or
// plain http to a loopback stand-in (the local stack) only.
func TestFromEnvRefusesPlainHTTPOwners(t *testing.T) {
	for url, ok := range map[string]bool{
		"https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod": true,
		"http://127.0.0.1:4566/_bcc/ccs":                              true,
		"http://ccs.example.com/prod":                                 false,
		"http://192.168.1.5:4566/_bcc/ccs":                            false,
		"ccs.example.com":                                             false,
	} {
		for _, key := range []string{resources.EnvCCSEndpoint, resources.EnvPublisherEndpoint} {
			m := map[string]string{resources.EnvBucket: "b", resources.EnvTable: "t", key: url}
			_, err := app.FromEnv(func(k string) string { return m[k] })
			if (err == nil) != ok || err != nil && !strings.Contains(err.Error(), key) {
				t.Errorf("%s=%s: err %v, want accepted %v (naming %s)", key, url, err, ok, key)
			}
		}
	}
}
