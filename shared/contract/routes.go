package contract

import "strings"

// Route is one HTTP operation of an owner's API: a method and a path below
// the owner's base URL, '*' standing for one path segment. The owner
// clients (shared/adapters/owners) call exactly these; the deployment
// grants exactly these (execute-api:Invoke on each, infra/owners.go).
type Route struct {
	Method string
	Path   string
}

// PublisherRoutes are the Manifest Publisher operations the coordinator calls.
var PublisherRoutes = []Route{
	PublisherCutover,
	PublisherRetire,
}

// The publisher's routes: cutover candidates (the handoff) and the
// retirement of a dropped incarnation's head (the tombstone cleanup).
var (
	PublisherCutover = Route{"POST", "/cutover"}
	PublisherRetire  = Route{"POST", "/retire"}
)

// CCSRoutes are the Catalog Control Service operations the coordinator calls.
var CCSRoutes = []Route{
	CCSCollections,
	CCSFacts,
	CCSNamespaceFacts,
	CCSTombstonedNamespaces,
	CCSReleaseIntents,
}

// CCS's routes: the catalog listing and the dropped namespaces
// (reconciliation), a collection's and a namespace's scheduling facts, and
// the one write, release intents (the handoff's alone).
var (
	CCSCollections          = Route{"GET", "/collections"}
	CCSFacts                = Route{"GET", "/collections/*/facts"}
	CCSNamespaceFacts       = Route{"GET", "/namespaces/*/facts"}
	CCSTombstonedNamespaces = Route{"GET", "/namespaces/tombstoned"}
	CCSReleaseIntents       = Route{"POST", "/release-intents"}
)

// Matches reports whether a request of method to path (below the owner's
// base URL, without query) is this route: the same method, and the same
// segments with '*' standing for one non-empty segment.
func (r Route) Matches(method, path string) bool {
	if method != r.Method {
		return false
	}
	want, got := strings.Split(r.Path, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i] != got[i] && (want[i] != "*" || got[i] == "") {
			return false
		}
	}
	return true
}
