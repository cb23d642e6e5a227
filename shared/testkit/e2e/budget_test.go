package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// errWouldWait stops a pacer's wait in the simulated fleet: the instance
// comes back when the simulated clock reaches the wait's end.
var errWouldWait = errors.New("would wait")

// fleetGranted runs instances GC delete gates (gc.Pacer, as each GC
// function instance has one) for seconds of simulated time in steps of
// step, every instance asking for batch keys as often as its gate lets
// it, all instances of a step concurrently; it returns the keys granted.
// fleet builds instance i's fleet budget (nil: none).
func fleetGranted(t *testing.T, instances int, seconds, step time.Duration, batch int, globalRate float64, fleet func(i int) gc.FleetBudget) float64 {
	t.Helper()
	t0 := time.UnixMilli(1_800_000_000_000)
	type instance struct {
		pacer *gc.Pacer
		now   time.Time
		next  time.Time
		wait  time.Duration
	}
	ins := make([]*instance, instances)
	for i := range ins {
		in := &instance{now: t0, next: t0}
		sleep := func(_ context.Context, d time.Duration) error { in.wait = d; return errWouldWait }
		in.pacer = gc.NewPacer(0, globalRate, batch, func() time.Time { return in.now }, sleep)
		if f := fleet(i); f != nil {
			in.pacer.WithFleet(f)
		}
		ins[i] = in
	}
	var mu sync.Mutex
	granted := 0.0
	for now := t0; now.Before(t0.Add(seconds)); now = now.Add(step) {
		var wg sync.WaitGroup
		for i, in := range ins {
			if in.next.After(now) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				in.now = now
				for range 1000 {
					err := in.pacer.Wait(context.Background(), fmt.Sprintf("c%d", i), batch)
					if errors.Is(err, errWouldWait) {
						in.next = now.Add(in.wait)
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					granted += float64(batch)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	return granted
}

// Issue 16 item 3: the global delete rate holds across instances. Ten GC
// instances (each its own pacer, as each Lambda instance has) share one
// token bucket in the coordinator's table on the embedded stack, racing
// with conditional writes; over 20 simulated seconds they are granted the
// configured rate within ±10% (one burst on top). Without the fleet
// budget the same ten instances delete at ten times the rate. No wall
// clock is involved: time is simulated, grants are counted.
func TestFleetDeleteBudgetHoldsAcrossTenInstances(t *testing.T) {
	embeddedOnly(t, conditionalRaces)
	env := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	const (
		instances = 10
		rate      = 500.0
		batch     = 50
		burst     = 500.0
		seconds   = 20 * time.Second
		step      = 100 * time.Millisecond
	)
	want := rate*seconds.Seconds() + burst
	fleet := fleetGranted(t, instances, seconds, step, batch, rate, func(i int) gc.FleetBudget {
		return awsio.NewTokenBucket(env.Clients.Dynamo, env.Config.Table, "gc-deletes", rate, burst, fmt.Sprintf("instance-%d", i))
	})
	if math.Abs(fleet-want) > 0.1*want {
		t.Fatalf("ten instances with the fleet budget were granted %.0f keys in %s, want %.0f ±10%%", fleet, seconds, want)
	}
	local := fleetGranted(t, instances, seconds, step, batch, rate, func(int) gc.FleetBudget { return nil })
	if local < 5*want {
		t.Fatalf("without the fleet budget ten instances should exceed the rate many times: %.0f vs %.0f", local, want)
	}
	t.Logf("granted in %s: fleet budget %.0f (target %.0f), per-instance budgets only %.0f", seconds, fleet, want, local)
}

// prefixGranted runs instances PrefixBudgets (as each compaction or GC
// instance has one) for seconds of simulated time in steps of step, every
// instance asking for n requests to key as often as its budget lets it,
// all instances of a step concurrently; it returns the requests granted.
func prefixGranted(t *testing.T, env *localenv.Env, instances int, seconds, step time.Duration, write bool, key string, n int, rate float64) float64 {
	t.Helper()
	t0 := time.UnixMilli(1_800_000_000_000)
	type instance struct {
		budget    *awsio.PrefixBudget
		now, next time.Time
		wait      time.Duration
	}
	ins := make([]*instance, instances)
	for i := range ins {
		in := &instance{now: t0, next: t0}
		sleep := func(_ context.Context, d time.Duration) error { in.wait = d; return errWouldWait }
		in.budget = awsio.NewPrefixBudget(env.Clients.Dynamo, env.Config.Table, fmt.Sprintf("instance-%d", i), rate, rate,
			func() time.Time { return in.now }, sleep)
		ins[i] = in
	}
	var mu sync.Mutex
	granted := 0.0
	for now := t0; now.Before(t0.Add(seconds)); now = now.Add(step) {
		var wg sync.WaitGroup
		for _, in := range ins {
			if in.next.After(now) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				in.now = now
				for range 10_000 {
					err := in.budget.Take(context.Background(), write, key, n)
					if errors.Is(err, errWouldWait) {
						in.next = now.Add(in.wait)
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					granted += float64(n)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	return granted
}

// Issue 16 item 3: S3's request rate per prefix holds across instances.
// Ten instances (each its own PrefixBudget, as each compaction or GC
// Lambda instance has one) send writes to one collection's prefix, then
// reads to another's, through token buckets in the coordinator's table on
// the embedded stack; over 20 simulated seconds each prefix is granted
// its configured rate within ±10% (one second of burst on top), whatever
// the other prefix does. Time is simulated, grants are counted.
func TestS3PrefixBudgetHoldsAcrossTenInstances(t *testing.T) {
	embeddedOnly(t, conditionalRaces)
	env := start(t, localenv.Options{NoDelivery: true, HoldS3Events: true})
	const (
		instances = 10
		rate      = 500.0
		seconds   = 20 * time.Second
		step      = 100 * time.Millisecond
	)
	want := rate*seconds.Seconds() + rate
	for _, tc := range []struct {
		write bool
		key   string
		n     int
	}{
		{true, "collections/c1/data/l1/task/0000.seg", 10}, // a GC batch's keys, a compaction's parts
		{false, "collections/c2/data/l0/x.seg", 1},         // a compaction's ranged reads
		{true, "collections/c2/manifests/x.json", 3},       // the same collection's writes: their own rate
	} {
		got := prefixGranted(t, env, instances, seconds, step, tc.write, tc.key, tc.n, rate)
		if math.Abs(got-want) > 0.1*want {
			t.Fatalf("write=%v to %s: ten instances were granted %.0f requests in %s, want %.0f ±10%%", tc.write, awsio.RequestPrefix(tc.key), got, seconds, want)
		}
		t.Logf("write=%v to %s: granted %.0f in %s (target %.0f)", tc.write, awsio.RequestPrefix(tc.key), got, seconds, want)
	}
	if p := awsio.RequestPrefix("query-plane/global_safe_ts.json"); p != "" {
		t.Fatalf("a key outside collections/ counts against %q, want the bucket-wide budget", p)
	}
}
