package cputime

import (
	"runtime"
	"testing"
	"time"
)

// TestProcessGrows: spinning for a while adds CPU time.
func TestProcessGrows(t *testing.T) {
	before, ok := Process()
	if !ok {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			t.Fatal("no CPU time on a Unix system")
		}
		t.Skip("no CPU time on", runtime.GOOS)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	after, _ := Process()
	if after-before < 10*time.Millisecond {
		t.Fatalf("%d iterations over 50 ms of wall time added %v of CPU time", x, after-before)
	}
}

// TestThreadGrows: a thread spinning for a while, locked to it, uses CPU time on it.
func TestThreadGrows(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, ok := Thread()
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("no thread CPU time on Linux")
		}
		t.Skip("no thread CPU time on", runtime.GOOS)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	after, _ := Thread()
	if after-before < 10*time.Millisecond {
		t.Fatalf("%d iterations over 50 ms of wall time added %v of the thread's CPU time", x, after-before)
	}
}
