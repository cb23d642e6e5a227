package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// the sim's own reading of where rewrite tasks write
// (writtenByRewrite, the oracle for "a never-committed output the parser
// disowns leaks forever") must cover every form an executor writes: a
// later lifetime's (i<N>) and the short form past MaxTaskIDLength.
// Otherwise a regression of contract.OwnedOutputTask for those forms is
// counted as "end-foreign-uploads-left" and never reported.
func TestWrittenByRewriteCoversEveryForm(t *testing.T) {
	sum := "sha256:" + strings.Repeat("ab", 32)
	long := strings.Repeat("c", 63)
	for _, tc := range []struct {
		c    string
		task contract.Task
	}{
		{"orders", contract.NewTask(contract.KindCompaction, "orders", 8, sum, 3, 1)},
		{"orders", contract.NewTask(contract.KindCompaction, "orders", 8, sum, 3, 1).In(2)},
		{"orders", contract.NewSweepTask(contract.KindLifecycleTransition, "orders", 8, sum, 3, 60000).In(3)},
		{long, contract.NewTask(contract.KindCompaction, long, math.MaxUint64, sum, 3, 1).In(math.MaxUint64)},
	} {
		key := contract.RewriteOutputKey(tc.c, 1, tc.task.TaskID, 0)
		if !writtenByRewrite(tc.c, key) {
			t.Errorf("writtenByRewrite(%q, %q) = false: the oracle does not see this rewrite output", tc.c, key)
		}
	}
}
