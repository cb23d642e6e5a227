package localaws

import (
	"maps"
	"sync"
)

// Counter counts requests per "service:Operation".
type Counter struct {
	mu sync.Mutex
	m  map[string]int
}

func newCounter() *Counter { return &Counter{m: map[string]int{}} }

func (c *Counter) add(service, op string) {
	c.mu.Lock()
	c.m[service+":"+op]++
	c.mu.Unlock()
}

// Snapshot returns a copy of the counts.
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// Since returns the counts added after the snapshot before.
func (c *Counter) Since(before map[string]int) map[string]int {
	now := c.Snapshot()
	out := map[string]int{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Total sums a count map.
func Total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
