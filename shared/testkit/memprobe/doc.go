// Package memprobe measures what a piece of work costs the process, for
// benchmarks: peak heap (sampled every millisecond and once at the end)
// above the heap left by a forced GC at the start, peak live heap as the GC
// marked it, bytes allocated, and CPU time from getrusage. Every benchmark
// report of the product measures memory the same way through it.
//
// Figures are process-wide: a benchmark that runs the embedded AWS stack in
// the same process also measures the stack's share.
package memprobe
