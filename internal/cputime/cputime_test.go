package cputime

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestClocksGrow: spinning for a while adds CPU time to the process's clock, and to the thread's
// for a goroutine locked to its thread.
func TestClocksGrow(t *testing.T) {
	for _, clock := range []struct {
		name  string
		read  func() (time.Duration, bool)
		known []string // the systems where the clock must work
	}{
		{"Process", Process, []string{"linux", "darwin"}},
		{"Thread", Thread, []string{"linux"}},
	} {
		t.Run(clock.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			before, ok := clock.read()
			if !ok {
				if slices.Contains(clock.known, runtime.GOOS) {
					t.Fatalf("no %s CPU time on %s", clock.name, runtime.GOOS)
				}
				t.Skip("no CPU time on", runtime.GOOS)
			}
			x := 0
			for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
				x++
			}
			after, _ := clock.read()
			if after-before < 10*time.Millisecond {
				t.Fatalf("%d iterations over 50 ms of wall time added %v of %s CPU time", x, after-before, clock.name)
			}
		})
	}
}
