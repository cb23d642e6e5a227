package contract

import (
	"encoding/json"
	"fmt"
)

// TombstonedNamespaces is one page of CCS's list of dropped namespaces
// with their facts (GET {ccs}/namespaces/tombstoned?after=<name>,
// events/CCS.md): the namespaces CCS tombstoned, released or not, sorted
// by name, every one after the request's `after`. NextAfter is the name to
// ask after for the next page ("" on the last page). Reconciliation
// derives the namespace releases owed from it, so a namespace dropped with
// no child collection at all (nothing else would ever ask) is released.
type TombstonedNamespaces struct {
	SchemaVersion int              `json:"schema_version"`
	Namespaces    []NamespaceFacts `json:"namespaces"`
	NextAfter     string           `json:"next_after,omitempty"`
}

// MaxTombstonedNamespacesPage bounds one page of the listing.
const MaxTombstonedNamespacesPage = 100

// validate judges a whole page as one document (the strict-name tests
// and any caller that needs every entry valid); DecodeTombstonedNamespaces
// judges each entry alone.
func (p *TombstonedNamespaces) validate() error {
	if err := checkSchema(p.SchemaVersion); err != nil {
		return err
	}
	if len(p.Namespaces) > MaxTombstonedNamespacesPage {
		return invalid("namespaces lists %d namespaces, at most %d per page", len(p.Namespaces), MaxTombstonedNamespacesPage)
	}
	for i := range p.Namespaces {
		n := &p.Namespaces[i]
		if err := n.validate(); err != nil {
			return fmt.Errorf("namespaces[%d]: %w", i, err)
		}
		if !n.Tombstoned {
			return invalid("namespaces[%d] %s is not tombstoned", i, n.Namespace)
		}
		if i > 0 && p.Namespaces[i-1].Namespace >= n.Namespace {
			return invalid("namespaces[%d] %s is not after %s: the page must be sorted by name", i, n.Namespace, p.Namespaces[i-1].Namespace)
		}
	}
	if p.NextAfter != "" && !ValidCollection(p.NextAfter) {
		return invalid("next_after %q is not a valid namespace name", p.NextAfter)
	}
	return nil
}

// tombstonedPage is a page's envelope: every entry is judged on its own.
type tombstonedPage struct {
	SchemaVersion int               `json:"schema_version"`
	Namespaces    []json.RawMessage `json:"namespaces"`
	NextAfter     string            `json:"next_after,omitempty"`
}

func (p *tombstonedPage) validate() error {
	if err := checkSchema(p.SchemaVersion); err != nil {
		return err
	}
	if len(p.Namespaces) > MaxTombstonedNamespacesPage {
		return invalid("namespaces lists %d namespaces, at most %d per page", len(p.Namespaces), MaxTombstonedNamespacesPage)
	}
	if p.NextAfter != "" && !ValidCollection(p.NextAfter) {
		return invalid("next_after %q is not a valid namespace name", p.NextAfter)
	}
	return nil
}

// DecodeTombstonedNamespaces strictly decodes one page of the listing.
// The page itself (schema_version, size, entry count, next_after) must
// hold for anything on it to be read. Each listed namespace is then judged
// alone (SYSTEM rule 17: one bad item fails only itself): an entry that
// does not decode strictly as NamespaceFacts, names no valid namespace or
// child collection, is not tombstoned, or does not sort after the entry
// accepted before it is left out of the page and reported in a
// *RejectedEntriesError, returned with the page of every other entry.
func DecodeTombstonedNamespaces(where string, b []byte) (TombstonedNamespaces, error) {
	var env tombstonedPage
	if err := checkSize("ccs tombstoned namespaces", where, len(b), MaxFactsBytes); err != nil {
		return TombstonedNamespaces{}, err
	}
	if err := Decode("ccs tombstoned namespaces", where, b, &env); err != nil {
		return TombstonedNamespaces{}, err
	}
	p := TombstonedNamespaces{SchemaVersion: env.SchemaVersion, NextAfter: env.NextAfter, Namespaces: make([]NamespaceFacts, 0, len(env.Namespaces))}
	rej := &RejectedEntriesError{Listing: "ccs tombstoned namespaces"}
	for i, raw := range env.Namespaces {
		at := fmt.Sprintf("%s namespaces[%d]", where, i)
		var n NamespaceFacts
		err := Decode("ccs tombstoned namespace", at, raw, &n)
		switch {
		case err != nil:
		case !n.Tombstoned:
			err = &DecodeError{Doc: "ccs tombstoned namespace", Where: at, Reason: fmt.Sprintf("namespace %s is not tombstoned", n.Namespace), Err: ErrInvalid}
		case len(p.Namespaces) > 0 && p.Namespaces[len(p.Namespaces)-1].Namespace >= n.Namespace:
			err = &DecodeError{Doc: "ccs tombstoned namespace", Where: at,
				Reason: fmt.Sprintf("namespace %s is not after %s: the page must be sorted by name", n.Namespace, p.Namespaces[len(p.Namespaces)-1].Namespace), Err: ErrInvalid}
		}
		if err != nil {
			rej.Entries = append(rej.Entries, RejectedEntry{Where: at, Name: listedName(raw, "namespace"), Err: err})
			continue
		}
		p.Namespaces = append(p.Namespaces, n)
	}
	if len(rej.Entries) > 0 {
		return p, rej
	}
	return p, nil
}
