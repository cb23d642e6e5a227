package localenv

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// DefaultTimeScale is make local's: the embedded stack runs as deployed, 30
// times faster. The scheduled reconciliation (deployed every 5 minutes)
// runs every 10 s; a queue's visibility timeout is its deployed one / 30
// but never below its consumer's timeout, which stays as deployed
// (compaction and GC 1,800 s -> 300 s, handoff 360 s -> 60 s, reconcile
// 180 s -> 30 s: Lambda refuses a queue that hides a message for less
// than its consumer may run, and a redelivered task must find a crashed
// holder's lease expired); the stand-in
// watermark moves every 2 s (the sandbox stack's every minute); with
// ScaledPolicy the GC's horizons shrink by the same factor (token lifetime
// 15 min -> 30 s, retention window 5 min -> 10 s, sweep interval 1 h ->
// 2 min; clock skew 2 min -> 4 s). Function timeouts, leases and every other policy duration stay as
// deployed: they bound work, which locally is small.
const DefaultTimeScale = 30

// ScaledPolicy is p with the GC's time horizons (token lifetime,
// retention window, sweep interval) and the clock-skew allowance they add
// divided by scale, so that under a TimeScale environment superseded
// objects become eligible and sweeps come round as they would deployed,
// scale times sooner (one process has one clock: a smaller skew bound is
// exact there). gc.proof_max_age_ms is capped at half the scaled token
// lifetime, as validation asks. Only these change: the others bound running work (leases,
// timeouts, task lifetime) and policy validation ties them to the function
// timeouts, which stay.
func ScaledPolicy(p policy.Policy, scale float64) policy.Policy {
	if scale <= 1 {
		return p
	}
	div := func(d policy.Duration) policy.Duration {
		return policy.Duration(max(time.Duration(float64(d.D())/scale), time.Millisecond))
	}
	p.GC.TokenLifetime = div(p.GC.TokenLifetime)
	p.GC.ProofMaxAge = min(p.GC.ProofMaxAge, max(p.GC.TokenLifetime/2, policy.Duration(time.Millisecond))) // at most half the token lifetime (policy.Validate)
	p.GC.RetentionWindow = policy.Duration(time.Duration(float64(p.GC.RetentionWindow.D()) / scale))
	p.GC.SweepInterval = div(p.GC.SweepInterval)
	p.ClockSkew = policy.Duration(time.Duration(float64(p.ClockSkew.D()) / scale))
	return p
}

// scheduledEvent is the EventBridge scheduled event the deployed
// reconcile rule sends the observer.
var scheduledEvent = []byte(`{"source":"aws.events","detail-type":"Scheduled Event"}`)

// runSchedules starts what EventBridge does for a deployed stack, scale
// times faster: the reconcile schedule invokes the observer (its reconcile
// requests then reach it through the reconcile queue's event source
// mapping, like every message), and the stand-in query plane's watermark
// advances (as the sandbox stack's watermark function does). A tick that
// finds the previous one still running is skipped. It returns the stop.
func (e *Env) runSchedules(scale float64, now func() time.Time) func() {
	ctx, cancel := context.WithCancel(context.Background())
	sd := resources.SandboxDefinition()
	var wg sync.WaitGroup
	every := func(d time.Duration, name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := f(ctx); err != nil && ctx.Err() == nil {
						e.Log.Warn("local schedule failed; the next tick runs it again", "schedule", name, "err", err)
					}
				}
			}
		}()
	}
	scaled := func(d time.Duration) time.Duration { return max(time.Duration(float64(d)/scale), 10*time.Millisecond) }
	every(scaled(e.Prov.Def.ReconcileSchedule), "reconcile", func(ctx context.Context) error {
		_, err := e.Stack.Invoke(ctx, resources.FnObserver, scheduledEvent)
		return err
	})
	lag := scaled(sd.WatermarkLag)
	every(scaled(sd.WatermarkEvery), "watermark", func(ctx context.Context) error {
		n := now()
		return e.Watermark.Publish(ctx, n.Add(-lag), n)
	})
	e.Log.Info("local schedules running", "time_scale", scale, "reconcile_every", scaled(e.Prov.Def.ReconcileSchedule),
		"watermark_every", scaled(sd.WatermarkEvery), slog.Duration("watermark_lag", lag))
	return func() {
		cancel()
		wg.Wait()
	}
}
