package contract_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// Four parts of 2^62 objects each sum to 2^64, which wrapped to 0 and
// matched a summary of 0 objects. The sum is checked now.
func TestPartObjectCountsDoNotOverflow(t *testing.T) {
	root := examples()["manifest-root.json"].(contract.Manifest)
	ref := root.Parts[0]
	root.Parts = nil
	for i := range 4 {
		p := ref
		p.ObjectCount = 1 << 62
		p.FirstKey = fmt.Sprintf("collections/orders/data/l%d/a.seg", i)
		p.LastKey = fmt.Sprintf("collections/orders/data/l%d/z.seg", i)
		root.Parts = append(root.Parts, p)
	}
	root.Summary.Objects = 0
	b, _ := contract.Encode(root)
	_, err := contract.DecodeManifest("root", b)
	// (A part's count is also capped at contract.MaxPartObjects, which
	// refuses these first.)
	if !errors.Is(err, contract.ErrInvalid) || !strings.Contains(err.Error(), "overflow") && !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v, want the object count overflow refused", err)
	}
}
