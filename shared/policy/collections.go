package policy

import (
	"encoding/json"
	"slices"
	"strings"
)

// CollectionSet is a set of collection names, written in JSON as an array
// of strings. It is stored as one sorted, comma-joined string so that a
// Policy stays comparable with ==.
type CollectionSet string

// NewCollectionSet returns the set of names.
func NewCollectionSet(names ...string) CollectionSet {
	names = slices.Clone(names)
	slices.Sort(names)
	return CollectionSet(strings.Join(slices.Compact(names), ","))
}

// Names lists the set, sorted.
func (s CollectionSet) Names() []string {
	if s == "" {
		return nil
	}
	return strings.Split(string(s), ",")
}

// Contains reports whether name is in the set.
func (s CollectionSet) Contains(name string) bool { return slices.Contains(s.Names(), name) }

// MarshalJSON writes the set as an array.
func (s CollectionSet) MarshalJSON() ([]byte, error) {
	n := s.Names()
	if n == nil {
		n = []string{}
	}
	return json.Marshal(n)
}

// UnmarshalJSON reads an array of names.
func (s *CollectionSet) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	*s = NewCollectionSet(names...)
	return nil
}
