package localaws

import (
	"slices"
	"testing"
)

func TestRemovedAttributes(t *testing.T) {
	for _, tc := range []struct {
		expr  string
		names map[string]string
		want  []string
	}{
		{"REMOVE a", nil, []string{"a"}},
		{"SET gc_objects = :go, gc_bytes = :gb REMOVE gc_due_at", nil, []string{"gc_due_at"}},
		{"remove #c, b SET d = if_not_exists(d, :z) + :one", map[string]string{"#c": "c"}, []string{"c", "b"}},
		{"REMOVE a.b, l[0], x ADD n :one", nil, []string{"x"}},
		{"SET a = list_append(a, :remove)", nil, nil},
	} {
		if got := RemovedAttributes(tc.expr, tc.names); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.expr, got, tc.want)
		}
	}
}
