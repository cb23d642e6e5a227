package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
)

// Release intent kinds (CCS vocabulary).
const (
	CollectionReleaseIntent = "collection_name_reservation_release_intent"
	NamespaceReleaseIntent  = "namespace_name_reservation_release_intent"
)

// Lifecycle is the CCS lifecycle policy projection for one collection.
type Lifecycle struct {
	RetentionMs       int64  `json:"retention_ms"`        // 0: no lifecycle retention
	TransitionAfterMs int64  `json:"transition_after_ms"` // 0: no tier transition
	TransitionToTier  string `json:"transition_to_tier,omitempty"`
}

// TransitionCutoff returns the cutoff of a lifecycle tier transition at
// nowMs: objects not in TransitionToTier whose maximum timestamp is <= the
// cutoff are due. ok is false when the policy has no transition.
func (l Lifecycle) TransitionCutoff(nowMs int64) (cutoffMs int64, ok bool) {
	if l.TransitionAfterMs <= 0 || !ValidTier(l.TransitionToTier) {
		return 0, false
	}
	if nowMs < math.MinInt64+l.TransitionAfterMs {
		return math.MinInt64, true // saturate: nothing is that old
	}
	return nowMs - l.TransitionAfterMs, true
}

// CollectionFacts are the CCS scheduling facts for one collection. FactsVersion
// increases whenever any fact changes; tasks pin it.
type CollectionFacts struct {
	SchemaVersion            int       `json:"schema_version"`
	Collection               string    `json:"collection"`
	FactsVersion             uint64    `json:"facts_version"`
	Lifecycle                Lifecycle `json:"lifecycle"`
	Tombstoned               bool      `json:"tombstoned"`
	ReservationHorizonUnixMs int64     `json:"reservation_horizon_unix_ms,omitempty"`
}

func (f *CollectionFacts) validate() error {
	if err := checkSchema(f.SchemaVersion); err != nil {
		return err
	}
	switch {
	case !ValidCollection(f.Collection):
		return invalid("collection %q is not a valid collection name", f.Collection)
	case f.Lifecycle.RetentionMs < 0 || f.Lifecycle.TransitionAfterMs < 0:
		return invalid("lifecycle durations must be >= 0")
	case f.Lifecycle.TransitionAfterMs > 0 && !ValidTier(f.Lifecycle.TransitionToTier):
		return invalid("lifecycle transition_to_tier %q is not hot|warm|cold", f.Lifecycle.TransitionToTier)
	}
	return nil
}

// DecodeCollectionFacts strictly decodes CCS facts.
func DecodeCollectionFacts(where string, b []byte) (CollectionFacts, error) {
	var f CollectionFacts
	if err := checkSize("ccs facts", where, len(b), MaxFactsBytes); err != nil {
		return f, err
	}
	err := Decode("ccs facts", where, b, &f)
	return f, err
}

// ReleaseIntentRequest asks CCS to record a reservation release intent. The
// coordinator sends it only after every cleanup dependency is confirmed.
type ReleaseIntentRequest struct {
	SchemaVersion int      `json:"schema_version"`
	IntentID      string   `json:"intent_id"`
	IntentKind    string   `json:"intent_kind"`
	Collection    string   `json:"collection"`
	FactsVersion  uint64   `json:"facts_version"`
	Dependencies  []string `json:"dependencies_confirmed"`
}

func (r *ReleaseIntentRequest) validate() error {
	if err := checkSchema(r.SchemaVersion); err != nil {
		return err
	}
	switch {
	case r.IntentKind != CollectionReleaseIntent && r.IntentKind != NamespaceReleaseIntent:
		return invalid("intent_kind %q is unknown", r.IntentKind)
	case !ValidCollection(r.Collection):
		return invalid("collection %q is not a valid collection name", r.Collection)
	case r.IntentID != ReleaseIntentID(r.IntentKind, r.Collection, r.FactsVersion):
		return invalid("intent_id %q is not the identity of its fields", r.IntentID)
	case len(r.Dependencies) == 0:
		return invalid("no confirmed dependencies")
	}
	return nil
}

// DecodeReleaseIntentRequest strictly decodes a release intent request.
func DecodeReleaseIntentRequest(where string, b []byte) (ReleaseIntentRequest, error) {
	var r ReleaseIntentRequest
	err := Decode("release intent request", where, b, &r)
	return r, err
}

// ReleaseIntentID is the deterministic intent identity.
func ReleaseIntentID(kind, collection string, factsVersion uint64) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d", kind, collection, factsVersion)))
	return "intent-" + hex.EncodeToString(h[:16])
}

// Release intent answer statuses.
const (
	IntentRecorded        = "recorded"
	IntentAlreadyRecorded = "already_recorded"
	IntentRejected        = "rejected"
)

// ReleaseIntentAnswer is CCS's reply.
type ReleaseIntentAnswer struct {
	SchemaVersion    int    `json:"schema_version"`
	IntentID         string `json:"intent_id"`
	Status           string `json:"status"`
	RecordedAtUnixMs int64  `json:"recorded_at_unix_ms,omitempty"`
	Reason           string `json:"reason,omitempty"`
}

func (a *ReleaseIntentAnswer) validate() error {
	if err := checkSchema(a.SchemaVersion); err != nil {
		return err
	}
	if a.Status != IntentRecorded && a.Status != IntentAlreadyRecorded && a.Status != IntentRejected {
		return invalid("status %q is not recorded|already_recorded|rejected", a.Status)
	}
	return nil
}

// DecodeReleaseIntentAnswer strictly decodes a release intent answer.
func DecodeReleaseIntentAnswer(where string, b []byte) (ReleaseIntentAnswer, error) {
	var a ReleaseIntentAnswer
	err := Decode("release intent answer", where, b, &a)
	return a, err
}

// Watermark is the query plane's published global_safe_ts.
type Watermark struct {
	SchemaVersion      int   `json:"schema_version"`
	GlobalSafeTsUnixMs int64 `json:"global_safe_ts_unix_ms"`
	PublishedAtUnixMs  int64 `json:"published_at_unix_ms"`
}

func (w *Watermark) validate() error {
	if err := checkSchema(w.SchemaVersion); err != nil {
		return err
	}
	if w.GlobalSafeTsUnixMs <= 0 {
		return invalid("global_safe_ts_unix_ms must be > 0")
	}
	return nil
}

// DecodeWatermark strictly decodes the watermark.
func DecodeWatermark(where string, b []byte) (Watermark, error) {
	var w Watermark
	if err := checkSize("watermark", where, len(b), MaxWatermarkBytes); err != nil {
		return w, err
	}
	err := Decode("watermark", where, b, &w)
	return w, err
}
