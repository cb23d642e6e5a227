package observe_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/metrics"
)

// partialCatalog answers its listings with what they read and an error.
type partialCatalog struct {
	cols    []string
	colsErr error
	ns      []contract.NamespaceFacts
	nsErr   error
}

func (c partialCatalog) Collections(context.Context) ([]string, error) { return c.cols, c.colsErr }
func (c partialCatalog) TombstonedNamespaces(context.Context) ([]contract.NamespaceFacts, error) {
	return c.ns, c.nsErr
}

type recReleaser struct{ asked []string }

func (r *recReleaser) Release(_ context.Context, ns string) (bool, error) {
	r.asked = append(r.asked, ns)
	return true, nil
}

func rejected(listing, where, name string) *contract.RejectedEntriesError {
	return &contract.RejectedEntriesError{Listing: listing, Entries: []contract.RejectedEntry{{Where: where, Name: name,
		Err: &contract.DecodeError{Doc: listing, Where: where, Reason: "bad", Err: contract.ErrInvalid}}}}
}

// An entry an owner's listing rejected alone (contract.RejectedEntriesError)
// fails only itself (SYSTEM rule 17): the scheduled pass counts and logs it
// (InvalidCatalogNames, alarmed) and derives everything else the listings
// read: every other collection is chunked, every other dropped namespace's
// release is asked for, also when the namespace listing failed part way
// (ReconcileFailures counts that failure, and the namespaces read before it
// are still released).
func TestRejectedListingEntriesFailOnlyThemselves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nsErr    error
		failures float64
	}{
		{"rejected entries only", rejected("ccs tombstoned namespaces", `after "" namespaces[1]`, "Bad Name!"), 0},
		{"and a later page unreadable", errors.Join(errors.New("page after \"gamma\": status 500"),
			rejected("ccs tombstoned namespaces", `after "" namespaces[1]`, "Bad Name!")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New("observer")
			o := observe.New(memObjects{}, memState{}, &recQueue{}, nil, func() time.Time { return time.UnixMilli(1_800_000_000_000) }, observe.DefaultConfig(), m, nil)
			rel := &recReleaser{}
			o.SetNamespaceReleaser(rel)
			cat := partialCatalog{
				cols: []string{"alpha", "beta"}, colsErr: rejected("ccs collections", "ccs collections collections[1]", ""),
				ns: []contract.NamespaceFacts{{SchemaVersion: 1, Namespace: "alpha-ns", FactsVersion: 1, Tombstoned: true, Collections: []string{}},
					{SchemaVersion: 1, Namespace: "gamma", FactsVersion: 1, Tombstoned: true, Collections: []string{}}},
				nsErr: tc.nsErr,
			}
			q := &sentRequests{}
			rep, err := o.ScheduleReconcile(context.Background(), cat, q)
			if err != nil {
				t.Fatalf("scheduled pass: %v", err)
			}
			var chunked []string
			for _, r := range q.reqs {
				chunked = append(chunked, r.Collections...)
			}
			if !slices.Equal(chunked, []string{"alpha", "beta"}) {
				t.Errorf("chunked %v, want alpha beta", chunked)
			}
			if !slices.Equal(rel.asked, []string{"alpha-ns", "gamma"}) || rep.ReleasesOwed != 2 {
				t.Errorf("releases asked %v (%d owed), want alpha-ns gamma", rel.asked, rep.ReleasesOwed)
			}
			if n := m.Total("InvalidCatalogNames"); n != 2 {
				t.Errorf("InvalidCatalogNames %v, want 2 (one rejected entry per listing)", n)
			}
			if n := m.Total("ReconcileFailures"); n != tc.failures {
				t.Errorf("ReconcileFailures %v, want %v", n, tc.failures)
			}
		})
	}
}
