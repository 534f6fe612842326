package policy

import (
	"sync/atomic"
	"time"
)

// Budget is a write budget in device bytes per second: a generic cell rate algorithm. tat is the
// theoretical arrival time (Unix nanoseconds) at which the writes admitted so far would be paid
// for at the budget's rate; a write is admitted if, with its cost added, tat is at most a burst
// (one second) ahead of now. Lock-free: one compare-and-swap per write.
type Budget struct {
	nsPerByte float64
	burst     int64 // ns
	clock     func() time.Time
	tat       atomic.Int64
}

// NewBudget returns a budget of bytesPerSecond (> 0) on clock.
func NewBudget(bytesPerSecond int64, clock func() time.Time) *Budget {
	return &Budget{nsPerByte: 1e9 / float64(bytesPerSecond), burst: int64(time.Second), clock: clock}
}

// Take charges n bytes; false (nothing charged) if that goes over the budget, unless force.
func (b *Budget) Take(n int64, force bool) bool {
	now := b.clock().UnixNano()
	cost := int64(float64(n) * b.nsPerByte)
	for {
		tat := b.tat.Load()
		next := max(tat, now) + cost
		if !force && next-now > b.burst {
			return false
		}
		if b.tat.CompareAndSwap(tat, next) {
			return true
		}
	}
}
