package status

import (
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/observe"
)

// A GC plan counted from a source it could not read is a blind read: an
// unreadable watermark (GC deletes nothing) or data listing (nothing is
// proposed as never-committed) makes the collection Unknown, naming the
// source, never Running.
func TestUnreadableWatermarkOrListingIsUnknown(t *testing.T) {
	running := func(g GCView) Collection {
		return Collection{Name: "c1", Desired: Desired{Facts: &contract.CollectionFacts{Collection: "c1"}, KnownToCCS: true},
			Current: Current{Head: &contract.Head{Version: 2}, Observed: &observe.Observed{Version: 2}, GC: &g}}
	}
	if st, why := judge(running(GCView{}), false); st != Running {
		t.Fatalf("fixture: %s %v", st, why)
	}
	for name, tc := range map[string]struct {
		g    GCView
		want string
	}{
		"watermark":    {GCView{Blocked: gc.BlockedWatermark + "GetObject: NoSuchKey"}, "watermark unreadable: GetObject: NoSuchKey"},
		"data listing": {GCView{ListingError: "ListObjectsV2: AccessDenied"}, "data listing unreadable: ListObjectsV2: AccessDenied"},
		"other block":  {GCView{Blocked: "something else"}, "gc plan (blocked) unreadable: something else"},
	} {
		st, why := judge(running(tc.g), false)
		if st != Unknown || !strings.Contains(strings.Join(why, "\n"), tc.want) {
			t.Errorf("%s: %s %v, want Unknown with %q", name, st, why, tc.want)
		}
	}
}
