package blobcache

import (
	"runtime"
	"testing"
	"time"
)

// TestIdleMemory: a cache at default options that has taken writes and then sits idle lets go
// of its write buffers, and holds little beyond its index and bloom filter.
func TestIdleMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	c := open(t, t.TempDir())
	defer c.Close()
	v := make([]byte, 1<<20)
	for i := range 96 {
		if err := c.Put([]byte{byte(i), 'k'}, v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2000 {
		c.Put([]byte{byte(i), byte(i >> 8), 's'}, v[:2000])
	}
	c.Drain()
	busy := c.Stats().BufferBytes
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().BufferBytes > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("write buffers still hold %d bytes after 10 s idle (FlushInterval %v)", c.Stats().BufferBytes, c.opts.FlushInterval)
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := c.Stats()
	beyond := int64(ms.HeapAlloc) - st.IndexBytes - st.BloomBytes
	t.Logf("write buffers %d MiB busy, 0 idle; live heap %.1f MiB: index %.1f, bloom %.1f, the rest %.1f MiB",
		busy>>20, float64(ms.HeapAlloc)/(1<<20), float64(st.IndexBytes)/(1<<20), float64(st.BloomBytes)/(1<<20), float64(beyond)/(1<<20))
	if beyond > 16<<20 {
		t.Fatalf("an idle cache holds %.1f MiB beyond its index and filter", float64(beyond)/(1<<20))
	}
	// The next write works, with a buffer allocated again.
	if err := c.Put([]byte("after"), v[:10]); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get([]byte("after")); !ok || c.Stats().BufferBytes == 0 || c.Stats().BufferReleases == 0 {
		t.Fatal("no write buffer after the idle release")
	}
}
