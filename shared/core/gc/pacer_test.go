package gc

import (
	"context"
	"testing"
	"time"
)

// TestPacerHoldsTheConfiguredRate: 10 calls of 1000 keys at 2000 keys/s
// (burst 1000) take 4.5 s of injected clock; nothing really sleeps. The
// global budget, shared by two collections, binds when it is lower.
func TestPacerHoldsTheConfiguredRate(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	sleep := func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }
	p := NewPacer(2000, 0, 1000, clock, sleep)
	for range 10 {
		if err := p.Wait(context.Background(), "a", 1000); err != nil {
			t.Fatal(err)
		}
	}
	if got := now.Sub(time.Unix(0, 0)); got != 4500*time.Millisecond {
		t.Fatalf("10000 keys at 2000/s with a 1000 burst took %v, want 4.5s", got)
	}
	now = time.Unix(0, 0)
	g := NewPacer(2000, 1000, 1000, clock, sleep)
	for i := range 4 {
		if err := g.Wait(context.Background(), []string{"a", "b"}[i%2], 1000); err != nil {
			t.Fatal(err)
		}
	}
	if got := now.Sub(time.Unix(0, 0)); got != 3*time.Second {
		t.Fatalf("4000 keys under a 1000/s global budget took %v, want 3s", got)
	}
}
