package blobcache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache/internal/cputime"
)

// What a write through the page cache costs, measured (writeback.go picks the route with it).
//
// A batch written through the page cache costs the CPU the kernel's work: a page allocated,
// inserted and copied into for each page written. A batch written with O_DIRECT costs the CPU
// almost nothing; its bytes reach the page cache later, if they are hit, by the device's DMA (the
// read route fills the page cache with them then: readroute.go), which costs the CPU the
// allocation and the insert but not the copy in.
//
// How much the first costs depends on the memory more than one would think. Where the host of a
// virtual machine takes back the memory its guest frees (free page reporting, ballooning), the
// first touch of a page the host took back faults in the host, and the guest's CPU waits for it:
// on the machine of docs/BENCHMARKS.md a write through the page cache costs several times more
// CPU per MiB into such memory than into pages the guest freed moments before. A DMA into the
// same pages faults in the host's own time.
//
// So the write route measures the CPU time (the flush worker's thread's) that each batch of
// costBytes or more written through the page cache took, per MiB, and writes back only while
// that cost, averaged, stays under backCostCeiling. Past it, batches go direct, and one batch in
// probeEvery that may be written back still is, so that the cost is measured again and a page
// cache that became cheap is seen.

const (
	// backCostCeiling is the most CPU time a MiB written through the page cache may cost, on
	// average, for write-back to be chosen: about twice what a fill of the same bytes from the
	// device costs the CPU on the machine of docs/BENCHMARKS.md (allocation, insert and the
	// copy out), and above what a write into memory the kernel has at hand costs there.
	backCostCeiling = time.Millisecond
	// probeEvery is how often (one choice in probeEvery, among writes of costBytes or more) a write
	// goes through the page cache while the cost says direct.
	probeEvery = 16
	// costWeight is the weight of the newest measure in the average.
	costWeight = 0.25
	// costBytes is the least a write must be to be measured and to count for the probes.
	costBytes = 1 << 20
)

// routeCost is the recent CPU cost of a MiB written through the page cache. The zero routeCost
// knows nothing yet, and chooses write-back.
type routeCost struct {
	choices atomic.Uint64 // choices for writes of costBytes or more, for the probes
	// fixed, set by tests before the cache writes, keeps write-back chosen for every write that
	// may take it: nothing is measured or probed, so that the route's other rules show alone.
	fixed bool

	mu   sync.Mutex
	back float64 // ns of CPU per MiB, averaged; 0 until measured
}

// backPays reports whether a write of n bytes that may be written back should be: the page
// cache's cost is not measured yet or is under backCostCeiling; or, once in probeEvery choices
// among writes of costBytes or more, whatever the cost.
func (r *routeCost) backPays(n int64) bool {
	if r.fixed {
		return true
	}
	r.mu.Lock()
	back := r.back
	r.mu.Unlock()
	if back < float64(backCostCeiling) {
		return true
	}
	return r.counts(n) && r.choices.Add(1)%probeEvery == 0
}

// counts reports whether a write of n bytes is measured, and counts for the probes.
func (r *routeCost) counts(n int64) bool { return n >= costBytes && !r.fixed }

// note adds a write through the page cache of n bytes that cost used of CPU time.
func (r *routeCost) note(n int64, used time.Duration) {
	if !r.counts(n) {
		return
	}
	perMiB := float64(used) * (1 << 20) / float64(n)
	r.mu.Lock()
	if r.back == 0 {
		r.back = perMiB
	} else {
		r.back += costWeight * (perMiB - r.back)
	}
	r.mu.Unlock()
}

// perMiB is the averaged CPU time of a MiB written through the page cache; 0 until measured.
func (r *routeCost) perMiB() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Duration(r.back)
}

// measure runs write, which writes n bytes through the page cache, and notes the CPU time the
// thread running it used (where the platform tells). The goroutine is locked to its thread
// meanwhile: a write this long outlasts the runtime's patience with a system call, and without
// the lock its goroutine would often go on, after it, on another thread.
func (r *routeCost) measure(n int64, write func() error) error {
	if !r.counts(n) {
		return write()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, ok := cputime.Thread()
	err := write()
	if after, _ := cputime.Thread(); ok && err == nil {
		r.note(n, after-before)
	}
	return err
}
