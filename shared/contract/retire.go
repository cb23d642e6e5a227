package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// RetireRequest asks the Manifest Publisher to retire the head pointer of a
// dropped incarnation: the last step of its tombstone cleanup. The head is
// the one key every lifetime of a name shares and only its owner moves it,
// so the coordinator never deletes it itself. The request names the head it
// read (incarnation, version, manifest checksum); the publisher removes the
// head only while it is exactly that head, with a conditional delete on the
// head's ETag, so a head written meanwhile (a re-created name's first
// version, a late commit) is never removed. RequestID is the identity of its
// fields (RetireRequestID): a resent request is recognised.
type RetireRequest struct {
	SchemaVersion int    `json:"schema_version"`
	RequestID     string `json:"request_id"`
	Collection    string `json:"collection"`
	Incarnation   uint64 `json:"incarnation"`   // the dropped lifetime (1 for the first: always written)
	HeadVersion   uint64 `json:"head_version"`  // the version the head named when the coordinator read it
	HeadChecksum  string `json:"head_checksum"` // the manifest checksum it named
}

func (r *RetireRequest) validate() error {
	if err := checkSchema(r.SchemaVersion); err != nil {
		return err
	}
	switch {
	case !ValidCollection(r.Collection):
		return invalid("collection %q is not a valid collection name", r.Collection)
	case r.Incarnation == 0:
		return invalid("incarnation missing: a retirement names the lifetime whose head it removes")
	case r.HeadVersion == 0 || !validChecksum(r.HeadChecksum):
		return invalid("head_version/head_checksum missing: a retirement names the exact head it removes")
	case r.RequestID != RetireRequestID(r.Collection, r.Incarnation, r.HeadVersion, r.HeadChecksum):
		return invalid("request_id %q is not the identity of its fields", r.RequestID)
	}
	return nil
}

// DecodeRetireRequest strictly decodes a head retirement request.
func DecodeRetireRequest(where string, b []byte) (RetireRequest, error) {
	var r RetireRequest
	err := Decode("retire request", where, b, &r)
	return r, err
}

// RetireRequestID is the deterministic identity of the retirement of one
// head: the same cleanup retrying, or two runs of it, send the same id.
func RetireRequestID(collection string, incarnation, version uint64, checksum string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("retire|%s|incarnation=%d|v%d|%s", collection, Lifetime(incarnation), version, checksum)))
	return "retire-" + hex.EncodeToString(h[:16])
}

// NewRetireRequest is the retirement of head h of a dropped incarnation.
func NewRetireRequest(h Head) RetireRequest {
	return RetireRequest{SchemaVersion: SchemaVersion, RequestID: RetireRequestID(h.Collection, h.Inc(), h.Version, h.ManifestChecksum),
		Collection: h.Collection, Incarnation: h.Inc(), HeadVersion: h.Version, HeadChecksum: h.ManifestChecksum}
}

// Retire answer statuses.
const (
	RetireAccepted = "accepted" // the head is gone: removed now, or already (a resend, another run's retirement)
	RetireConflict = "conflict" // the head names another incarnation or version: nothing was removed
	RetireRejected = "rejected" // the publisher refuses (it cannot read the head as its own document): nothing was removed
)

// RetireAnswer is the publisher's reply. HeadIncarnation and HeadVersion
// describe the head the publisher found on a conflict.
type RetireAnswer struct {
	SchemaVersion   int    `json:"schema_version"`
	RequestID       string `json:"request_id"`
	Status          string `json:"status"`
	HeadIncarnation uint64 `json:"head_incarnation,omitempty"`
	HeadVersion     uint64 `json:"head_version,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

func (a *RetireAnswer) validate() error {
	if err := checkSchema(a.SchemaVersion); err != nil {
		return err
	}
	switch {
	case a.RequestID == "":
		return invalid("request_id is empty")
	case a.Status != RetireAccepted && a.Status != RetireConflict && a.Status != RetireRejected:
		return invalid("status %q is not accepted|conflict|rejected", a.Status)
	case a.Status == RetireConflict && a.HeadVersion == 0:
		return invalid("a conflict names the head found (head_version)")
	}
	return nil
}

// DecodeRetireAnswer strictly decodes a head retirement answer.
func DecodeRetireAnswer(where string, b []byte) (RetireAnswer, error) {
	var a RetireAnswer
	err := Decode("retire answer", where, b, &a)
	return a, err
}
