package compact

import (
	"math"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// Sizes come from a manifest: a job's byte bound must hold even when they
// are near math.MaxInt64 (a wrapped sum let every later input in).
func TestJobByteBoundDoesNotOverflow(t *testing.T) {
	p := DefaultPolicy()
	objs := []contract.ObjectEntry{{Key: "a", Size: math.MaxInt64 - 10}, {Key: "b", Size: 100}, {Key: "c", Size: 100}}
	if got := bounded(objs, p, 1); len(got) != 1 {
		t.Fatalf("bounded took %d inputs, want 1", len(got))
	}
	if got := (Job{Inputs: objs}).Bytes(); got != math.MaxInt64 {
		t.Fatalf("Bytes = %d, want saturated", got)
	}
}
