//go:build race

package sim

// raceDetector: the race detector slows every seed about tenfold; the
// long seed sweeps run fewer seeds under it (make sim and sim-ci run the
// full counts without it).
const raceDetector = true
