package server

import (
	"testing"
	"time"
)

// TestIdleWatch: the memory is given back once per idle period, idleFree after the last read or
// write, and not while requests keep coming.
func TestIdleWatch(t *testing.T) {
	var w idleWatch
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		at       time.Duration
		activity uint64
		want     bool
	}{
		{0, 10, false},                                // first look
		{idleCheck, 11, false},                        // busy
		{2 * idleCheck, 11, false},                    // quiet since idleCheck, for less than idleFree
		{idleCheck + idleFree, 11, true},              // quiet for idleFree: give back
		{idleCheck + idleFree + idleCheck, 11, false}, // once per idle period
		{10 * idleCheck, 12, false},                   // busy again
		{10*idleCheck + idleFree, 12, true},
	}
	for i, s := range steps {
		if got := w.tick(t0.Add(s.at), s.activity); got != s.want {
			t.Fatalf("step %d (at %v, activity %d): %v, want %v", i, s.at, s.activity, got, s.want)
		}
	}
}
