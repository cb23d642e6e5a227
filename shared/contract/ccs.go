package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
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
//
// Incarnation names the lifetime the facts describe (see Lifetime): a
// re-created name has a new, larger one. For a tombstoned incarnation CCS
// also says when it was dropped (the eviction time of everything its
// lineage references), until when the name stays reserved (release waits
// for it), the control artifacts (schema, settings: keys under the
// collection's prefix) the cleanup must delete, and the preconditions of
// its own that still hold the release. ReleaseIntentRecorded is set once
// CCS recorded the incarnation's release intent: nothing is scheduled for
// the incarnation after that, whatever the coordinator remembers.
type CollectionFacts struct {
	SchemaVersion            int       `json:"schema_version"`
	Collection               string    `json:"collection"`
	Namespace                string    `json:"namespace,omitempty"`
	Incarnation              uint64    `json:"incarnation,omitempty"`
	FactsVersion             uint64    `json:"facts_version"`
	Lifecycle                Lifecycle `json:"lifecycle"`
	Tombstoned               bool      `json:"tombstoned"`
	TombstonedAtUnixMs       int64     `json:"tombstoned_at_unix_ms,omitempty"`
	ReservationHorizonUnixMs int64     `json:"reservation_horizon_unix_ms,omitempty"`
	ControlArtifacts         []string  `json:"control_artifacts,omitempty"`
	PendingPreconditions     []string  `json:"pending_preconditions,omitempty"`
	ReleaseIntentRecorded    bool      `json:"release_intent_recorded,omitempty"`
}

// EvictedAtUnixMs is when a tombstoned incarnation's objects count as
// evicted: the drop time, or (CCS that does not say) the reservation
// horizon; 0: not evicted (nothing may be deleted).
func (f CollectionFacts) EvictedAtUnixMs() int64 {
	if !f.Tombstoned {
		return 0
	}
	if f.TombstonedAtUnixMs > 0 {
		return f.TombstonedAtUnixMs
	}
	return f.ReservationHorizonUnixMs
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
	case f.Namespace != "" && !ValidCollection(f.Namespace):
		return invalid("namespace %q is not a valid namespace name", f.Namespace)
	case f.TombstonedAtUnixMs < 0 || f.ReservationHorizonUnixMs < 0:
		return invalid("tombstone times must be >= 0")
	}
	for _, k := range f.ControlArtifacts {
		// A control artifact is under the collection's control prefix:
		// never its head (the publisher retires the head at the
		// cleanup's request), never a manifest or data key (the lineage says what
		// those are), and the one prefix the GC role may delete there.
		if !strings.HasPrefix(k, ControlPrefix(f.Collection)) || len(k) == len(ControlPrefix(f.Collection)) || strings.Contains(k, "..") {
			return invalid("control artifact %q is not a key under %s", k, ControlPrefix(f.Collection))
		}
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
//
// A collection intent names the collection and its incarnation; a namespace
// intent names the namespace (Collection empty) and its incarnation. The
// identity is a function of kind, name and incarnation alone: exactly one
// intent per incarnation, whatever facts version or retry sent it.
type ReleaseIntentRequest struct {
	SchemaVersion int      `json:"schema_version"`
	IntentID      string   `json:"intent_id"`
	IntentKind    string   `json:"intent_kind"`
	Collection    string   `json:"collection,omitempty"`
	Namespace     string   `json:"namespace,omitempty"`
	Incarnation   uint64   `json:"incarnation,omitempty"`
	FactsVersion  uint64   `json:"facts_version"`
	Dependencies  []string `json:"dependencies_confirmed"`
}

// Name is the collection or namespace the intent releases.
func (r ReleaseIntentRequest) Name() string {
	if r.IntentKind == NamespaceReleaseIntent {
		return r.Namespace
	}
	return r.Collection
}

func (r *ReleaseIntentRequest) validate() error {
	if err := checkSchema(r.SchemaVersion); err != nil {
		return err
	}
	switch {
	case r.IntentKind != CollectionReleaseIntent && r.IntentKind != NamespaceReleaseIntent:
		return invalid("intent_kind %q is unknown", r.IntentKind)
	case r.IntentKind == CollectionReleaseIntent && (!ValidCollection(r.Collection) || r.Namespace != ""):
		return invalid("collection %q is not a valid collection name (a collection intent names no namespace)", r.Collection)
	case r.IntentKind == NamespaceReleaseIntent && (!ValidCollection(r.Namespace) || r.Collection != ""):
		return invalid("namespace %q is not a valid namespace name (a namespace intent names no collection)", r.Namespace)
	case r.IntentID != ReleaseIntentID(r.IntentKind, r.Name(), Lifetime(r.Incarnation)):
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

// ReleaseIntentID is the deterministic intent identity of one incarnation
// of a collection or namespace name.
func ReleaseIntentID(kind, name string, incarnation uint64) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|incarnation=%d", kind, name, Lifetime(incarnation))))
	return "intent-" + hex.EncodeToString(h[:16])
}

// Release intent answer statuses.
const (
	IntentRecorded        = "recorded"
	IntentAlreadyRecorded = "already_recorded"
	IntentRejected        = "rejected"
	// IntentStaleFacts: a collection intent's facts_version is not CCS's
	// current one (the tombstone it was judged under changed since);
	// nothing recorded.
	IntentStaleFacts = "stale_facts"
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
	if a.Status != IntentRecorded && a.Status != IntentAlreadyRecorded && a.Status != IntentRejected && a.Status != IntentStaleFacts {
		return invalid("status %q is not recorded|already_recorded|rejected|stale_facts", a.Status)
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

// NamespaceFacts are CCS's facts about one namespace: its lifetime
// (incarnation), whether it is dropped (CCS admits a namespace drop only
// once its child collections are hidden, i.e. tombstoned), its child
// collections, and whether its release intent is recorded. The
// coordinator requests the namespace's release only after every child's
// release intent is recorded.
type NamespaceFacts struct {
	SchemaVersion         int      `json:"schema_version"`
	Namespace             string   `json:"namespace"`
	Incarnation           uint64   `json:"incarnation,omitempty"`
	FactsVersion          uint64   `json:"facts_version"`
	Tombstoned            bool     `json:"tombstoned"`
	TombstonedAtUnixMs    int64    `json:"tombstoned_at_unix_ms,omitempty"`
	Collections           []string `json:"collections"`
	ReleaseIntentRecorded bool     `json:"release_intent_recorded,omitempty"`
}

// Inc is the namespace's incarnation (absent: 1).
func (f NamespaceFacts) Inc() uint64 { return Lifetime(f.Incarnation) }

func (f *NamespaceFacts) validate() error {
	if err := checkSchema(f.SchemaVersion); err != nil {
		return err
	}
	if !ValidCollection(f.Namespace) {
		return invalid("namespace %q is not a valid namespace name", f.Namespace)
	}
	for _, c := range f.Collections {
		if !ValidCollection(c) {
			return invalid("child collection %q is not a valid collection name", c)
		}
	}
	return nil
}

// DecodeNamespaceFacts strictly decodes CCS namespace facts.
func DecodeNamespaceFacts(where string, b []byte) (NamespaceFacts, error) {
	var f NamespaceFacts
	if err := checkSize("ccs namespace facts", where, len(b), MaxFactsBytes); err != nil {
		return f, err
	}
	err := Decode("ccs namespace facts", where, b, &f)
	return f, err
}
