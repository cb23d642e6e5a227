package handoff

import (
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
)

// Provenance: a rewrite completion arrives on a queue that executor roles
// write to, so before it is judged against the head it must be the work of
// a task the coordinator issued for its base, replacing its inputs by its
// own outputs without losing what they hold. Every check here reads the
// completion alone; the base manifest the identity names is then verified
// by judge (the head must be that base with that checksum, and every
// removed entry exactly the base's), so nothing a sender asserts stands
// unchecked: its inputs' counts and key ranges are the publisher's.
//
// What no check here can see: the bytes of the outputs. A holder of the
// compaction role can write plausible outputs with other contents; what
// bounds that is the data bucket's versioning (docs/safety.md, threat
// model).

// Provenance checks, the Check dimension of ForgedCompletions.
const (
	// CheckTaskIdentity: task_id is not the identity of the completion's
	// kind, collection, incarnation, base, facts version and sweep time.
	CheckTaskIdentity = "task_identity"
	// CheckEmptyRewrite: a rewrite of inputs holding records adds nothing.
	CheckEmptyRewrite = "empty_rewrite"
	// CheckForeignOutput: an added key is not one of this task's own
	// output keys (another task's, an append's, anyone else's).
	CheckForeignOutput = "foreign_output"
	// CheckConservation: the outputs cannot hold what the inputs held.
	CheckConservation = "coverage_not_conserved"
	// CheckSender: the queue's SenderId is not the role that sends this
	// kind of message (handler.Senders).
	CheckSender = "sender"
)

// provenance says which check a rewrite completion fails and why ("" when
// it passes every one).
func provenance(c contract.Completion) (check, reason string) {
	if want := contract.CompletionTaskID(c); c.TaskID != want {
		return CheckTaskIdentity, fmt.Sprintf("task_id %q is not the identity of its base (want %q)", c.TaskID, want)
	}
	cov := c.Coverage
	if len(cov.Added) == 0 {
		var records int64
		for _, o := range cov.Removed {
			records += o.DocCount
		}
		if records > 0 {
			return CheckEmptyRewrite, fmt.Sprintf("removes %d objects holding %d records and adds nothing", len(cov.Removed), records)
		}
	}
	seen := make(map[string]bool, len(cov.Added))
	for _, o := range cov.Added {
		task, ok := contract.OwnedOutputTask(c.Collection, o.Key)
		if !ok || task != c.TaskID {
			return CheckForeignOutput, fmt.Sprintf("adds %s, which is not an output key of task %s", o.Key, c.TaskID)
		}
		if seen[o.Key] {
			return CheckForeignOutput, fmt.Sprintf("adds %s twice", o.Key)
		}
		seen[o.Key] = true
	}
	if why := contract.CoverageConserved(c.Collection, c.TaskID, c.Kind == contract.KindLifecycleTransition, cov.Removed, cov.Added); why != "" {
		return CheckConservation, why
	}
	return "", ""
}
