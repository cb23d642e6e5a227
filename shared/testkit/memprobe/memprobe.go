package memprobe

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"syscall"
	"time"
)

// Result is what one probe saw, relative to its start.
type Result struct {
	PeakHeapAlloc uint64        // peak HeapAlloc above the start
	PeakHeapInuse uint64        // peak HeapInuse above the start (what a memory limit must allow)
	PeakLive      uint64        // peak live heap marked by GC cycles above the start
	Allocated     uint64        // bytes allocated
	CPU           time.Duration // user + system CPU of the process
}

// Probe samples until Stop.
type Probe struct {
	base                   runtime.MemStats
	liveBase, cpu0         uint64
	mu                     sync.Mutex
	alloc, inuse, livePeak uint64
	done                   chan struct{}
	wg                     sync.WaitGroup
}

// Start forces a GC, records the baseline and starts sampling.
func Start() *Probe {
	runtime.GC()
	p := &Probe{done: make(chan struct{})}
	runtime.ReadMemStats(&p.base)
	p.liveBase = live()
	p.alloc, p.inuse, p.livePeak = p.base.HeapAlloc, p.base.HeapInuse, p.liveBase
	p.cpu0 = cpuNanos()
	p.wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.sample()
			}
		}
	})
	return p
}

func (p *Probe) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	l := live()
	p.mu.Lock()
	p.alloc, p.inuse, p.livePeak = max(p.alloc, ms.HeapAlloc), max(p.inuse, ms.HeapInuse), max(p.livePeak, l)
	p.mu.Unlock()
}

// Stop ends sampling and returns the result.
func (p *Probe) Stop() Result {
	cpu := cpuNanos() - p.cpu0
	close(p.done)
	p.wg.Wait()
	p.sample()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Result{
		PeakHeapAlloc: p.alloc - p.base.HeapAlloc, PeakHeapInuse: p.inuse - p.base.HeapInuse,
		PeakLive: p.livePeak - p.liveBase, Allocated: ms.TotalAlloc - p.base.TotalAlloc, CPU: time.Duration(cpu),
	}
}

func live() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func cpuNanos() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return uint64(ru.Utime.Nano() + ru.Stime.Nano())
}
