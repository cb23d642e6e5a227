package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/store"
)

// fixed sources (pure logic: the embedded-stack tests in cmd/bcc read
// the real ones).
type fixed struct {
	facts    map[string]contract.CollectionFacts
	factsErr error
	heads    map[string]contract.Head
	observed map[string]observe.Observed
	leases   []lease.State
}

func (f *fixed) Collections(context.Context) ([]string, error) {
	var out []string
	for c := range f.facts {
		out = append(out, c)
	}
	return out, f.factsErr
}

func (f *fixed) Facts(_ context.Context, c string) (contract.CollectionFacts, error) {
	if f.factsErr != nil {
		return contract.CollectionFacts{}, f.factsErr
	}
	v, ok := f.facts[c]
	if !ok {
		return v, store.ErrNotFound
	}
	return v, nil
}

func (f *fixed) Head(_ context.Context, c string) (contract.Head, error) {
	h, ok := f.heads[c]
	if !ok {
		return h, store.ErrNotFound
	}
	return h, nil
}

func (f *fixed) Get(_ context.Context, c string) (observe.Observed, error) { return f.observed[c], nil }

func (f *fixed) ports() Ports {
	return Ports{Catalog: f, Facts: f, Heads: f, Observed: f,
		Preview: func(_ context.Context, c string) (observe.Result, observe.Observed, error) {
			ob := f.observed[c]
			return observe.Result{Collection: c, Outcome: observe.OutcomeDuplicate, Version: ob.Version}, ob, nil
		},
		GC:     func(context.Context, string, time.Time) (gc.Plan, error) { return gc.Plan{}, nil },
		Leases: func(context.Context, string) ([]lease.State, error) { return f.leases, nil },
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sources() *fixed {
	sum := "sha256:" + strings.Repeat("a", 64)
	return &fixed{
		facts:    map[string]contract.CollectionFacts{"c1": {Collection: "c1", FactsVersion: 1}},
		heads:    map[string]contract.Head{"c1": {Collection: "c1", Version: 3, ManifestChecksum: sum}},
		observed: map[string]observe.Observed{"c1": {Collection: "c1", Version: 3, Checksum: sum, ObservedAtUnixMs: t0.UnixMilli()}},
	}
}

// The fingerprint is the facts', not the clock's: the same sources at two
// times fingerprint the same; a heartbeat (a lease's expiry) moves it.
func TestFingerprintMovesWithFactsNotTime(t *testing.T) {
	f := sources()
	tk := contract.NewTask(contract.KindCompaction, "c1", 3, f.heads["c1"].ManifestChecksum, 1, 0)
	f.leases = []lease.State{{Lease: contract.Lease{TaskID: tk.TaskID, Kind: tk.Kind, Collection: "c1", BaseManifestVersion: 3,
		BaseManifestChecksum: tk.BaseManifestChecksum, LeaseEpoch: 1, Holder: "A", AcquiredAtUnixMs: t0.UnixMilli(), LeaseExpiryUnixMs: t0.Add(2 * time.Minute).UnixMilli()}}}
	o := Options{Policy: policy.Default(), SkipQueues: true}
	a := Collect(context.Background(), f.ports(), o, t0.Add(time.Second))
	b := Collect(context.Background(), f.ports(), o, t0.Add(2*time.Second))
	if Fingerprint(a) != Fingerprint(b) || a.Collections[0].State != Running {
		t.Fatalf("same facts, other time: %s %s (%s)", Fingerprint(a), Fingerprint(b), a.Collections[0].State)
	}
	f.leases[0].Lease.LeaseExpiryUnixMs += 30_000
	if c := Collect(context.Background(), f.ports(), o, t0.Add(2*time.Second)); Fingerprint(c) == Fingerprint(b) {
		t.Fatal("a heartbeat did not move the fingerprint")
	}
}

// Nothing is planned from a guess: an unreadable source makes the
// collection Unknown and the plan skips it with the reason.
func TestUnknownIsNeverPlanned(t *testing.T) {
	f := sources()
	f.factsErr = errors.New("connection refused")
	s := Collect(context.Background(), f.ports(), Options{Policy: policy.Default(), SkipQueues: true, Collections: []string{"c1"}}, t0)
	if s.State != Unknown || s.Collections[0].State != Unknown {
		t.Fatalf("CCS down: %s / %s %v", s.State, s.Collections[0].State, s.Collections[0].Reasons)
	}
	p := PlanFor(s, observe.Config{GCSweepInterval: time.Hour})
	if len(p.Intents) != 0 || !strings.Contains(p.Skipped["c1"], "connection refused") {
		t.Fatalf("plan from an Unknown collection: %+v", p)
	}
}

// The same task from the observer and the reconciliation is one intent.
func TestPlanMergesOneTaskIdentity(t *testing.T) {
	tk := contract.NewTask(contract.KindGC, "c1", 1, "sha256:"+strings.Repeat("b", 64), 1, 0)
	got := dedupe([]Intent{{Kind: IntentEnqueue, Task: &tk, Reason: "a"}, {Kind: IntentEnqueue, Task: &tk, Reason: "b"}, {Kind: IntentInspectDLQ, Reason: "c"}})
	if len(got) != 2 || got[0].Reason != "a; b" {
		t.Fatalf("%+v", got)
	}
}

// A blind read is never healthy: with the catalog unreadable the fleet is
// Unknown, and a collection with a lease record is still in the snapshot
// with its lease (the listing of leases does not depend on the catalog).
func TestUnreadableCatalogHidesNoLease(t *testing.T) {
	f := sources()
	f.factsErr = errors.New("connection refused")
	tk := contract.NewTask(contract.KindCompaction, "c1", 3, f.heads["c1"].ManifestChecksum, 1, 0)
	f.leases = []lease.State{{Lease: contract.Lease{TaskID: tk.TaskID, Kind: tk.Kind, Collection: "c1", BaseManifestVersion: 3,
		BaseManifestChecksum: tk.BaseManifestChecksum, LeaseEpoch: 1, Holder: "A", AcquiredAtUnixMs: t0.UnixMilli(), LeaseExpiryUnixMs: t0.Add(2 * time.Minute).UnixMilli()}}}
	s := Collect(context.Background(), f.ports(), Options{Policy: policy.Default(), SkipQueues: true}, t0.Add(time.Second))
	if s.State != Unknown || s.CatalogError == "" {
		t.Fatalf("catalog down: fleet %s %v", s.State, s.Reasons)
	}
	if len(s.Collections) != 1 || s.Collections[0].Name != "c1" || len(s.Collections[0].Current.Leases) != 1 || s.Collections[0].State != Unknown {
		t.Fatalf("the lease of c1 is hidden when the catalog is unreadable: %+v", s.Collections)
	}
	f.factsErr = nil
	ports := f.ports()
	ports.Leases = func(context.Context, string) ([]lease.State, error) { return nil, errors.New("table unreachable") }
	if s := Collect(context.Background(), ports, Options{Policy: policy.Default(), SkipQueues: true}, t0); s.State != Unknown || s.LeasesError == "" {
		t.Fatalf("lease records unreadable: fleet %s %v", s.State, s.Reasons)
	}
}
