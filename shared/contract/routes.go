package contract

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
	{"GET", "/collections"},
	{"GET", "/collections/*/facts"},
	{"GET", "/namespaces/*/facts"},
	{"POST", "/release-intents"},
}
