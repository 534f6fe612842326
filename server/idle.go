package server

import "time"

// idleFree is how long the cache must see no read or write before the server gives the Go
// heap's free memory back to the system (debug.FreeOSMemory). The runtime does so on its own
// only slowly, so without it a server that went idle after a load kept the RSS of the load's
// read buffers and values in flight (docs/BENCHMARKS.md, "Memory through a run with the memory
// tier"). The cache lets go of its write buffers after ten flush intervals idle; this comes after.
const idleFree = 15 * time.Second

// idleCheck is how often the server looks at the cache's activity.
const idleCheck = 5 * time.Second

// idleWatch tells when the server has gone idle: fed the cache's count of reads and writes at
// each check, it reports true once per idle period, when that count has not moved for idleFree.
type idleWatch struct {
	last  uint64
	since time.Time // when the count last moved; zero before the first tick
	freed bool      // the memory was given back in this idle period
}

func (w *idleWatch) tick(now time.Time, activity uint64) bool {
	if w.since.IsZero() || activity != w.last {
		w.last, w.since, w.freed = activity, now, false
		return false
	}
	if w.freed || now.Sub(w.since) < idleFree {
		return false
	}
	w.freed = true
	return true
}
