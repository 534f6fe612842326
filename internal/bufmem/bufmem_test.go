package bufmem

import (
	"runtime"
	"testing"
	"time"
)

// TestTrack: a tracked buffer is counted while reachable and uncounted once collected.
func TestTrack(t *testing.T) {
	before := Bytes()
	b := make([]byte, 1<<20)
	p := &b
	Track(p, cap(b))
	if got := Bytes() - before; got != 1<<20 {
		t.Fatalf("counted %d bytes, want %d", got, 1<<20)
	}
	runtime.GC()
	if got := Bytes() - before; got != 1<<20 {
		t.Fatalf("a reachable buffer was uncounted: %d", got)
	}
	runtime.KeepAlive(p) // p is not used past this point
	deadline := time.Now().Add(5 * time.Second)
	for Bytes() != before {
		if time.Now().After(deadline) {
			t.Fatalf("a collected buffer is still counted: %d bytes over", Bytes()-before)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
