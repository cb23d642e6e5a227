package contract_test

import (
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// A lineage confirmation names its lifetime: absent is the first, and every
// abandoned root must be a root of that lifetime (a confirmation can never
// abandon another lifetime's roots).
func TestLineageConfirmationNamesItsIncarnation(t *testing.T) {
	sum := contract.Checksum([]byte("v8"))
	conf := func(inc uint64, rootInc uint64) contract.LineageConfirmation {
		return contract.LineageConfirmation{SchemaVersion: 1, Collection: "orders", Incarnation: inc, HeadVersion: 8, HeadChecksum: sum,
			AbandonedRoots: []string{contract.ManifestKey("orders", rootInc, 9, contract.Checksum([]byte("v9")))}, ConfirmedBy: "ops", ConfirmedAtUnixMs: 1}
	}
	for _, tc := range []struct {
		inc, rootInc uint64
		wantInc      uint64
		err          string
	}{
		{0, 1, 1, ""},
		{2, 2, 2, ""},
		{0, 2, 0, "incarnation 2, the confirmation is for incarnation 1"},
		{3, 2, 0, "incarnation 2, the confirmation is for incarnation 3"},
		{2, 1, 0, "incarnation 1, the confirmation is for incarnation 2"},
	} {
		b, err := contract.Encode(conf(tc.inc, tc.rootInc))
		if err == nil {
			var got contract.LineageConfirmation
			got, err = contract.DecodeLineageConfirmation("test", b)
			if err == nil && got.Inc() != tc.wantInc {
				t.Errorf("incarnation %d: decoded as %d", tc.inc, got.Inc())
			}
		}
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("incarnation %d, root of %d: %v", tc.inc, tc.rootInc, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("incarnation %d, root of %d: got %v, want %q", tc.inc, tc.rootInc, err, tc.err)
		}
	}
}
