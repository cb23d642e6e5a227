package contract_test

import (
	"errors"
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

// A handoff message is a completion or, with message_kind, a namespace
// release request; an unknown kind or a request with completion fields is
// refused, never read as the other kind.
func TestHandoffMessagesDecodeByKind(t *testing.T) {
	for name, body := range map[string]string{
		"unknown kind":    `{"schema_version":1,"message_kind":"cutover","namespace":"shop","facts_version":1,"requested_at_unix_ms":1}`,
		"mixed fields":    `{"schema_version":1,"message_kind":"namespace_release","namespace":"shop","facts_version":1,"requested_at_unix_ms":1,"task_id":"x"}`,
		"bad namespace":   `{"schema_version":1,"message_kind":"namespace_release","namespace":"Shop!","facts_version":1,"requested_at_unix_ms":1}`,
		"kind not string": `{"schema_version":1,"message_kind":7,"namespace":"shop"}`,
	} {
		if _, err := contract.DecodeHandoffMessage(name, []byte(body)); !errors.Is(err, contract.ErrInvalid) && !errors.Is(err, contract.ErrUnknownField) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	m, err := contract.NamespaceReleaseMessage(contract.NamespaceRelease{SchemaVersion: 1, MessageKind: contract.MessageNamespaceRelease, Namespace: "shop", FactsVersion: 3, RequestedAtUnixMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	got, err := contract.DecodeHandoffMessage("m", m.Body)
	if err != nil || got.NamespaceRelease == nil || got.NamespaceRelease.Namespace != "shop" || m.Group != "namespace.shop" || contract.ValidCollection(m.Group) {
		t.Fatalf("round trip: %+v %v (group %q)", got, err, m.Group)
	}
}
