package contract

import (
	"encoding/json"
	"fmt"
)

// NamespaceRelease is the handoff queue's second message kind: a request
// that the handoff ask CCS to record a dropped namespace's release intent.
// Reconciliation sends it when it finds a namespace release owed (seed
// §8.3: a namespace CCS dropped after its last child was released has no
// child completion to trigger it), so that every CCS write goes through
// the handoff, the one function whose role may POST release intents. It
// names the namespace only as a hint of what to look at: the handoff
// re-reads every fact (the namespace's tombstone and incarnation, each
// child's recorded release) and builds the intent from those alone, so a
// forged request can at most make it look.
type NamespaceRelease struct {
	SchemaVersion int    `json:"schema_version"`
	MessageKind   string `json:"message_kind"` // MessageNamespaceRelease
	Namespace     string `json:"namespace"`
	// FactsVersion is the namespace facts version the sender judged the
	// release owed under (part of the message identity only: a later
	// facts version is a new message).
	FactsVersion      uint64 `json:"facts_version"`
	RequestedAtUnixMs int64  `json:"requested_at_unix_ms"`
}

// MessageNamespaceRelease is NamespaceRelease's message_kind.
const MessageNamespaceRelease = "namespace_release"

func (r *NamespaceRelease) validate() error {
	if err := checkSchema(r.SchemaVersion); err != nil {
		return err
	}
	switch {
	case r.MessageKind != MessageNamespaceRelease:
		return invalid("message_kind %q is not %s", r.MessageKind, MessageNamespaceRelease)
	case !ValidCollection(r.Namespace):
		return invalid("namespace %q is not a valid namespace name", r.Namespace)
	}
	return nil
}

// NamespaceReleaseGroup is the message group of namespace release
// requests: no collection name contains a '.', so it never shares a group
// (and never waits behind) a collection's completions.
func NamespaceReleaseGroup(namespace string) string { return "namespace." + namespace }

// NamespaceReleaseMessage is the handoff message of r: group
// NamespaceReleaseGroup, deduplication id the namespace's and facts
// version's (one request per facts version within SQS's deduplication
// interval; a repeat later is harmless: CCS records one intent).
func NamespaceReleaseMessage(r NamespaceRelease) (Message, error) {
	body, err := Encode(r)
	if err != nil {
		return Message{}, err
	}
	return Message{Group: NamespaceReleaseGroup(r.Namespace), DedupID: fmt.Sprintf("nsrelease-%s-f%d", r.Namespace, r.FactsVersion), Body: body}, nil
}

// HandoffMessage is one decoded handoff queue message: exactly one of
// Completion (an executor's report) and NamespaceRelease is set.
type HandoffMessage struct {
	Completion       *Completion
	NamespaceRelease *NamespaceRelease
}

// DecodeHandoffMessage strictly decodes a handoff queue message body: a
// document with a message_kind member is decoded as that kind, any other
// as a Completion.
func DecodeHandoffMessage(where string, b []byte) (HandoffMessage, error) {
	var peek map[string]json.RawMessage
	if err := json.Unmarshal(b, &peek); err == nil {
		if raw, ok := peek["message_kind"]; ok {
			var kind string
			_ = json.Unmarshal(raw, &kind)
			if kind != MessageNamespaceRelease {
				return HandoffMessage{}, &DecodeError{Doc: "handoff message", Where: where, Reason: fmt.Sprintf("message_kind %q is unknown", kind), Err: ErrInvalid}
			}
			var r NamespaceRelease
			if err := Decode("namespace release request", where, b, &r); err != nil {
				return HandoffMessage{}, err
			}
			return HandoffMessage{NamespaceRelease: &r}, nil
		}
	}
	c, err := DecodeCompletion(where, b)
	if err != nil {
		return HandoffMessage{}, err
	}
	return HandoffMessage{Completion: &c}, nil
}
