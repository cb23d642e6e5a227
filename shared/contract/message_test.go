package contract_test

import (
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract"
)

// A message's group and deduplication id are valid SQS FIFO ids, and the
// identity of a completion tells results apart exactly as the handoff needs.
func TestMessageIdentity(t *testing.T) {
	task := contract.NewTask(contract.KindCompaction, "c-with-a-rather-long-collection-name-of-sixty-three-characters-x", 12345678901, "sha256:"+strings.Repeat("ab", 32), 99, 1)
	m, err := contract.TaskMessage(task)
	if err != nil {
		t.Fatal(err)
	}
	if m.Group != task.Collection || m.DedupID != task.TaskID {
		t.Fatalf("task message %q/%q, want group = collection, dedup = task id", m.Group, m.DedupID)
	}
	cov := contract.Coverage{Removed: []contract.ObjectEntry{{Key: "a", Checksum: "x"}}}
	rewrite := contract.Completion{TaskID: task.TaskID, Collection: task.Collection, Coverage: &cov}
	partial := contract.Completion{TaskID: task.TaskID, Collection: task.Collection, Cleanup: &contract.Cleanup{}}
	done := contract.Completion{TaskID: task.TaskID, Collection: task.Collection, Cleanup: &contract.Cleanup{Complete: true}}
	ids := map[string]bool{}
	for _, c := range []contract.Completion{rewrite, partial, done} {
		cm, err := contract.CompletionMessage(c)
		if err != nil {
			t.Fatal(err)
		}
		if cm.Group != c.Collection || cm.DedupID != contract.CompletionID(c) {
			t.Fatalf("completion message %q/%q", cm.Group, cm.DedupID)
		}
		ids[cm.DedupID] = true
	}
	if len(ids) != 3 || contract.CompletionID(rewrite) != contract.CutoverRequestID(task.TaskID, cov) {
		t.Fatalf("completion identities %v", ids)
	}
	for id := range ids {
		if len(id) > awslimit.SQSMaxIDLength || len(m.DedupID) > awslimit.SQSMaxIDLength || len(m.Group) > awslimit.SQSMaxIDLength {
			t.Fatalf("id %q longer than SQS's %d", id, awslimit.SQSMaxIDLength)
		}
	}
}
