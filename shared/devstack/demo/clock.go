package demo

import (
	"sync"
	"time"
)

// Clock is the demo's product clock: it runs with real time from t, and
// the demo advances it to show what happens after token lifetimes and
// retention windows pass, without waiting for them. Between jumps, time
// passes as it does for the functions (a commit's age, a task's wait and a
// merge's duration are real).
type Clock struct {
	mu     sync.Mutex
	start  time.Time // real time at t
	t      time.Time
	jumped time.Duration
}

// NewClock starts at t.
func NewClock(t time.Time) *Clock { return &Clock{start: time.Now(), t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.Add(c.jumped + time.Since(c.start))
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.jumped += d
	c.mu.Unlock()
}
