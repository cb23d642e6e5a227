package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// ReconcileChunkMax is the most collections one reconcile request names.
// A scheduled pass splits the catalog into requests of this size; each is
// split by its consumer into at most ten smaller requests, and so on down
// to one request per collection. 250 names of at most 63 bytes keep ten
// requests (one SendMessageBatch) under SQS's 256 KiB batch payload.
const ReconcileChunkMax = 250

// ReconcileRequest is the body of a message on the reconcile queue. With
// one collection it asks for that collection to be reconciled on its own
// (its message group is the collection); with several it asks for the
// request to be split further (the fan-out of a scheduled pass, in steps
// of one SendMessageBatch each).
type ReconcileRequest struct {
	SchemaVersion int      `json:"schema_version"`
	Collections   []string `json:"collections"`
	// SweepUnixMs is the minute of the scheduled pass that asked: a
	// request's identity, so passes racing within one minute collapse.
	SweepUnixMs int64 `json:"sweep_unix_ms"`
}

func (r *ReconcileRequest) validate() error {
	if err := checkSchema(r.SchemaVersion); err != nil {
		return err
	}
	switch {
	case len(r.Collections) == 0:
		return invalid("collections is empty")
	case len(r.Collections) > ReconcileChunkMax:
		return invalid("collections names %d collections, at most %d", len(r.Collections), ReconcileChunkMax)
	case r.SweepUnixMs <= 0 || r.SweepUnixMs%60000 != 0:
		return invalid("sweep_unix_ms %d is not a positive whole minute", r.SweepUnixMs)
	}
	for i, c := range r.Collections {
		if !ValidCollection(c) {
			return invalid("collections[%d] %q is not a valid collection name", i, c)
		}
	}
	return nil
}

// NewReconcileRequest builds a request for collections at the sweep minute
// of nowMs.
func NewReconcileRequest(collections []string, nowMs int64) ReconcileRequest {
	return ReconcileRequest{SchemaVersion: SchemaVersion, Collections: collections, SweepUnixMs: SweepMinute(nowMs)}
}

// DecodeReconcileRequest strictly decodes a reconcile message body (where:
// the message id).
func DecodeReconcileRequest(where string, b []byte) (ReconcileRequest, error) {
	var r ReconcileRequest
	err := Decode("reconcile request", where, b, &r)
	return r, err
}

// ReconcileMessage is the message of a reconcile request. A request for one
// collection: group = the collection, deduplication id =
// "reconcile-<collection>-<sweep minute>". A chunk: group and deduplication
// id name the chunk by a hash of its names (chunks fan out in parallel).
func ReconcileMessage(r ReconcileRequest) (Message, error) {
	body, err := Encode(r)
	if err != nil {
		return Message{}, err
	}
	if len(r.Collections) == 1 {
		return Message{Group: r.Collections[0], DedupID: fmt.Sprintf("reconcile-%s-%d", r.Collections[0], r.SweepUnixMs), Body: body}, nil
	}
	h := sha256.Sum256([]byte(strings.Join(r.Collections, "\n")))
	id := "reconcile-chunk-" + hex.EncodeToString(h[:8])
	return Message{Group: id, DedupID: fmt.Sprintf("%s-%d", id, r.SweepUnixMs), Body: body}, nil
}
