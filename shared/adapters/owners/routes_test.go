package owners_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/contract"
)

// The clients call exactly the routes the contract lists (which the
// deployment grants): a new call needs a new route, hence a new grant.
func TestClientsCallOnlyTheContractRoutes(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = true
		mu.Unlock()
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer srv.Close()
	ctx := context.Background()
	pub := owners.NewPublisher(owners.New(srv.URL+"/pub", time.Second))
	ccs := owners.NewCCS(owners.New(srv.URL+"/ccs", time.Second))
	_, _ = pub.Cutover(ctx, contract.CutoverRequest{})
	_, _ = pub.Retire(ctx, contract.RetireRequest{})
	_, _ = ccs.Facts(ctx, "c1")
	_, _ = ccs.Collections(ctx)
	_, _ = ccs.TombstonedNamespaces(ctx)
	_, _ = ccs.RecordReleaseIntent(ctx, contract.ReleaseIntentRequest{})
	allowed := func(base string, routes []contract.Route, call string) bool {
		for _, r := range routes {
			pattern := r.Method + " " + base + r.Path
			if len(pattern) == len(call) || strings.Contains(r.Path, "*") {
				if match(pattern, call) {
					return true
				}
			}
		}
		return false
	}
	if len(seen) != 6 {
		t.Fatalf("calls %v", seen)
	}
	for call := range seen {
		if !allowed("/pub", contract.PublisherRoutes, call) && !allowed("/ccs", contract.CCSRoutes, call) {
			t.Errorf("%s is not a contract route", call)
		}
	}
}

func match(pattern, s string) bool {
	ps, ss := strings.Split(pattern, "/"), strings.Split(s, "/")
	if len(ps) != len(ss) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != ss[i] {
			return false
		}
	}
	return true
}
