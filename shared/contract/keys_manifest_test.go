package contract

import (
	"strings"
	"testing"
)

// Every manifest key the publisher writes for a lifetime parses back to
// that lifetime; nothing else (another collection's, a head, data, a
// malformed name) parses.
func TestManifestKeyIncarnation(t *testing.T) {
	sum := "sha256:" + strings.Repeat("ab", 32)
	for _, inc := range []uint64{0, 1, 2, 12} {
		for _, k := range []string{ManifestKey("c1", inc, 9, sum), PartKey("c1", inc, 9, sum), ChangePartKey("c1", inc, 9, sum)} {
			got, ok := ManifestKeyIncarnation("c1", k)
			if !ok || got != Lifetime(inc) {
				t.Errorf("%s: got %d %v, want %d", k, got, ok, Lifetime(inc))
			}
			if _, ok := ManifestKeyIncarnation("c2", k); ok {
				t.Errorf("%s parsed as a key of c2", k)
			}
		}
	}
	for _, k := range []string{
		HeadKey("c1"), AppendSegmentKey("c1", 1, 9, 0), ControlPrefix("c1") + "schema.json",
		"collections/c1/manifests/full.json", "collections/c1/manifests/i1-00000000000000000009-ab.json",
		"collections/c1/manifests/i02-00000000000000000009-ab.json", "collections/c1/manifests/00000000000000000009-AB.json",
		"collections/c1/manifests/parts/00000000000000000009-abab.json", "collections/c1/manifests/00000000000000000009-" + strings.Repeat("a", 17) + ".json",
		"collections/c1/manifests/other/00000000000000000009-ab.json",
	} {
		if inc, ok := ManifestKeyIncarnation("c1", k); ok {
			t.Errorf("%s parsed as a manifest key of incarnation %d", k, inc)
		}
	}
}
