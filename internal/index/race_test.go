//go:build race

package index

// raceEnabled scales down the long tests: the race detector slows memory accesses tens of times.
const raceEnabled = true
