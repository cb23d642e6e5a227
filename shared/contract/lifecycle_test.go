package contract_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// The root's part references carry the lifecycle fields (minimum object
// max_ts, sorted distinct tiers) and the strict reader refuses a reference
// whose tiers are missing, unknown, unsorted or repeated.
func TestPartRefLifecycleFieldsValidated(t *testing.T) {
	root := examples()["manifest-root.json"].(contract.Manifest)
	b, _ := contract.Encode(root)
	if _, err := contract.DecodeManifest("root", b); err != nil {
		t.Fatalf("example root: %v", err)
	}
	for name, tiers := range map[string][]string{
		"missing":  nil,
		"empty":    {},
		"unknown":  {"tepid"},
		"unsorted": {contract.TierWarm, contract.TierCold},
		"repeated": {contract.TierHot, contract.TierHot},
	} {
		bad := root
		bad.Parts = []contract.PartRef{root.Parts[0]}
		bad.Parts[0].Tiers = tiers
		b, _ := contract.Encode(bad)
		_, err := contract.DecodeManifest("root", b)
		if !errors.Is(err, contract.ErrInvalid) || !strings.Contains(err.Error(), "tiers") {
			t.Errorf("%s tiers %q: err = %v, want invalid tiers", name, tiers, err)
		}
	}
}

// DecodePart checks the lifecycle fields the root pins against the part's
// objects: a root that understates a part's age or hides a tier would make
// the observer and the executor skip due objects.
func TestDecodePartRefusesLifecycleMismatch(t *testing.T) {
	ex := examples()
	part := ex["manifest-part.json"].(contract.Part)
	ref := ex["manifest-root.json"].(contract.Manifest).Parts[0]
	body, _ := contract.Encode(part)
	if _, err := contract.DecodePart(ref, body); err != nil {
		t.Fatalf("matching ref: %v", err)
	}
	older := ref
	older.MinObjectMaxTsUnixMs--
	cold := ref
	cold.Tiers = []string{contract.TierCold}
	more := ref
	more.Tiers = []string{contract.TierCold, contract.TierHot}
	for name, r := range map[string]contract.PartRef{"min max_ts": older, "other tier": cold, "extra tier": more} {
		if _, err := contract.DecodePart(r, body); !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	minTs, tiers, tierMin := contract.PartTierStats([]contract.ObjectEntry{
		{Tier: contract.TierWarm, MaxTsUnixMs: 30}, {Tier: contract.TierHot, MaxTsUnixMs: 10}, {Tier: contract.TierWarm, MaxTsUnixMs: 20}})
	if minTs != 10 || strings.Join(tiers, ",") != "hot,warm" || fmt.Sprint(tierMin) != "[10 20]" {
		t.Fatalf("PartTierStats = %d %q %v", minTs, tiers, tierMin)
	}
	// Per-tier minimums the root pins are checked too (absent: not checked).
	_, _, pinned := contract.PartTierStats(part.Objects)
	exact := ref
	exact.TierMinMaxTsUnixMs = pinned
	if _, err := contract.DecodePart(exact, body); err != nil {
		t.Fatalf("matching per-tier ref: %v", err)
	}
	wrong := ref
	wrong.TierMinMaxTsUnixMs = []int64{pinned[0] + 1}
	if _, err := contract.DecodePart(wrong, body); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("per-tier min max_ts: err = %v, want ErrInvalid", err)
	}
}

// Transition due: another tier and a maximum timestamp at or before the
// cutoff; facts with a transition must name a valid tier.
func TestTransitionDueRules(t *testing.T) {
	ref := contract.PartRef{MinObjectMaxTsUnixMs: 100, Tiers: []string{contract.TierCold, contract.TierHot}}
	cases := []struct {
		ref    contract.PartRef
		tier   string
		cutoff int64
		want   bool
	}{
		{ref, contract.TierCold, 100, true},
		{ref, contract.TierCold, 99, false}, // every object younger than the cutoff
		{contract.PartRef{MinObjectMaxTsUnixMs: 1, Tiers: []string{contract.TierCold}}, contract.TierCold, 100, false}, // all in the target tier
		// per tier: the old object is already cold, the hot ones are young
		{contract.PartRef{MinObjectMaxTsUnixMs: 100, Tiers: []string{contract.TierCold, contract.TierHot}, TierMinMaxTsUnixMs: []int64{100, 500}}, contract.TierCold, 100, false},
		{contract.PartRef{MinObjectMaxTsUnixMs: 100, Tiers: []string{contract.TierCold, contract.TierHot}, TierMinMaxTsUnixMs: []int64{100, 500}}, contract.TierCold, 500, true},
	}
	for i, c := range cases {
		if got := c.ref.TransitionDue(c.tier, c.cutoff); got != c.want {
			t.Errorf("case %d: TransitionDue = %v, want %v", i, got, c.want)
		}
	}
	o := contract.ObjectEntry{Tier: contract.TierHot, MaxTsUnixMs: 100}
	if !o.TransitionDue(contract.TierWarm, 100) || o.TransitionDue(contract.TierWarm, 99) || o.TransitionDue(contract.TierHot, 1000) {
		t.Fatal("object TransitionDue")
	}
	if _, ok := (contract.Lifecycle{TransitionAfterMs: 10}).TransitionCutoff(100); ok {
		t.Fatal("a transition without a tier is not a policy")
	}
	if c, ok := (contract.Lifecycle{TransitionAfterMs: 10, TransitionToTier: contract.TierCold}).TransitionCutoff(100); !ok || c != 90 {
		t.Fatalf("cutoff = %d %v", c, ok)
	}
	b := []byte(`{"schema_version":1,"collection":"orders","facts_version":1,"lifecycle":{"retention_ms":0,"transition_after_ms":5,"transition_to_tier":"tepid"},"tombstoned":false}`)
	if _, err := contract.DecodeCollectionFacts("facts", b); !errors.Is(err, contract.ErrInvalid) {
		t.Fatalf("facts with unknown transition tier: err = %v", err)
	}
}
