package contract

import (
	"strconv"
	"strings"
)

// LineageConfirmation is an operator's record that a collection's head went
// back on purpose (a restore, a rollback): the lineage of the head
// HeadVersion/HeadChecksum is the truth, and what GC saw as evidence of the
// regression is abandoned: the roots that existed above the head
// (AbandonedRoots, by key) and the highest head the coordinator had
// observed (AbandonedHeadVersion/Checksum, when it was not the head's
// lineage). Until a record names every piece of evidence GC sees, GC
// deletes nothing for the collection (GCRefused head_regression); new
// evidence (a later regression) needs a new record. It is coordinator
// state (disposable): when it is lost, GC refuses again until it is
// recorded again (`bcc confirm-lineage`).
//
// GC still keeps what the abandoned roots reference for a token lifetime
// (plus skew) after ConfirmedAtUnixMs: a token opened on an abandoned head
// before the regression may still read it until then.
//
// A confirmation belongs to one lifetime of the name (Incarnation, absent:
// 1; every abandoned root must be a root of that lifetime): it is stored
// per (collection, incarnation) and GC applies it only to a head of the
// same incarnation (guard.LineageIncarnation). What an operator confirmed
// for a dropped lifetime says nothing about the name's next one, and a
// confirmation of the next never answers evidence of the previous.
type LineageConfirmation struct {
	SchemaVersion         int      `json:"schema_version"`
	Collection            string   `json:"collection"`
	Incarnation           uint64   `json:"incarnation,omitempty"`
	HeadVersion           uint64   `json:"head_version"`
	HeadChecksum          string   `json:"head_checksum"`
	AbandonedRoots        []string `json:"abandoned_roots"`
	AbandonedHeadVersion  uint64   `json:"abandoned_head_version,omitempty"`
	AbandonedHeadChecksum string   `json:"abandoned_head_checksum,omitempty"`
	ConfirmedBy           string   `json:"confirmed_by"`
	ConfirmedAtUnixMs     int64    `json:"confirmed_at_unix_ms"`
	Reason                string   `json:"reason,omitempty"`
}

func (l *LineageConfirmation) validate() error {
	if err := checkSchema(l.SchemaVersion); err != nil {
		return err
	}
	switch {
	case !ValidCollection(l.Collection):
		return invalid("collection %q is not a valid collection name", l.Collection)
	case l.HeadVersion == 0 || !validChecksum(l.HeadChecksum):
		return invalid("head_version/head_checksum missing")
	case len(l.AbandonedRoots) == 0 && l.AbandonedHeadVersion == 0:
		return invalid("nothing abandoned: abandoned_roots or abandoned_head_version is required")
	case l.AbandonedHeadVersion != 0 && !validChecksum(l.AbandonedHeadChecksum):
		return invalid("abandoned_head_checksum %q is not sha256:<64 hex>", l.AbandonedHeadChecksum)
	case l.ConfirmedBy == "" || l.ConfirmedAtUnixMs <= 0:
		return invalid("confirmed_by and confirmed_at_unix_ms are required")
	case len(l.AbandonedRoots) > MaxAbandonedRoots:
		return invalid("abandoned_roots names %d roots, at most %d", len(l.AbandonedRoots), MaxAbandonedRoots)
	}
	for _, k := range l.AbandonedRoots {
		inc, _, ok := RootOf(l.Collection, k)
		if !ok {
			return invalid("abandoned root %q is not a root key of %s", k, l.Collection)
		}
		if inc != l.Inc() {
			return invalid("abandoned root %q is a root of incarnation %d, the confirmation is for incarnation %d", k, inc, l.Inc())
		}
	}
	return nil
}

// MaxAbandonedRoots bounds the roots one confirmation names (a head
// regression's evidence beyond it cannot be confirmed; stored compressed,
// 10,000 root keys stay far below DynamoDB's item size limit).
const MaxAbandonedRoots = 10_000

// Inc is the incarnation the confirmation is for (absent: 1).
func (l LineageConfirmation) Inc() uint64 { return Lifetime(l.Incarnation) }

// DecodeLineageConfirmation strictly decodes a lineage confirmation.
func DecodeLineageConfirmation(where string, b []byte) (LineageConfirmation, error) {
	var l LineageConfirmation
	err := Decode("lineage confirmation", where, b, &l)
	return l, err
}

// RootVersion returns the version a manifest root key of collection c
// names (collections/<c>/manifests/<version:020d>-<sha16>.json); ok is
// false for any other key (parts included).
func RootVersion(c, key string) (uint64, bool) {
	_, v, ok := RootOf(c, key)
	return v, ok
}

// RootOf parses a root key of c of any incarnation: its incarnation and
// version.
func RootOf(c, key string) (incarnation, version uint64, ok bool) {
	rest, ok := strings.CutPrefix(key, ManifestsPrefix(c))
	if !ok {
		return 0, 0, false
	}
	incarnation = 1
	if r, tagged := strings.CutPrefix(rest, "i"); tagged {
		dash := strings.IndexByte(r, '-')
		if dash <= 0 || !allDigits(r[:dash]) || r[0] == '0' {
			return 0, 0, false
		}
		n, err := strconv.ParseUint(r[:dash], 10, 64)
		if err != nil || n < 2 {
			return 0, 0, false
		}
		incarnation, rest = n, r[dash+1:]
	}
	if len(rest) != 20+1+16+len(".json") || rest[20] != '-' || !strings.HasSuffix(rest, ".json") || !allDigits(rest[:20]) {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(rest[:20], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	for _, h := range rest[21:37] {
		if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f') {
			return 0, 0, false
		}
	}
	return incarnation, v, v > 0
}
