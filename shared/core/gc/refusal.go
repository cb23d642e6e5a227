package gc

import (
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Reasons a candidate is deferred (the GCDeferred metric's Reason dimension).
const (
	ReasonPinned          = "pinned_manifest"     // a manifest a token may still open references it
	ReasonWatermark       = "watermark"           // global_safe_ts cannot be read
	ReasonRetentionWindow = "retention_window"    // evict_commit_ts >= global_safe_ts - retention_window
	ReasonLifecycle       = "lifecycle_retention" // now - max_ts < lifecycle retention_ms
	// Why the gate keeps a key other than a committed object.
	ReasonYoung      = "uncommitted_young" // a never-committed key a cutover may still commit
	ReasonReferenced = "referenced"        // a newer, retained or protected manifest references it
	ReasonIndexes    = "indexes_debt"      // a manifest key whose objects are not confirmed gone
	ReasonNotOurs    = "not_ours"          // another writer's key, another lifetime's, or a head (rules 11, 12): never
)

// Refusal reasons (the GCRefused metric's Reason dimension).
const (
	RefusedManifest = "manifest" // a head/root/part cannot be opened, verified or understood
	RefusedFacts    = "facts"    // CCS facts cannot be read
	RefusedLineage  = "lineage"  // the head moved in a way no publisher commit explains
	// RefusedRegression: the head is below the highest version seen for
	// the collection (remembered, or roots that exist above it), and no
	// operator confirmed the new lineage (bcc confirm-lineage).
	RefusedRegression = "head_regression"
)

// ErrRefused marks a definite refusal: GC deleted nothing for the
// collection and says why (unknown field, checksum mismatch, missing
// retained root, unreadable facts).
var ErrRefused = errors.New("gc refused")

// RefusedError carries a refusal's reason.
type RefusedError struct {
	Collection string
	Reason     string
	Err        error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("gc of %s refused (%s): %v", e.Collection, e.Reason, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refuse(c, reason string, err error) error {
	return &RefusedError{Collection: c, Reason: reason, Err: err}
}

// definite reports whether a lineage read error is a definite answer (the
// document is wrong or gone) rather than a transient failure to retry.
func definite(err error) bool {
	return errors.Is(err, contract.ErrUnknownField) || errors.Is(err, contract.ErrInvalid) ||
		errors.Is(err, contract.ErrSchemaVersion) || errors.Is(err, contract.ErrChecksumMismatch) ||
		errors.Is(err, store.ErrNotFound)
}

func lineageErr(c string, err error) error {
	var re *RefusedError
	if errors.As(err, &re) {
		return err
	}
	if definite(err) {
		return refuse(c, RefusedManifest, err)
	}
	return fmt.Errorf("gc of %s: %w", c, err)
}
