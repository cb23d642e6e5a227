package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// hotCollection is the collection the hot phase commits to every 100 ms.
const hotCollection = "demo-hot"

// HotFigures are the hot phase's rewrite figures (issue 16 item 1's hot
// workload: does the hot collection still compact, and at what waste?),
// from the metrics the phase added.
type HotFigures struct {
	RewriteFigures
	Seconds float64 `json:"seconds"`
	// HotCommits: appends to the hot collection; HotCutovers: cutovers in
	// its lineage (it still compacts while committing every 100 ms).
	HotCommits  int `json:"hot_commits"`
	HotCutovers int `json:"hot_cutovers"`
	// OtherCommits: appends to the demo's collections meanwhile (one
	// every 200 ms, round robin).
	OtherCommits int `json:"other_commits"`
	// WriteAmp: every collection's compaction over the phase (the hot
	// one and the others' rare commits), and the hot collection's alone
	// (its merges cannot be told apart in the metrics: its figures count
	// the phase's merges; its commits, cutovers and ideal are its own).
	WriteAmp WriteAmp `json:"write_amplification"`
}

// runHot runs the hot phase: demo-hot commits every 100 ms for d while the
// demo's collections commit one append every 200 ms between them; then
// everything settles.
func runHot(ctx context.Context, env *localenv.Env, rec *recorder, names []string, d time.Duration) (HotFigures, error) {
	h := HotFigures{Seconds: d.Seconds()}
	tasks := 0
	rec.mu.Lock()
	rec.hotTasks = &tasks
	rec.mu.Unlock()
	defer func() {
		rec.mu.Lock()
		rec.hotTasks = nil
		rec.mu.Unlock()
	}()
	if err := env.Workload.Create(ctx, hotCollection, contract.Lifecycle{}); err != nil {
		return h, err
	}
	if err := env.Settle(ctx, time.Minute); err != nil {
		return h, err
	}
	before, _ := sumEMF(env.Metrics.String())
	all := append([]string{hotCollection}, names...)
	from, err := MeasureHeads(ctx, env.Lineage, all)
	if err != nil {
		return h, err
	}
	rec.mu.Lock()
	tasks = 0
	rec.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	// The hot collection makes at least the commits d asks for at its
	// rate, however slow a loaded machine's appends are: the phase is about
	// a collection that outruns its compaction, not about the wall clock.
	commit := func(every time.Duration, next func() string, n *int, least int) {
		defer wg.Done()
		for end := time.Now().Add(d); time.Now().Before(end) || *n < least; time.Sleep(every) {
			if _, err := env.Workload.Append(ctx, next(), env.Workload.Random()); err != nil {
				fail(err)
				return
			}
			*n++
		}
	}
	began := time.Now()
	wg.Add(2)
	go commit(100*time.Millisecond, func() string { return hotCollection }, &h.HotCommits, int(d/(100*time.Millisecond)))
	i := 0
	go commit(200*time.Millisecond, func() string { i++; return names[i%len(names)] }, &h.OtherCommits, 0)
	wg.Wait()
	h.Seconds = time.Since(began).Seconds()
	if firstErr != nil {
		return h, fmt.Errorf("hot phase: %w", firstErr)
	}
	if err := env.Settle(ctx, 5*time.Minute); err != nil {
		return h, err
	}
	after, _ := sumEMF(env.Metrics.String())
	delta := map[string]float64{}
	for k, v := range after {
		if dv := v - before[k]; dv != 0 {
			delta[k] = dv
		}
	}
	rec.mu.Lock()
	s := Summary{Metrics: delta, TasksByKind: map[string]int{"compaction": tasks}}
	rec.mu.Unlock()
	h.RewriteFigures = rewriteFigures(&s)
	if h.WriteAmp, err = MeasureWriteAmp(ctx, env.Lineage, compact.PolicyFrom(env.Config.Policy.Compaction), all, from, delta); err != nil {
		return h, fmt.Errorf("hot phase: %w", err)
	}
	w, err := env.Lineage.WalkFrom(ctx, hotCollection, 1)
	if err != nil {
		return h, fmt.Errorf("hot phase: lineage of %s: %w", hotCollection, err)
	}
	for _, r := range w.Roots {
		if r.Origin.Kind == contract.OriginCutover {
			h.HotCutovers++
		}
	}
	return h, nil
}
